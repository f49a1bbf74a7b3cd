package controlplane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMarkerGroupsWhatArrivesWhileMarking: rows published while a mark is in
// flight are marked together in the next statement, each caller learns its
// own statement's outcome, and a mark after the others runs on its own.
func TestMarkerGroupsWhatArrivesWhileMarking(t *testing.T) {
	ctx := context.Background()
	down := errors.New("the database is away")
	inFirst, release := make(chan struct{}), make(chan struct{})
	var (
		mu      sync.Mutex
		batches [][]int64
	)
	m := &marker{do: func(_ context.Context, ids []int64) error {
		mu.Lock()
		batches = append(batches, slices.Sorted(slices.Values(ids)))
		n := len(batches)
		mu.Unlock()
		switch n {
		case 1:
			close(inFirst)
			<-release
		case 2:
			return down
		}
		return nil
	}}
	errs := make([]error, 6)
	var wg sync.WaitGroup
	mark := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.mark(ctx, []int64{int64(i)})
		}()
	}
	mark(1)
	<-inFirst
	for i := 2; i <= 4; i++ {
		mark(i)
	}
	for queued := 0; queued < 3; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		queued = len(m.waiting)
		m.mu.Unlock()
	}
	close(release)
	wg.Wait()
	mark(5)
	wg.Wait()
	want := [][]int64{{1}, {2, 3, 4}, {5}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("marked in the statements %v, want %v", batches, want)
	}
	for i, err := range errs[1:] {
		if wantErr := i+1 >= 2 && i+1 <= 4; (err != nil) != wantErr {
			t.Errorf("caller %d: %v, want an error: %v", i+1, err, wantErr)
		}
	}
}

// TestMarkerLeaderLeavingFailsNobody: the caller who marks next may be one
// whose request has ended; the statement runs on a context of its own, so
// the rows of the callers queued with it are still marked.
func TestMarkerLeaderLeavingFailsNobody(t *testing.T) {
	inFirst, release := make(chan struct{}), make(chan struct{})
	var (
		mu      sync.Mutex
		batches [][]int64
	)
	m := &marker{do: func(ctx context.Context, ids []int64) error {
		mu.Lock()
		batches = append(batches, slices.Sorted(slices.Values(ids)))
		first := len(batches) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-release
		}
		return ctx.Err() // what a statement on a cancelled context answers
	}}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	mark := func(ctx context.Context, i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.mark(ctx, []int64{int64(i)})
		}()
	}
	mark(context.Background(), 1)
	<-inFirst
	mark(gone, 2) // first in line: it marks the next statement
	for queued := 0; queued < 1; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		queued = len(m.waiting)
		m.mu.Unlock()
	}
	mark(context.Background(), 3)
	for queued := 0; queued < 2; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		queued = len(m.waiting)
		m.mu.Unlock()
	}
	close(release)
	wg.Wait()
	want := [][]int64{{1}, {2, 3}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("marked in the statements %v, want %v", batches, want)
	}
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("caller %d: %v, want its rows marked", i+1, err)
		}
	}
}
