package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
)

// The liveness invariant: every RUNNING (or FAILING) execution always has
// something that will move it. A pending command is announced, and
// announced again until a worker claims it (lifecycle.ReannounceDue); a
// held command's lease ends, never past the step's time limit
// (lifecycle.LeaseEnd), and the drain's lease job or a claim sweeps it; a
// retry waits for its time; a running child ends and reports; a cancelled
// parent's children are cancelled by the drain. An execution with none of
// these stays RUNNING for ever. Doctor lists those, and those whose movers
// have waited on the drain for longer than DoctorOverdue (the drain is not
// running), each with why: GET /api/doctor, `noetl doctor`, the dashboard.

// DoctorOverdue is how long a command may wait on the drain (announced
// again, its ended lease swept) before Doctor names its execution: the drain
// runs every minute in AWS and every second under `noetl dev`.
const DoctorOverdue = 5 * time.Minute

// Stall is an execution Doctor names, and why.
type Stall struct {
	store.Stall
	Reason string
}

// Doctor checks the liveness invariant on every shard, listing up to limit
// (1..1000) executions that break it, in id order per shard.
func (s *Service) Doctor(ctx context.Context, limit int) ([]Stall, error) {
	if limit < 1 || limit > 1000 {
		return nil, Errorf(ErrInvalid, "limit: expected 1..1000, got %d", limit)
	}
	var out []Stall
	for i := range s.st.NumShards() {
		found, err := store.Stalls(ctx, s.st.Shard(i).Pool(), DoctorOverdue, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		failing := s.drained.of(i)
		for _, f := range found {
			out = append(out, Stall{Stall: f, Reason: stallReason(f, i, failing)})
		}
		if len(out) >= limit {
			break
		}
	}
	return out, nil
}

// stallReason says why f stalls; failing are the drain jobs whose last run
// on its shard (in this process) failed.
func stallReason(f store.Stall, shard int, failing []drainFailure) string {
	if f.Active == 0 && f.RunningChildren == 0 && !f.ParentCancelled {
		return fmt.Sprintf("nothing will move it: the execution is %s with no command pending or held, no child running and no cancel in progress; "+
			"end it (POST /api/executions/%d/finalize, or cancel) and report it as a bug", f.Status, f.ExecutionID)
	}
	if len(failing) > 0 {
		// The drain runs here, and fails: say how, not whether it runs.
		var why []string
		for _, d := range failing {
			why = append(why, fmt.Sprintf("%s at %s: %s", d.job, d.at.UTC().Format(time.RFC3339), jsonx.Cut(strings.ReplaceAll(d.err, "\n", "; "), 400)))
		}
		return fmt.Sprintf("%d of its %d command(s) in flight waited more than %s for the scheduled drain, which runs but failed on shard %d (%s); "+
			"fix what it names, or end the execution (POST /api/executions/%d/finalize, or cancel)",
			f.Stale, f.Active, DoctorOverdue, shard, strings.Join(why, "; "), f.ExecutionID)
	}
	return fmt.Sprintf("%d of its %d command(s) in flight waited more than %s for the scheduled drain (announcing pending commands again, "+
		"ending leases): is the drain running (the outbox function's schedule, noetl serve --drain-every)?", f.Stale, f.Active, DoctorOverdue)
}
