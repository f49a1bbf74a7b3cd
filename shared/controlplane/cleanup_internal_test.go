package controlplane

import (
	"errors"
	"testing"
)

// TestCleanupKeepsUpWithAnnouncing: the cleanup job deleted one batch of
// each table a run, while announcing again adds a row a minute for every
// pending command nobody claims, without a bound: past a batch of such
// commands a shard the outbox grew for ever (the liveness review of
// 2026-11-29, F8). Now a run deletes batches until one comes back short.
func TestCleanupKeepsUpWithAnnouncing(t *testing.T) {
	for _, c := range []struct {
		name    string
		rows    int64
		fail    int // the call that fails (1-based), 0: none
		calls   int
		deleted int64
	}{
		{"nothing to delete", 0, 0, 1, 0},
		{"less than a batch", 42, 0, 1, 42},
		{"exactly a batch", cleanupBatch, 0, 2, cleanupBatch},
		{"several batches", 3*cleanupBatch + 7, 0, 4, 3*cleanupBatch + 7},
		{"a failure stops the run", 3 * cleanupBatch, 2, 2, cleanupBatch},
	} {
		left, calls := c.rows, 0
		n, err := deleteBatches(func(limit int) (int64, error) {
			calls++
			if calls == c.fail {
				return 0, errors.New("connection lost")
			}
			d := min(left, int64(limit))
			left -= d
			return d, nil
		})
		if calls != c.calls || n != c.deleted || (err != nil) != (c.fail != 0) {
			t.Errorf("%s: %d calls deleted %d (error %v); want %d calls deleting %d", c.name, calls, n, err, c.calls, c.deleted)
		}
	}
}
