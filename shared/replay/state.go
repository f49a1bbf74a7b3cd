package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// ChecksumType is the only digest replay produces.
const ChecksumType = "sha256"

// Checksum is `{type, value}` of replay.md "Output".
type Checksum struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

func (c Checksum) value() map[string]any {
	return map[string]any{"type": c.Type, "value": c.Value}
}

// State is the replay output document (replay.md "Output") at the point the
// fold has reached. Projections holds only the selected projections, keyed by
// their output name (execution, steps, stages, frames, commands,
// business_objects, loops), as jsonx values owned by the State.
type State struct {
	TenantID       string
	OrganizationID string
	ExecutionID    string
	Projection     Projection
	EventCount     int64
	LastEventID    int64  // 0 = none (null)
	LastEventType  string // "" = none (null); the spelling as stored
	LastSeq        int64  // 0 = none (null)
	// Truncated reports that the limit stopped the fold before the log (or
	// the cutoff) ended (R-X4).
	Truncated           bool
	Projections         map[string]any
	Checksum            Checksum
	ProjectionChecksums map[string]Checksum
}

// State returns the document for everything folded so far, with checksums.
// It copies the projections, so the Folder may keep folding afterwards (one
// pass can take the state at diff_from and then at the final cutoff).
func (f *Folder) State() (*State, error) {
	s := &State{
		TenantID:       f.opts.TenantID,
		OrganizationID: f.opts.OrganizationID,
		ExecutionID:    f.opts.ExecutionID,
		Projection:     f.opts.Projection,
		EventCount:     f.count,
		LastEventID:    f.lastEventID,
		LastEventType:  f.lastEventType,
		LastSeq:        f.lastSeq,
		Truncated:      f.truncated,
		Projections:    map[string]any{},
	}
	for _, p := range projections() {
		if !f.opts.Projection.includes(p.P) {
			continue
		}
		v, err := f.projectionValue(p.P)
		if err != nil {
			return nil, err
		}
		s.Projections[p.Key] = v
	}
	if err := s.seal(); err != nil {
		return nil, err
	}
	return s, nil
}

func (f *Folder) projectionValue(p Projection) (any, error) {
	switch p {
	case ProjectionExecution:
		return f.exec.value(), nil
	case ProjectionStep:
		if f.opts.Steps == nil {
			return map[string]any{}, nil
		}
		// Clone before Normalize: Normalize rewrites maps in place and the
		// projector's value is not ours to modify.
		v := jsonx.Normalize(jsonx.Clone(f.opts.Steps.Value()))
		if _, err := jsonx.Marshal(v); err != nil {
			return nil, fmt.Errorf("replay: steps projection is not JSON: %w", err)
		}
		return v, nil
	case ProjectionStage:
		return values(f.stages, (*stageState).value), nil
	case ProjectionFrame:
		return values(f.frames, (*frameState).value), nil
	case ProjectionCommand:
		return values(f.commands, (*commandState).value), nil
	case ProjectionBusinessObject:
		return values(f.objects, (*objectState).value), nil
	case ProjectionLoop:
		return values(f.loops, (*loopState).value), nil
	}
	return nil, fmt.Errorf("replay: unknown projection %q", p)
}

func values[T any](m map[string]*T, value func(*T, string) map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = value(v, k)
	}
	return out
}

// seal computes the projection checksums and the top-level checksum. Each
// projection is encoded once: the top-level document embeds the projection's
// canonical bytes as a json.RawMessage, which encoding/json copies verbatim
// (already compact, no HTML escaping), so the bytes equal those of encoding
// the whole document in one go.
func (s *State) seal() error {
	s.ProjectionChecksums = make(map[string]Checksum, len(s.Projections))
	doc := s.body()
	for name, v := range s.Projections {
		b, err := jsonx.Marshal(v)
		if err != nil {
			return fmt.Errorf("replay: checksum of %s: %w", name, err)
		}
		s.ProjectionChecksums[name] = checksumOfBytes(b)
		doc[name] = json.RawMessage(b)
	}
	b, err := jsonx.Marshal(doc)
	if err != nil {
		return fmt.Errorf("replay: checksum: %w", err)
	}
	s.Checksum = checksumOfBytes(b)
	return nil
}

// checksumOfBytes hashes a canonical encoding: jsonx.Marshal sorts object
// keys at every depth and writes no whitespace, so equal values give equal
// bytes.
func checksumOfBytes(b []byte) Checksum {
	sum := sha256.Sum256(b)
	return Checksum{Type: ChecksumType, Value: hex.EncodeToString(sum[:])}
}

// body is the document without the checksum fields: what the top-level
// checksum covers. Projection values are shared, not copied.
func (s *State) body() map[string]any {
	doc := map[string]any{
		"tenant_id":       s.TenantID,
		"organization_id": s.OrganizationID,
		"execution_id":    strValue(s.ExecutionID),
		"projection":      string(s.Projection),
		"event_count":     s.EventCount,
		"last_event_id":   idValue(s.LastEventID),
		"last_event_type": strValue(s.LastEventType),
		"last_seq":        idValue(s.LastSeq),
		"truncated":       s.Truncated,
	}
	for k, v := range s.Projections {
		doc[k] = v
	}
	return doc
}

// Document returns the full output document as a fresh jsonx value (the
// caller may modify it).
func (s *State) Document() map[string]any {
	doc := jsonx.Clone(s.body()).(map[string]any)
	doc["checksum"] = s.Checksum.value()
	pcs := make(map[string]any, len(s.ProjectionChecksums))
	for k, c := range s.ProjectionChecksums {
		pcs[k] = c.value()
	}
	doc["projection_checksums"] = pcs
	return doc
}

// MarshalJSON writes the canonical (sorted, compact) document.
func (s *State) MarshalJSON() ([]byte, error) {
	return jsonx.Marshal(s.Document())
}

// ExecutionStatus is execution.status, or "" when the execution projection
// was not selected.
func (s *State) ExecutionStatus() string {
	e, _ := s.Projections["execution"].(map[string]any)
	st, _ := e["status"].(string)
	return st
}
