// Package bustest is a stand-in of NoETL's command bus for tests: one
// writer in miniature, as NoETL's Rust worker hosts it in host mode, with
// both of its faces, written from the wire facts in docs/noetl-compat.md
// ("The command bus"), not from NoETL's code:
//
//   - the ingest, where the server publishes: frames of a 4-byte
//     big-endian length and a JSON record, each answered with the record's
//     8-byte big-endian sort key once it is appended to the log and the log
//     is synced (durable); an undecodable record closes the connection, as
//     the real writer does, for it has no error answer;
//   - the claim coordinator, where workers take records: frames of the same
//     framing, {"Next":{"member","filter"}} (blocks until a record whose
//     subject commands.<pool>.shard.<n> matches the filter is free),
//     {"Ack":{"sort_key"}} and {"Nack":{"sort_key"}} (both answered 1; a
//     nack changes nothing: a record claimed and not acked is handed out
//     again once the ack wait passes).
//
// Stop closes everything as a crash would (records in flight get no
// answer); Restart reopens the log (a torn tail is cut) and the committed
// cursor on the same addresses, so records appended and not yet acked by
// a worker are handed out again.
package bustest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/commandbus"
)

// Options tunes a Writer; the zero value is NoETL's default.
type Options struct {
	// Shard is the shard this writer owns (NOETL_COMMAND_BUS_SHARD); 0.
	Shard uint32
	// AckWait is how long a claimed record waits for its ack before it is
	// handed out again (NOETL_COMMAND_BUS_ACK_WAIT_SECS); default 30 s.
	AckWait time.Duration
}

// Writer is the stand-in writer. Its methods are safe for concurrent use.
type Writer struct {
	dir string
	o   Options

	ingestAddr string // fixed at the first start
	claimAddr  string

	mu      sync.Mutex
	running bool
	lns     []net.Listener
	conns   map[net.Conn]bool
	log     *os.File
	records []entry // records[i] has sort key i+1
	cursor  uint64  // every record up to this sort key is acked
	changed chan struct{}
	stopped chan struct{}
	stats   Stats
	wg      sync.WaitGroup
}

type entry struct {
	rec          commandbus.Record
	subject      string
	acked        bool
	claimedUntil time.Time
	deliveries   int
}

// Stats counts what the writer did since it was first started.
type Stats struct {
	Ingested    int // records answered with a sort key
	Refused     int // frames that closed the connection (undecodable)
	Delivered   int // Next answers
	Redelivered int // of which handed out again
	Acked       int // records acked by a worker
}

// Start opens (or creates) the log in dir and listens on two free local
// ports.
func Start(dir string, o Options) (*Writer, error) { return StartOn(dir, "127.0.0.1:0", o) }

// StartOn is Start with the ingest on a given address.
func StartOn(dir, ingest string, o Options) (*Writer, error) {
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	w := &Writer{dir: dir, o: o}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.start(ingest, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	// Fixed from here on: a restart listens on the same addresses.
	w.ingestAddr, w.claimAddr = w.lns[0].Addr().String(), w.lns[1].Addr().String()
	return w, nil
}

// IngestAddr is where a server publishes (NOETL_COMMAND_BUS_WRITER_ADDRS).
func (w *Writer) IngestAddr() string { return w.ingestAddr }

// ClaimAddr is where workers claim (NOETL_COMMAND_BUS_CLAIM_ADDR).
func (w *Writer) ClaimAddr() string { return w.claimAddr }

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Records returns the log's records, in sort-key order.
func (w *Writer) Records() []commandbus.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]commandbus.Record, len(w.records))
	for i, e := range w.records {
		out[i] = e.rec
	}
	return out
}

func (w *Writer) logPath() string { return filepath.Join(w.dir, "commands.log") }

func (w *Writer) cursorPath() string {
	return filepath.Join(w.dir, fmt.Sprintf("claim-cursor.shard-%d.json", w.o.Shard))
}

// Restart (re)opens the log and the cursor and listens again, on the
// addresses of the first start.
func (w *Writer) Restart() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start(w.ingestAddr, w.claimAddr)
}

// start opens the log and listens; w.mu is held.
func (w *Writer) start(ingest, claim string) error {
	if w.running {
		return errors.New("bustest: the writer is running")
	}
	if err := w.openLog(); err != nil {
		return err
	}
	var lns []net.Listener
	for _, addr := range []string{ingest, claim} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			w.log.Close()
			return fmt.Errorf("bustest: listen on %s: %w", addr, err)
		}
		lns = append(lns, ln)
	}
	w.lns, w.conns, w.running = lns, map[net.Conn]bool{}, true
	w.changed, w.stopped = make(chan struct{}), make(chan struct{})
	w.wg.Add(2)
	go w.accept(lns[0], w.ingest)
	go w.accept(lns[1], w.claims)
	return nil
}

// openLog reads the log back: frames of records; a torn last frame (a
// crash mid-append) is cut off. The cursor file says how far workers
// acked; without one, every record is handed out.
func (w *Writer) openLog() error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	raw, err := os.ReadFile(w.logPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	w.records = w.records[:0]
	r := bytes.NewReader(raw)
	good := int64(0)
	for {
		body, err := commandbus.ReadFrame(r, commandbus.MaxFrameBytes)
		if err != nil {
			break
		}
		var rec commandbus.Record
		if json.Unmarshal(body, &rec) != nil {
			break
		}
		w.records = append(w.records, entry{rec: rec, subject: subjectOf(rec, w.o.Shard)})
		good = int64(len(raw)) - int64(r.Len())
	}
	f, err := os.OpenFile(w.logPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	w.log = f
	w.cursor = 0
	if b, err := os.ReadFile(w.cursorPath()); err == nil {
		var c struct {
			Committed uint64 `json:"committed_cursor"`
		}
		if json.Unmarshal(b, &c) == nil {
			w.cursor = min(c.Committed, uint64(len(w.records)))
		}
	}
	for i := range w.cursor {
		w.records[i].acked = true
	}
	return nil
}

// subjectOf is the record's routing subject: commands.<execution_pool of
// its payload, else shared>.shard.<n>.
func subjectOf(rec commandbus.Record, shard uint32) string {
	var p struct {
		Pool string `json:"execution_pool"`
	}
	_ = json.Unmarshal([]byte(rec.Payload), &p)
	if p.Pool == "" {
		p.Pool = "shared"
	}
	return fmt.Sprintf("commands.%s.shard.%d", p.Pool, shard)
}

// Stop closes the listeners and every connection at once, as a crash
// would: records read and not yet answered get no answer.
func (w *Writer) Stop() {
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return
	}
	w.running = false
	close(w.stopped)
	for _, ln := range w.lns {
		ln.Close()
	}
	for c := range w.conns {
		c.Close()
	}
	w.log.Close()
	w.mu.Unlock()
	w.wg.Wait()
}

func (w *Writer) accept(ln net.Listener, serve func(net.Conn)) {
	defer w.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		w.mu.Lock()
		if !w.running {
			w.mu.Unlock()
			c.Close()
			return
		}
		w.conns[c] = true
		w.wg.Add(1)
		w.mu.Unlock()
		go func() {
			defer w.wg.Done()
			defer func() {
				c.Close()
				w.mu.Lock()
				delete(w.conns, c)
				w.mu.Unlock()
			}()
			serve(c)
		}()
	}
}

// ingest answers each record with its sort key once appended and synced.
func (w *Writer) ingest(c net.Conn) {
	for {
		body, err := commandbus.ReadFrame(c, commandbus.MaxFrameBytes)
		if err != nil {
			return
		}
		key, err := w.append(body)
		if err != nil {
			return // no error answer: the connection closes
		}
		var b [commandbus.AckBytes]byte
		binary.BigEndian.PutUint64(b[:], key)
		if _, err := c.Write(b[:]); err != nil {
			return
		}
	}
}

// append decodes one record strictly (the four keys, no other) and makes
// it durable.
func (w *Writer) append(body []byte) (uint64, error) {
	var rec commandbus.Record
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	err := d.Decode(&rec)
	var keys map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &keys)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && len(keys) != 4 {
		err = fmt.Errorf("want global_sequence, execution_id, transaction_id and payload, got %d keys", len(keys))
	}
	if err != nil {
		w.stats.Refused++
		return 0, err
	}
	if !w.running {
		return 0, errors.New("stopped")
	}
	if _, err := w.log.Write(commandbus.Frame(body)); err != nil {
		return 0, err
	}
	if err := w.log.Sync(); err != nil {
		return 0, err
	}
	w.records = append(w.records, entry{rec: rec, subject: subjectOf(rec, w.o.Shard)})
	w.stats.Ingested++
	close(w.changed)
	w.changed = make(chan struct{})
	return uint64(len(w.records)), nil
}

// claimRequest is one claim RPC request: exactly one field is set.
type claimRequest struct {
	Next *struct {
		Member uint32 `json:"member"`
		Filter string `json:"filter"`
	} `json:"Next"`
	Ack *struct {
		SortKey uint64 `json:"sort_key"`
	} `json:"Ack"`
	Nack *struct {
		SortKey uint64 `json:"sort_key"`
	} `json:"Nack"`
}

// ClaimAnswer is the answer to Next.
type ClaimAnswer struct {
	SortKey     uint64            `json:"sort_key"`
	Redelivered bool              `json:"redelivered"`
	Record      commandbus.Record `json:"record"`
}

// claims serves one claim connection, one request at a time.
func (w *Writer) claims(c net.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		body, err := commandbus.ReadFrame(c, commandbus.MaxFrameBytes)
		if err != nil {
			return
		}
		var req claimRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return
		}
		var answer []byte
		switch {
		case req.Next != nil:
			a, err := w.next(ctx, req.Next.Filter)
			if err != nil {
				return
			}
			answer, _ = json.Marshal(a)
			if _, err := c.Write(commandbus.Frame(answer)); err != nil {
				w.release(a.SortKey)
				return
			}
			continue
		case req.Ack != nil:
			w.ack(req.Ack.SortKey)
			answer = []byte("1")
		case req.Nack != nil:
			answer = []byte("1")
		default:
			return
		}
		if _, err := c.Write(commandbus.Frame(answer)); err != nil {
			return
		}
	}
}

// next hands out the oldest free record matching filter, waiting for one.
func (w *Writer) next(ctx context.Context, filter string) (ClaimAnswer, error) {
	for {
		w.mu.Lock()
		if !w.running {
			w.mu.Unlock()
			return ClaimAnswer{}, errors.New("stopped")
		}
		now := time.Now()
		var soonest time.Time
		for i := int(w.cursor); i < len(w.records); i++ {
			e := &w.records[i]
			if e.acked || !Match(filter, e.subject) {
				continue
			}
			if e.claimedUntil.After(now) {
				if soonest.IsZero() || e.claimedUntil.Before(soonest) {
					soonest = e.claimedUntil
				}
				continue
			}
			a := ClaimAnswer{SortKey: uint64(i + 1), Redelivered: e.deliveries > 0, Record: e.rec}
			e.deliveries++
			e.claimedUntil = now.Add(w.o.AckWait)
			w.stats.Delivered++
			if a.Redelivered {
				w.stats.Redelivered++
			}
			w.mu.Unlock()
			return a, nil
		}
		changed, stopped := w.changed, w.stopped
		w.mu.Unlock()
		wait := time.Hour
		if !soonest.IsZero() {
			wait = time.Until(soonest)
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-stopped:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return ClaimAnswer{}, ctx.Err()
		}
	}
}

// release frees a record whose answer could not be written.
func (w *Writer) release(key uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key >= 1 && key <= uint64(len(w.records)) {
		w.records[key-1].claimedUntil = time.Time{}
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// ack marks a record done and moves the committed cursor (persisted, so a
// restart resumes after it) past every acked record in a row.
func (w *Writer) ack(key uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key < 1 || key > uint64(len(w.records)) || w.records[key-1].acked {
		return
	}
	w.records[key-1].acked = true
	w.stats.Acked++
	moved := false
	for w.cursor < uint64(len(w.records)) && w.records[w.cursor].acked {
		w.cursor++
		moved = true
	}
	if moved {
		b, _ := json.Marshal(map[string]any{"version": 1, "shard": w.o.Shard, "committed_cursor": w.cursor})
		tmp := w.cursorPath() + ".tmp"
		if os.WriteFile(tmp, b, 0o644) == nil {
			_ = os.Rename(tmp, w.cursorPath())
		}
	}
}

// Match reports whether a subject matches a filter: tokens split on '.',
// '*' matches one token, '>' (last) one or more.
func Match(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return i == len(f)-1 && len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
