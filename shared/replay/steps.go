package replay

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// EngineSteps is the `steps` projection: the engine's own fold (engine.Apply),
// so replay's steps are the view the live snapshot has and verify can compare
// them (replay.md "steps").
type EngineSteps struct{ snap *engine.Snapshot }

// NewEngineSteps returns an empty steps projection.
func NewEngineSteps() *EngineSteps { return &EngineSteps{snap: engine.NewSnapshot()} }

// Snapshot is the folded engine snapshot.
func (p *EngineSteps) Snapshot() *engine.Snapshot { return p.snap }

// Add folds one row.
func (p *EngineSteps) Add(r Row) error {
	engine.Apply(p.snap, engine.Event{Seq: r.Seq, ID: r.EventID, Type: r.EventType, Step: r.NodeName,
		NodeType: r.NodeType, Status: r.Status, Context: r.Context, Meta: r.Meta, Result: r.Result,
		Error: r.Error, WorkerID: r.WorkerID, CommandID: r.CommandID, Time: r.CreatedAt})
	return nil
}

// Value is per step: status, visits, attempts, a digest of the latest result,
// entry and exit times, and the error.
func (p *EngineSteps) Value() any {
	out := make(map[string]any, len(p.snap.Steps))
	for name, st := range p.snap.Steps {
		v := map[string]any{"status": st.Status, "visits": int64(st.Visits), "attempts": int64(st.Attempts)}
		if st.Bound {
			v["result_digest"] = resultDigest(st.Result, st.ResultRef)
		}
		if !st.EnteredAt.IsZero() {
			v["entered_at"] = st.EnteredAt.UTC().Format(timeFormat)
		}
		if !st.ExitedAt.IsZero() {
			v["exited_at"] = st.ExitedAt.UTC().Format(timeFormat)
		}
		if st.Error != "" {
			v["error"] = st.Error
		}
		out[name] = v
	}
	return out
}

// timeFormat keeps microseconds, Postgres's precision, so a fold of stored rows
// and a fold of the live events print the same.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// resultDigest stands for a result without copying it into the projection: a
// sha256 of its canonical JSON (or of its reference when stored outside).
func resultDigest(result any, ref *engine.ResultKey) string {
	var b []byte
	if ref != nil {
		b = jsonx.MustMarshal(map[string]any{"ref": ref.String()})
	} else {
		b = jsonx.MustMarshal(result)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
