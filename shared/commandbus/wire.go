// Package commandbus publishes command notifications to NoETL's command bus
// (its "ehdb" writers), which NoETL's Rust worker 5.91.2 and later reads
// instead of NATS: the settings (NoETL's variable names and their rules),
// the ingest framing, the shard an execution's commands go to, and a
// publisher that sends each notification to NATS, to the bus or to both.
//
// The outbox stays the one owner of delivery: Publisher.Publish succeeds
// only when every configured channel acknowledged the notification, so an
// outbox row becomes PUBLISHED only then, and a writer that restarts or is
// away gets the row again from the drain (docs/architecture.md, "The
// outbox"). What is on the wire, from NoETL's source (facts, not code):
// docs/noetl-compat.md, "The command bus".
package commandbus

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Record is one record of the writer's ingest: NoETL's event record with
// exactly its four required keys (an older writer refuses any other key
// by closing the connection).
type Record struct {
	// GlobalSequence is the command.issued event's id. A current writer
	// assigns its own sort key and ignores it; an older one keys the
	// record by it.
	GlobalSequence uint64 `json:"global_sequence"`
	// ExecutionID is the execution id in decimal.
	ExecutionID string `json:"execution_id"`
	// TransactionID is always empty, as NoETL's server sends it.
	TransactionID string `json:"transaction_id"`
	// Payload is the notification's JSON as a string (notify.Body: the
	// same body NATS carries).
	Payload string `json:"payload"`
}

// AckBytes is the size of the writer's answer to a record: its sort key,
// a big-endian uint64, written once the record is durable.
const AckBytes = 8

// MaxFrameBytes bounds a frame this package reads (the stand-in writer's
// ingest, the claim RPC); NoETL's writer sets no bound. Notifications are
// a few hundred bytes.
const MaxFrameBytes = 16 << 20

// RecordOf builds the record of a notification body (notify.Body's JSON):
// its execution_id and event_id, the body itself as the payload.
func RecordOf(notification []byte) (Record, error) {
	var b struct {
		ExecutionID *json.Number `json:"execution_id"`
		EventID     *json.Number `json:"event_id"`
	}
	if err := json.Unmarshal(notification, &b); err != nil {
		return Record{}, fmt.Errorf("commandbus: the notification is not a JSON object: %w", err)
	}
	if b.ExecutionID == nil || b.EventID == nil {
		return Record{}, errors.New("commandbus: the notification has no execution_id or event_id")
	}
	eid, err := strconv.ParseInt(b.ExecutionID.String(), 10, 64)
	if err != nil || eid <= 0 {
		return Record{}, fmt.Errorf("commandbus: execution_id %s is not a positive 64-bit integer", b.ExecutionID)
	}
	ev, err := strconv.ParseUint(b.EventID.String(), 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("commandbus: event_id %s is not a positive 64-bit integer", b.EventID)
	}
	return Record{GlobalSequence: ev, ExecutionID: strconv.FormatInt(eid, 10), Payload: string(notification)}, nil
}

// Frame is body behind its length: a big-endian uint32, the framing of
// the writer's ingest and of its claim RPC.
func Frame(body []byte) []byte {
	out := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...)
}

// ReadFrame reads one frame's body; a length over limit is an error (the
// connection is then unusable).
func ReadFrame(r io.Reader, limit int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if uint64(size) > uint64(limit) {
		return nil, fmt.Errorf("commandbus: a frame of %d bytes is over the %d-byte limit", size, limit)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}
