package controlplane

import (
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/store"
)

// TestSnapCacheKnowsWhosePendingCommand: a claim names a command by its
// command.issued event only; the cache answers whose execution that is for
// the pending commands its entries wrote, and forgets it once a newer entry
// of the execution (the claim's own, say) or an eviction replaces the entry.
func TestSnapCacheKnowsWhosePendingCommand(t *testing.T) {
	c := newSnapCache(100)
	snap := &engine.Snapshot{}
	c.put(snapEntry{id: 1, seq: 5, size: 10, snap: snap, cmds: []store.Command{
		{CommandID: "1:a:50", ExecutionID: 1, IssuedEventID: 50, Status: store.CommandCompleted},
		{CommandID: "1:b:60", ExecutionID: 1, IssuedEventID: 60, Status: store.CommandPending},
	}})
	if id, ok := c.executionOf(60); !ok || id != 1 {
		t.Fatalf("pending command 60: execution %d %v, want 1", id, ok)
	}
	if _, ok := c.executionOf(50); ok {
		t.Fatal("a completed command is answered: only pending ones are claimed")
	}
	// The claim's commit: the same command, now claimed.
	c.put(snapEntry{id: 1, seq: 6, size: 10, snap: snap, cmds: []store.Command{
		{CommandID: "1:b:60", ExecutionID: 1, IssuedEventID: 60, Status: store.CommandClaimed},
	}})
	if _, ok := c.executionOf(60); ok {
		t.Fatal("a command claimed since is still answered")
	}
	c.put(snapEntry{id: 2, seq: 3, size: 10, snap: snap, cmds: []store.Command{
		{CommandID: "2:a:70", ExecutionID: 2, IssuedEventID: 70, Status: store.CommandPending},
	}})
	// Entries past the budget are evicted, oldest first, with what they knew.
	for id := int64(3); id <= 6; id++ {
		c.put(snapEntry{id: id, seq: 1, size: 24, snap: snap})
	}
	if c.pin([]int64{2})[2].snap != nil {
		t.Fatal("execution 2 was not evicted: the test's budget is wrong")
	}
	if _, ok := c.executionOf(70); ok {
		t.Fatal("an evicted entry's command is still answered")
	}
}
