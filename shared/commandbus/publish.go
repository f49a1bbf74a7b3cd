package commandbus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Channel is one destination of command notifications; notify's JetStream
// publisher (adapted by lambdafn.PublisherOf) is one, the Bus another.
// controlplane.Publisher has the same method, so a *Publisher is one.
type Channel interface {
	Publish(ctx context.Context, subject, msgID string, data []byte) error
}

// Options tunes the bus connections; the zero value is the default.
type Options struct {
	// DialTimeout bounds a connect to a writer; default 2 s.
	DialTimeout time.Duration
	// AckTimeout bounds the wait for a record's answer; default 5 s (a
	// JetStream publish's default wait). A writer that does not answer in
	// time loses the connection, and the record goes back to the outbox.
	AckTimeout time.Duration
	Logger     *slog.Logger
}

// Publisher sends each notification to every configured channel and
// succeeds only when all of them acknowledged it: the outbox marks a row
// PUBLISHED on that success alone, so a channel that missed a notification
// gets it again from the drain (and the channel that had it gets a
// duplicate, which JetStream's de-duplication window or the worker's
// claim absorbs).
type Publisher struct {
	nats Channel
	bus  *Bus
}

// New returns the publisher of settings s: nats (nil when NATS is
// disabled) in modes nats and shadow, the bus in modes ehdb and shadow.
// Nothing is dialed until the first publish.
func New(s Settings, nats Channel, o Options) *Publisher {
	p := &Publisher{}
	if s.Mode.NATS() {
		p.nats = nats
	}
	if s.Mode.Bus() {
		p.bus = NewBus(s, o)
	}
	return p
}

// Enabled reports whether any channel is configured (a publisher with none
// must not be given to the control plane: it would write outbox rows that
// nothing can deliver).
func (p *Publisher) Enabled() bool { return p.nats != nil || p.bus != nil }

// Publish sends data to each channel, NATS first; the error joins every
// channel's failure.
func (p *Publisher) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	var errs []error
	if p.nats != nil {
		if err := p.nats.Publish(ctx, subject, msgID, data); err != nil {
			errs = append(errs, err)
		}
	}
	if p.bus != nil {
		if err := p.bus.Publish(ctx, subject, msgID, data); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Bus returns the bus channel, nil when the mode has none.
func (p *Publisher) Bus() *Bus { return p.bus }

// Close closes the bus connections.
func (p *Publisher) Close() {
	if p.bus != nil {
		p.bus.Close()
	}
}

// Bus publishes notifications to the writers of NoETL's command bus: each
// to the writer of its execution's shard, as a record framed for the
// writer's ingest, waiting for the record's sort key (the ack, sent once
// the record is durable). There is no error answer: a connection that
// closes before the ack means "not delivered".
type Bus struct {
	shardCount int
	writers    map[uint32]*writer
}

// NewBus returns a Bus over s's writers; it dials each lazily.
func NewBus(s Settings, o Options) *Bus {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bus{shardCount: max(s.ShardCount, 1), writers: map[uint32]*writer{}}
	for _, w := range s.Writers {
		b.writers[w.Shard] = &writer{addr: w.Addr, shard: w.Shard, o: o}
	}
	return b
}

// Publish sends one notification (notify.Body's JSON) and returns once the
// writer acknowledged it. subject and msgID are NATS's and unused here: a
// repeated record is harmless, the worker's claim refuses the second.
func (b *Bus) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	_, err := b.Send(ctx, data)
	return err
}

// Send publishes one notification and returns the writer's sort key.
func (b *Bus) Send(ctx context.Context, notification []byte) (uint64, error) {
	rec, err := RecordOf(notification)
	if err != nil {
		return 0, err
	}
	shard := ShardFor(rec.ExecutionID, b.shardCount)
	w := b.writers[shard]
	if w == nil {
		return 0, fmt.Errorf("commandbus: no writer is configured for shard %d (execution %s); add %d@host:port to %s", shard, rec.ExecutionID, shard, EnvWriters)
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	key, err := w.send(ctx, Frame(body))
	if err != nil {
		return 0, fmt.Errorf("command bus writer %d@%s: execution %s, event %d: %w", shard, w.addr, rec.ExecutionID, rec.GlobalSequence, err)
	}
	return key, nil
}

// Close closes every writer connection and stops redialing; the bus is
// not used after.
func (b *Bus) Close() {
	for _, w := range b.writers {
		w.close()
	}
}

// errNotAcked is a record whose connection ended before its answer.
var errNotAcked = errors.New("the connection closed before the record's answer: not delivered")

// writer is one writer's connection: records are written in order and
// their answers come back in the same order, so publishes from many
// requests share (pipeline) one connection, each waiting on its own place
// in the queue.
type writer struct {
	addr  string
	shard uint32
	o     Options

	mu  sync.Mutex
	cur *conn
	// dialErr is set while the writer is unreachable: then a background
	// loop redials it and publishes fail at once, so an unreachable writer
	// costs no request a wait (the outbox drain delivers once it is back).
	dialErr   error
	redialing bool
	closed    bool
}

type conn struct {
	nc      net.Conn
	pending []chan ack
}

type ack struct {
	key uint64
	err error
}

const (
	minRedial = 100 * time.Millisecond
	maxRedial = 5 * time.Second
)

// send writes one frame and waits for its answer. A record whose
// connection broke (a writer restarted since the connection was made) is
// sent once more on a new one; a failed dial or a missing answer is
// returned at once, for the outbox to retry.
func (w *writer) send(ctx context.Context, frame []byte) (uint64, error) {
	var last error
	for range 2 {
		c, err := w.connect(ctx)
		if err != nil {
			return 0, err
		}
		ch, err := w.write(c, frame)
		if err != nil {
			last = err
			continue
		}
		t := time.NewTimer(w.o.AckTimeout)
		select {
		case a := <-ch:
			t.Stop()
			if a.err == nil {
				return a.key, nil
			}
			last = a.err
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
			w.mu.Lock()
			w.drop(c, errNotAcked)
			w.mu.Unlock()
			return 0, fmt.Errorf("no answer within %s: not delivered", w.o.AckTimeout)
		}
	}
	return 0, last
}

// connect returns the open connection, or dials one while the writer is
// not known to be unreachable.
func (w *writer) connect(ctx context.Context) (*conn, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.cur != nil:
		return w.cur, nil
	case w.closed:
		return nil, errors.New("closed")
	case w.dialErr != nil:
		return nil, fmt.Errorf("unreachable, being redialed: %w", w.dialErr)
	}
	d := net.Dialer{Timeout: w.o.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		w.dialErr = err
		w.o.Logger.Warn("command bus writer unreachable; its notifications stay in the outbox until it answers",
			"shard", w.shard, "addr", w.addr, "error", err.Error())
		w.redialing = true
		go w.redial()
		return nil, err
	}
	return w.use(nc), nil
}

// redial dials the writer in the background, backing off from 100 ms to
// 5 s, until it answers or the bus closes.
func (w *writer) redial() {
	wait := minRedial
	for {
		time.Sleep(wait)
		wait = min(2*wait, maxRedial)
		d := net.Dialer{Timeout: w.o.DialTimeout}
		nc, err := d.Dial("tcp", w.addr)
		w.mu.Lock()
		switch {
		case w.closed:
			w.redialing = false
			w.mu.Unlock()
			if nc != nil {
				_ = nc.Close()
			}
			return
		case err != nil:
			w.dialErr = err
			w.mu.Unlock()
			continue
		}
		w.dialErr, w.redialing = nil, false
		w.use(nc)
		w.o.Logger.Info("command bus writer reachable again", "shard", w.shard, "addr", w.addr)
		w.mu.Unlock()
		return
	}
}

// use makes nc the connection; w.mu is held.
func (w *writer) use(nc net.Conn) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{nc: nc}
	w.cur = c
	go w.readAcks(c)
	return c
}

// write sends the frame on c and queues its answer's place.
func (w *writer) write(c *conn, frame []byte) (<-chan ack, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != c {
		return nil, errNotAcked
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(w.o.AckTimeout))
	if _, err := c.nc.Write(frame); err != nil {
		w.drop(c, errNotAcked)
		return nil, fmt.Errorf("write: %w", err)
	}
	ch := make(chan ack, 1)
	c.pending = append(c.pending, ch)
	return ch, nil
}

// readAcks hands each 8-byte answer to the oldest waiting record.
func (w *writer) readAcks(c *conn) {
	var b [AckBytes]byte
	for {
		_, err := io.ReadFull(c.nc, b[:])
		w.mu.Lock()
		if err != nil || len(c.pending) == 0 {
			w.drop(c, errNotAcked)
			w.mu.Unlock()
			return
		}
		ch := c.pending[0]
		c.pending = c.pending[1:]
		w.mu.Unlock()
		ch <- ack{key: binary.BigEndian.Uint64(b[:])}
	}
}

// drop closes c and fails what waits on it; w.mu is held.
func (w *writer) drop(c *conn, err error) {
	if w.cur == c {
		w.cur = nil
	}
	_ = c.nc.Close()
	for _, ch := range c.pending {
		ch <- ack{err: err}
	}
	c.pending = nil
}

func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.cur != nil {
		w.drop(w.cur, errors.New("closed"))
	}
}
