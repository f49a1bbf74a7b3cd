// Package notify announces commands on NATS JetStream (events.md §5, R-A7): the
// NOETL_COMMANDS stream, subjects per pool and execution, NoETL's notification body,
// publishing with de-duplication ids, and the workers' durable pull consumers.
//
// NATS is only a doorbell: Postgres (the outbox) is the truth, so a lost or doubled
// notification is harmless.
package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// StreamName is the commands stream.
	StreamName = "NOETL_COMMANDS"
	// SubjectPrefix starts every command subject: noetl.commands.<pool>.<execution_id>.
	SubjectPrefix = "noetl.commands"
	// MaxAge is how long the stream keeps a notification.
	MaxAge = 24 * time.Hour
	// DefaultDuplicates is the de-duplication window: at least twice the outbox drain
	// interval (1 minute by default), so a drain's re-publish of a row the post-commit
	// publisher already sent is dropped.
	DefaultDuplicates = 2 * time.Minute

	// PoolShared and PoolSystem are the default pools (events.md §5).
	PoolShared = "shared"
	PoolSystem = "system"
)

// StreamOptions tunes the stream; the zero value is the default.
type StreamOptions struct {
	// Duplicates is the de-duplication window (default DefaultDuplicates). Keep it at
	// least 2× the outbox drain interval and at most MaxAge.
	Duplicates time.Duration
	// Replicas (default 1; a clustered deployment may set 3).
	Replicas int
}

// StreamConfig is the NOETL_COMMANDS configuration: limits retention, file storage,
// max age 24 h. Its subjects are NoETL's own pair, the bare noetl.commands and
// noetl.commands.> (we publish only under the second): NoETL's Python worker adds
// whichever of the two a stream lacks when it subscribes, so with both present it
// changes nothing in the server's stream.
func StreamConfig(opts StreamOptions) (jetstream.StreamConfig, error) {
	dup := opts.Duplicates
	if dup == 0 {
		dup = DefaultDuplicates
	}
	if dup < 0 || dup > MaxAge {
		return jetstream.StreamConfig{}, fmt.Errorf("notify: duplicates window %s outside (0, %s]", dup, MaxAge)
	}
	return jetstream.StreamConfig{
		Name:       StreamName,
		Subjects:   Subjects(),
		Retention:  jetstream.LimitsPolicy,
		Storage:    jetstream.FileStorage,
		MaxAge:     MaxAge,
		Duplicates: dup,
		Replicas:   max(opts.Replicas, 1),
	}, nil
}

// Subjects are the stream's subjects.
func Subjects() []string { return []string{SubjectPrefix, SubjectPrefix + ".>"} }

// StreamManager is the part of jetstream.JetStream that EnsureStream uses.
type StreamManager interface {
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// EnsureStream creates NOETL_COMMANDS or brings its configuration up to opts;
// idempotent. `noetl migrate`, `noetl dev` and deploy call it (R-A7).
func EnsureStream(ctx context.Context, js StreamManager, opts StreamOptions) (jetstream.Stream, error) {
	cfg, err := StreamConfig(opts)
	if err != nil {
		return nil, err
	}
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("notify: ensure stream %s: %w", StreamName, err)
	}
	return s, nil
}

// ValidatePool checks that a pool name can be a subject token and part of a consumer
// name: letters, digits, '-' and '_'.
func ValidatePool(pool string) error {
	if pool == "" {
		return errors.New("pool must not be empty")
	}
	if len(pool) > 64 {
		return fmt.Errorf("pool %.20q… longer than 64 characters", pool)
	}
	for _, r := range pool {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("pool %q: only letters, digits, '-' and '_' are allowed", pool)
		}
	}
	return nil
}

// PoolFor picks the pool of an execution (events.md §5): the execute request's
// execution_pool, else "system" for catalog paths under system/, else "shared".
func PoolFor(requestPool, catalogPath string) string {
	switch {
	case requestPool != "":
		return requestPool
	case strings.HasPrefix(catalogPath, "system/"):
		return PoolSystem
	default:
		return PoolShared
	}
}

// Subject is noetl.commands.<pool>.<execution_id>; pool must pass ValidatePool.
func Subject(pool string, executionID int64) string {
	return SubjectPrefix + "." + pool + "." + strconv.FormatInt(executionID, 10)
}

// MsgID is the Nats-Msg-Id of a command's notification: command_id:attempt, so
// JetStream drops re-publishes of one attempt and a retry is a new message.
func MsgID(commandID string, attempt int) string {
	return commandID + ":" + strconv.Itoa(attempt)
}

// AgainMsgID is the Nats-Msg-Id of a command's announcement again at at
// (lifecycle.ReannounceDue): MsgID with the time, so that JetStream, which
// drops a repeated id within its duplicate window, takes each one.
func AgainMsgID(commandID string, attempt int, at time.Time) string {
	return MsgID(commandID, attempt) + ":r" + strconv.FormatInt(at.UnixMicro(), 10)
}

// Body is NoETL's notification body. Ids are JSON integers here (R-I2: NATS keeps
// NoETL's integers); encoding/json writes int64 exactly.
type Body struct {
	ExecutionID int64  `json:"execution_id"`
	EventID     int64  `json:"event_id"` // the command.issued event
	CommandID   string `json:"command_id"`
	Step        string `json:"step"`
	ServerURL   string `json:"server_url"`
	// ExecutionPool is the pool the subject names; NoETL's body has no such key,
	// and its workers ignore it.
	ExecutionPool string `json:"execution_pool"`
}

// JetStreamPublisher is the part of jetstream.JetStream that Publisher uses.
type JetStreamPublisher interface {
	Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// Publisher publishes command notifications with de-duplication ids.
type Publisher struct {
	js     JetStreamPublisher
	stream StreamOptions
}

// NewPublisher publishes through js; stream configures the stream it creates if a
// publish finds none.
func NewPublisher(js JetStreamPublisher, stream StreamOptions) *Publisher {
	return &Publisher{js: js, stream: stream}
}

// Publish sends data to subject with Nats-Msg-Id msgID and waits for the stream's
// ack (ack.Duplicate reports a de-duplicated re-publish). When no stream answers it
// creates the stream (never updating an existing one: deploy owns its settings) and
// publishes once more (R-A7).
func (p *Publisher) Publish(ctx context.Context, subject, msgID string, data []byte) (*jetstream.PubAck, error) {
	ack, err := p.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		cfg, cfgErr := StreamConfig(p.stream)
		if cfgErr != nil {
			return nil, cfgErr
		}
		if _, cerr := p.js.CreateStream(ctx, cfg); cerr != nil && !errors.Is(cerr, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("notify: publish %s (msg id %s): no stream answered, and creating %s failed: %w", subject, msgID, StreamName, cerr)
		}
		ack, err = p.js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
	}
	if err != nil {
		return nil, fmt.Errorf("notify: publish %s (msg id %s): %w", subject, msgID, err)
	}
	return ack, nil
}

// ConsumerName is the durable consumer of a pool: noetl-<pool>.
func ConsumerName(pool string) string { return "noetl-" + pool }

// ConsumerConfig is the durable pull consumer of a pool: filtered to the pool's
// subjects, explicit acks (workers ack after a successful claim; the lease, not the
// ack, guarantees delivery).
func ConsumerConfig(pool string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName(pool),
		FilterSubject: SubjectPrefix + "." + pool + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       30 * time.Second,
	}
}

// ConsumerManager is the part of jetstream.JetStream that EnsureConsumer uses.
type ConsumerManager interface {
	CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error)
}

// EnsureConsumer creates or updates the pool's durable pull consumer; idempotent.
func EnsureConsumer(ctx context.Context, js ConsumerManager, pool string) (jetstream.Consumer, error) {
	if err := ValidatePool(pool); err != nil {
		return nil, fmt.Errorf("notify: consumer: %w", err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx, StreamName, ConsumerConfig(pool))
	if err != nil {
		return nil, fmt.Errorf("notify: ensure consumer %s: %w", ConsumerName(pool), err)
	}
	return c, nil
}
