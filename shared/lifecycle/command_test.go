package lifecycle_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// TestCheck: the transitions table allows what the control plane does and
// refuses the rest, each by who causes it.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		from, to string
		by       lifecycle.Actor
		ok       bool
	}{
		{lifecycle.Pending, lifecycle.Claimed, lifecycle.Claim, true},
		{lifecycle.Pending, lifecycle.Running, lifecycle.Claim, true},
		{lifecycle.Claimed, lifecycle.Running, lifecycle.Start, true},
		{lifecycle.Running, lifecycle.Completed, lifecycle.Report, true},
		{lifecycle.Claimed, lifecycle.Failed, lifecycle.Report, true},
		{lifecycle.Running, lifecycle.Expired, lifecycle.Sweep, true},
		{lifecycle.Running, lifecycle.Failed, lifecycle.Sweep, true},
		{lifecycle.Expired, lifecycle.Pending, lifecycle.Engine, true},
		{lifecycle.Running, lifecycle.Pending, lifecycle.Engine, true}, // a reported failure retried at once
		{lifecycle.Pending, lifecycle.Cancelled, lifecycle.Engine, true},
		{"", lifecycle.Cancelled, lifecycle.Engine, true}, // a row the txn did not read
		{lifecycle.Pending, lifecycle.Pending, lifecycle.Announce, true},
		{lifecycle.Running, lifecycle.Running, lifecycle.Claim, true}, // the holder claiming again

		{lifecycle.Pending, lifecycle.Completed, lifecycle.Report, false}, // nobody held it
		{lifecycle.Running, lifecycle.Completed, lifecycle.Sweep, false},  // a sweep never completes
		{lifecycle.Running, lifecycle.Expired, lifecycle.Report, false},   // only a sweep expires
		{lifecycle.Completed, lifecycle.Pending, lifecycle.Engine, false}, // no retry of a success
		{lifecycle.Expired, lifecycle.Claimed, lifecycle.Claim, false},    // a retry goes through PENDING
		{lifecycle.Cancelled, lifecycle.Running, lifecycle.Claim, false},
		{lifecycle.Pending, lifecycle.Running, lifecycle.Start, false}, // started before claimed
	} {
		err := lifecycle.Check(c.from, c.to, c.by)
		if (err == nil) != c.ok {
			t.Errorf("%s: %s → %s: %v, want allowed %v", c.by, c.from, c.to, err, c.ok)
		}
	}
}
