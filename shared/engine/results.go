package engine

import (
	"errors"
	"fmt"
	"strings"
)

// ResultKind separates the kinds of values kept outside the snapshot (R-S1).
type ResultKind string

const (
	// KindStepResult is a visit's whole result (Index is -1) or one iteration's.
	KindStepResult ResultKind = "result"
	// KindLoopItem is one item of a loop's collection, stored when the loop starts so
	// later iterations can be issued without re-rendering it.
	KindLoopItem ResultKind = "item"
	// KindReference is a worker's result stored by reference (result_kind "ref",
	// worker.md §1): URI names it; the caller reads it from its result store.
	KindReference ResultKind = "ref"
)

// ResultKey addresses one value kept outside the snapshot.
type ResultKey struct {
	Kind  ResultKind `json:"kind"`
	Step  string     `json:"step"`
	Visit int        `json:"visit"`
	Index int        `json:"index"`
	URI   string     `json:"uri,omitempty"` // KindReference only
}

// Stored is the key under which the value is read: a reference is named by
// its URI alone, whichever step's result it is.
func (k ResultKey) Stored() ResultKey {
	if k.Kind == KindReference {
		return RefKey(k.URI)
	}
	return k
}

// RefKey is the key a value stored by reference is read under: its URI alone.
func RefKey(uri string) ResultKey { return ResultKey{Kind: KindReference, Index: -1, URI: uri} }

func (k ResultKey) String() string {
	if k.Kind == KindReference {
		return fmt.Sprintf("%s/%s", k.Kind, k.URI)
	}
	return fmt.Sprintf("%s/%s#%d[%d]", k.Kind, k.Step, k.Visit, k.Index)
}

// Inputs are what a Handle call may need besides the snapshot.
type Inputs struct {
	// Results holds stored values the caller loaded (after a NeedResultsError).
	Results map[ResultKey]any
	// NewID returns a fresh event id; every emitted event takes one.
	NewID func() int64
}

// NeedResultsError asks the caller to load stored values and call Handle again with
// a fresh copy of the snapshot. Handle is pure, so the retry is safe; the snapshot
// passed to the failed call must be discarded.
type NeedResultsError struct{ Keys []ResultKey }

func (e *NeedResultsError) Error() string {
	parts := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		parts[i] = k.String()
	}
	return "engine: needs stored results " + strings.Join(parts, ", ")
}

// MaxRounds bounds how many times one event is decided again after loading
// stored values. A decision asks for all it finds missing in each block it
// renders, and each round for values not loaded before, so rounds end by
// themselves; the bound only stops a loop that would not.
const MaxRounds = 1000

// Rounds is the one rule for deciding an event again after loading what the
// engine asked for, which every caller of Handle follows (the control plane,
// the simulator, what-if): keep going while each round asks for values not
// loaded yet. The zero value is ready; it allocates only once a value is
// asked for.
type Rounds struct {
	n      int
	loaded map[ResultKey]struct{}
}

// Next takes what a Handle call returned. With no error, or an error other
// than NeedResultsError, the decision is over: Next returns nil and that
// error. Otherwise it returns the keys to load into Inputs.Results before
// deciding again on a fresh copy of the snapshot, or an error naming the keys
// when they were all loaded before (the loader stores them under other keys)
// or after MaxRounds rounds.
func (r *Rounds) Next(err error) ([]ResultKey, error) {
	if err == nil {
		return nil, nil
	}
	var need *NeedResultsError
	if !errors.As(err, &need) {
		return nil, err
	}
	if r.loaded == nil {
		r.loaded = make(map[ResultKey]struct{}, len(need.Keys))
	}
	var fresh []ResultKey
	for _, k := range need.Keys {
		if _, done := r.loaded[k]; !done {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) == 0 {
		return nil, fmt.Errorf("%w, all loaded before: the loader must put each into Inputs.Results under the key asked for", err)
	}
	if r.n++; r.n > MaxRounds {
		return nil, fmt.Errorf("%w, after %d rounds of loading stored values for one event (engine.MaxRounds)", err, MaxRounds)
	}
	for _, k := range fresh {
		r.loaded[k] = struct{}{}
	}
	return fresh, nil
}
