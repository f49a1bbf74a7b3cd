package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestMaskerMasks: a registered secret is masked wherever it appears, in the
// forms it takes in JSON text and URLs too.
func TestMaskerMasks(t *testing.T) {
	m := NewMasker("hunter2-pw", `q"uo\te`, "p@ss w/rd", "tok-123456")
	in := map[string]any{
		"whole":   "hunter2-pw",
		"inside":  "login with hunter2-pw twice: hunter2-pw",
		"environ": "NOETL_CREDENTIAL_DB={\"password\":\"q\\\"uo\\\\te\"}\x00NOETL_WORKER_TOKEN=tok-123456\x00",
		"dsn":     "postgres://u:p%40ss+w%2Frd@h/db and postgres://u:p%40ss%20w%2Frd@h/db",
		"list":    []any{"x", "tok-123456", int64(7)},
		"nested":  map[string]any{"hunter2-pw": "as a key"},
		"number":  int64(123456),
	}
	got := m.Value(in).(map[string]any)
	want := map[string]any{
		"whole":   Mask,
		"inside":  "login with " + Mask + " twice: " + Mask,
		"environ": "NOETL_CREDENTIAL_DB={\"password\":\"" + Mask + "\"}\x00NOETL_WORKER_TOKEN=" + Mask + "\x00",
		"dsn":     "postgres://u:" + Mask + "@h/db and postgres://u:" + Mask + "@h/db",
		"list":    []any{"x", Mask, int64(7)},
		"nested":  map[string]any{Mask: "as a key"},
		"number":  int64(123456),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("masked:\n got  %q\n want %q", got, want)
	}
	if in["whole"] != "hunter2-pw" || in["nested"].(map[string]any)["hunter2-pw"] != "as a key" {
		t.Fatal("input modified")
	}

	// A secret that contains another is masked whole, not in pieces.
	m = NewMasker("secret", "secret-and-more")
	if got := m.String("x secret-and-more y secret"); got != "x "+Mask+" y "+Mask {
		t.Fatalf("overlap: %q", got)
	}
	// With adds; the original keeps its set.
	m2 := m.With("another-one")
	if m2.String("another-one") != Mask || m.String("another-one") != "another-one" {
		t.Fatal("With must add to a copy")
	}
}

// TestMaskerKeeps: short values are never registered (they would rewrite
// unrelated text), data without secrets is returned as is, uncopied.
func TestMaskerKeeps(t *testing.T) {
	m := NewMasker("", "pw", "12345", "postgres-password")
	if m.String("pw 12345 postgres") != "pw 12345 postgres" {
		t.Fatal("values shorter than MinSecretLen must not be masked")
	}
	in := map[string]any{"user": "postgres", "password_hint": "ask", "n": int64(12345), "l": []any{"a"}}
	got := m.Value(in)
	if !reflect.DeepEqual(got, in) || reflect.ValueOf(got).Pointer() != reflect.ValueOf(in).Pointer() {
		t.Fatalf("changed or copied: %v", got)
	}
	var none *Masker
	if !none.Empty() || none.String("anything") != "anything" || none.Value(in) == nil {
		t.Fatal("the nil Masker masks nothing")
	}
	if NewMasker("pw") != nil {
		t.Fatal("a Masker of nothing maskable is nil")
	}
}

// TestMaskerRedact: what the API serves gets the key rule and the values.
func TestMaskerRedact(t *testing.T) {
	m := NewMasker("from-workload")
	got := m.Redact(map[string]any{"api_key": "k", "cmd": "curl -u x:from-workload", "author": "Ada"})
	want := map[string]any{"api_key": Mask, "cmd": "curl -u x:" + Mask, "author": "Ada"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

func TestCollect(t *testing.T) {
	got := Collect(map[string]any{
		"password": "pw-value", "db": map[string]any{"client_secret": map[string]any{"v": "deep"}},
		"headers": []any{"Bearer tok-abc"}, "author": "Ada", "token": int64(5),
	})
	slices.Sort(got)
	want := []string{"Bearer tok-abc", "deep", "pw-value", "tok-abc"}
	if !slices.Equal(got, want) {
		t.Fatalf("Collect = %q, want %q", got, want)
	}
}

func TestSecretsConcurrent(t *testing.T) {
	var s Secrets
	if !s.Masker().Empty() {
		t.Fatal("zero Secrets is empty")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Add(strings.Repeat(string(rune('a'+i)), 8))
			_ = s.Masker().String("x")
		}()
	}
	wg.Wait()
	for i := range 8 {
		v := strings.Repeat(string(rune('a'+i)), 8)
		if s.Masker().String(v) != Mask {
			t.Fatalf("%s not registered", v)
		}
	}
}

// TestLogHandler: no log record carries a registered secret or a value under
// a secret-named key, including secrets registered after the logger was made.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	var s Secrets
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil), &s))
	s.Add("tok-early-1")
	log = log.With("early", "with tok-early-1")
	s.Add("tok-late-22")
	log.Info("saw tok-late-22", "error", errors.New("dial: tok-late-22 refused"), "token", "anything",
		"body", map[string]any{"password": "x", "k": "tok-late-22"}, "n", 3, "odd", struct{ S string }{"tok-late-22"},
		slog.Group("g", "inner", "tok-late-22"))
	out := buf.String()
	if strings.Contains(out, "tok-late-22") || strings.Contains(out, "tok-early-1") || strings.Contains(out, `"token":"anything"`) || strings.Contains(out, `"password":"x"`) {
		t.Fatalf("a secret reached the log: %s", out)
	}
	for _, want := range []string{`"msg":"saw [REDACTED]"`, `"n":3`, `"error":"dial: [REDACTED] refused"`, `"inner":"[REDACTED]"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %s: %s", want, out)
		}
	}
}
