package controlplane

import (
	"context"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// marker marks a shard's published outbox rows: the rows of every
// transaction that published while a mark was in flight go in the next
// statement, together. Under load many transactions commit at once on a
// shard, and each sent a statement and a commit of its own to say what it
// published; now one does for all of them, as Postgres's group commit does
// for the WAL. Each caller still returns once its rows are marked (or the
// statement failed), as before.
type marker struct {
	mu      sync.Mutex
	ids     []int64
	waiting []chan markTurn // callers whose rows are in ids, in arrival order
	busy    bool            // a caller is marking
	do      func(ctx context.Context, ids []int64) error
}

// markTurn tells a waiting caller its rows' outcome, or that it marks next.
type markTurn struct {
	err  error
	lead bool
}

func newMarkers(st *store.Store) []*marker {
	out := make([]*marker, st.NumShards())
	for i := range out {
		pool := st.Shard(i).Pool()
		out[i] = &marker{do: func(ctx context.Context, ids []int64) error {
			_, err := store.MarkOutboxPublished(ctx, pool, ids)
			return err
		}}
	}
	return out
}

// markTimeout bounds one marking statement. It runs apart from its caller's
// context: the rows it marks are mostly other callers', so a leading caller
// whose request ends (its client gone) must not fail theirs.
const markTimeout = 10 * time.Second

// mark marks ids published, with whatever other callers queued meanwhile.
// The first caller marks; those arriving while it does wait, and the first
// of them marks all of theirs next. A waiter never gives up its turn (the
// statement runs on a context of its own, markTimeout), so the chain never
// stalls.
func (m *marker) mark(ctx context.Context, ids []int64) error {
	me := make(chan markTurn, 1)
	m.mu.Lock()
	m.ids = append(m.ids, ids...)
	m.waiting = append(m.waiting, me)
	lead := !m.busy
	m.busy = true
	m.mu.Unlock()
	if !lead {
		if t := <-me; !t.lead {
			return t.err
		}
	}
	m.mu.Lock()
	batch, served := m.ids, m.waiting
	m.ids, m.waiting = nil, nil
	m.mu.Unlock()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	err := m.do(dctx, batch)
	cancel()
	m.mu.Lock()
	var next chan markTurn
	if len(m.waiting) > 0 {
		next = m.waiting[0]
	} else {
		m.busy = false
	}
	m.mu.Unlock()
	for _, w := range served {
		if w != me {
			w <- markTurn{err: err}
		}
	}
	if next != nil {
		next <- markTurn{lead: true}
	}
	return err
}
