package redact

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// MinSecretLen is the shortest value a Masker masks. Masking every occurrence
// of a 3-character password would rewrite unrelated text ("abc" in every
// word that contains it) and still hide little; such a value is left alone,
// so keep real secrets at least this long.
const MinSecretLen = 6

// Masker replaces every occurrence of registered secret strings with Mask,
// wherever they appear: whole strings, inside larger strings, and in map keys,
// the way CI systems mask registered secrets. Each secret is also matched in
// the forms it takes inside JSON text (escaped) and URLs (percent-encoded),
// since a secret read back from a JSON credential or a DSN appears that way.
//
// A Masker is immutable and safe for concurrent use; the nil *Masker masks
// nothing.
type Masker struct {
	secrets []string // every form, longest first
	r       *strings.Replacer
}

// NewMasker returns a Masker for values; values shorter than MinSecretLen
// are ignored.
func NewMasker(values ...string) *Masker { return (*Masker)(nil).With(values...) }

// With returns a Masker that also masks values (m itself when none is new).
func (m *Masker) With(values ...string) *Masker {
	set := map[string]bool{}
	if m != nil {
		for _, s := range m.secrets {
			set[s] = true
		}
	}
	added := false
	for _, v := range values {
		if len(v) < MinSecretLen {
			continue
		}
		for _, f := range forms(v) {
			if !set[f] {
				set[f], added = true, true
			}
		}
	}
	if !added {
		return m
	}
	secrets := slices.Collect(maps.Keys(set))
	// Longest first: at one position the replacer takes the first pattern that
	// matches, so a secret containing another is masked whole.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, Mask)
	}
	return &Masker{secrets: secrets, r: strings.NewReplacer(pairs...)}
}

// forms are the spellings of one secret: itself, JSON-escaped (without the
// quotes), percent-encoded as a query value and as a URL password (a DSN's),
// when they differ.
func forms(v string) []string {
	out := []string{v}
	if b, err := json.Marshal(v); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	out = append(out, url.QueryEscape(v), strings.TrimPrefix(url.UserPassword("", v).String(), ":"))
	slices.Sort(out)
	return slices.Compact(out)
}

// Empty reports whether m masks nothing.
func (m *Masker) Empty() bool { return m == nil || len(m.secrets) == 0 }

// String returns s with every registered secret replaced by Mask.
func (m *Masker) String(s string) string {
	if m.Empty() || len(s) < MinSecretLen {
		return s
	}
	return m.r.Replace(s)
}

// Value returns v with registered secrets masked in every string and map key.
// It copies only what it changes; v is never modified. Of two keys that become
// equal once masked one value is kept (the same one every time).
func (m *Masker) Value(v any) any {
	if m.Empty() {
		return v
	}
	out, _ := m.walk(v)
	return out
}

// Redact applies the key and shape rule of the package function Value, then
// masks m's secrets: what the API serves to users.
func (m *Masker) Redact(v any) any { return m.Value(Value(v)) }

func (m *Masker) walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if s := m.String(x); s != x {
			return s, true
		}
	case map[string]any:
		var out map[string]any
		for _, k := range slices.Sorted(maps.Keys(x)) {
			nk := m.String(k)
			nv, changed := m.walk(x[k])
			if !changed && nk == k {
				continue
			}
			if out == nil {
				out = maps.Clone(x)
			}
			if nk != k {
				delete(out, k)
			}
			out[nk] = nv
		}
		if out != nil {
			return out, true
		}
	case []any:
		return walkList(x, m.walk)
	}
	return v, false
}

// Collect returns the secrets inside v: every string under a secret-named key
// (at any depth below it) and every string that looks like a credential
// (SecretString); for "Bearer x" and "Basic x" also x. A worker registers
// these from a command so that whatever a tool echoes of them is masked.
func Collect(v any) []string {
	var out []string
	collect(v, false, &out)
	return out
}

func collect(v any, secret bool, out *[]string) {
	switch x := v.(type) {
	case string:
		if secret || SecretString(x) {
			*out = append(*out, x)
			for _, p := range []string{"Bearer ", "Basic "} {
				if rest, ok := strings.CutPrefix(x, p); ok {
					*out = append(*out, rest)
				}
			}
		}
	case map[string]any:
		for k, e := range x {
			collect(e, secret || SecretKey(k), out)
		}
	case []any:
		for _, e := range x {
			collect(e, secret, out)
		}
	}
}

// Secrets is a growing set of secrets, shared by the parts of a process that
// learn them (a worker's credential lookups) and those that mask with them
// (its reports and logs). Safe for concurrent use; the zero value is empty.
type Secrets struct {
	mu sync.Mutex
	m  *Masker
}

// Add registers values (see MinSecretLen).
func (s *Secrets) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = s.m.With(values...)
}

// Masker returns a Masker for the secrets registered so far.
func (s *Secrets) Masker() *Masker {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}
