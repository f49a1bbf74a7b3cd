package controlplane

import (
	"container/list"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/store"
)

// snapCache keeps the snapshots this process committed last, decoded, so the
// next transaction on the same execution — the next step of a chain, most
// often in the same process — skips decoding the state column, the largest
// cost of a step in the server. An entry is used only while its seq is the
// locked row's last_seq: every change of the state comes with a new event, so
// an equal seq is the same state, and the row lock keeps it so. Entries are
// shared, never changed: a transaction folds triggers into clones.
type snapCache struct {
	mu     sync.Mutex
	budget int // bytes of encoded snapshots kept at most
	used   int
	lru    *list.List // front: most recent
	byID   map[int64]*list.Element
	// byIssued names the execution of each pending command an entry
	// wrote, by its command.issued event id: a claim names only that id,
	// and knowing the execution lets its lock leave the state out.
	byIssued map[int64]int64
}

type snapEntry struct {
	id   int64
	seq  int64
	size int
	snap *engine.Snapshot
	// enc is snap's encoding (nil when this txn did not encode it): the
	// next state of the execution is encoded against it, copying the steps
	// that did not change. size counts its bytes (and the payloads of the
	// claimable commands in cmds).
	enc *engine.Encoded
	// What the committing txn knew besides the state, for a txn that
	// assumes it (txn.assume): the row as written (State left out), the
	// command rows it wrote, the database clock it read and when (local,
	// monotonic), and since when the database was reachable.
	row       *store.Execution
	cmds      []store.Command
	now       time.Time
	local     time.Time
	reachable time.Time
}

func newSnapCache(budget int) *snapCache {
	return &snapCache{budget: budget, lru: list.New(), byID: map[int64]*list.Element{}, byIssued: map[int64]int64{}}
}

// get returns the entry of execution id at seq, if kept.
func (c *snapCache) get(id, seq int64) (snapEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		return snapEntry{}, false
	}
	e := el.Value.(*snapEntry)
	if e.seq != seq {
		return snapEntry{}, false
	}
	c.lru.MoveToFront(el)
	return *e, true
}

// pin returns the cached snapshots of ids with their seqs. A txn keeps
// them for its lifetime, so one evicted between its lock and its fold is
// still at hand for a row whose state the lock left out.
func (c *snapCache) pin(ids []int64) map[int64]snapEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int64]snapEntry{}
	for _, id := range ids {
		if el := c.byID[id]; el != nil {
			out[id] = *el.Value.(*snapEntry)
		}
	}
	return out
}

// executionOf returns the execution of the pending command issued by event
// issuedEventID, when an entry wrote it.
func (c *snapCache) executionOf(issuedEventID int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.byIssued[issuedEventID]
	return id, ok
}

// put keeps e (the snapshot of execution e.id at e.seq; e.size is its
// encoded length).
func (c *snapCache) put(e snapEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keep(e)
}

func (c *snapCache) keep(e snapEntry) {
	c.remove(e.id)
	if e.size > c.budget/4 {
		return // one huge execution must not evict everything else
	}
	c.byID[e.id] = c.lru.PushFront(&e)
	c.used += e.size
	for _, k := range e.cmds {
		if k.Status == store.CommandPending && k.IssuedEventID != 0 {
			c.byIssued[k.IssuedEventID] = e.id
		}
	}
	for c.used > c.budget {
		c.remove(c.lru.Back().Value.(*snapEntry).id)
	}
}

// restore puts e back unless an entry of its execution is there (a newer
// one, put since e was taken).
func (c *snapCache) restore(e snapEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID[e.id] == nil {
		c.keep(e)
	}
}

// drop forgets an execution (its transaction did not commit).
func (c *snapCache) drop(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remove(id)
}

func (c *snapCache) remove(id int64) {
	if el := c.byID[id]; el != nil {
		e := el.Value.(*snapEntry)
		c.used -= e.size
		for _, k := range e.cmds {
			if c.byIssued[k.IssuedEventID] == id {
				delete(c.byIssued, k.IssuedEventID)
			}
		}
		c.lru.Remove(el)
		delete(c.byID, id)
	}
}
