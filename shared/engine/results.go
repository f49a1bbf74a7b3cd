package engine

import (
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
