package commandbus_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/commandbus"
	"github.com/noetl-go/noetl/shared/commandbus/bustest"
)

func notification(executionID, eventID int64) []byte {
	return fmt.Appendf(nil, `{"execution_id":%d,"event_id":%d,"command_id":"c-%d","step":"start","server_url":"http://127.0.0.1:8082","execution_pool":"shared"}`,
		executionID, eventID, eventID)
}

func busOver(t *testing.T, addrs ...string) *commandbus.Publisher {
	t.Helper()
	list := make([]string, len(addrs))
	for i, a := range addrs {
		list[i] = fmt.Sprintf("%d@%s", i, a)
	}
	s, err := commandbus.ParseSettings("ehdb", strings.Join(list, ","), fmt.Sprint(len(addrs)))
	if err != nil {
		t.Fatal(err)
	}
	p := commandbus.New(s, nil, commandbus.Options{})
	t.Cleanup(p.Close)
	return p
}

// startWriter starts a stand-in writer until the test ends.
func startWriter(t *testing.T) *bustest.Writer {
	t.Helper()
	w, err := bustest.Start(t.TempDir(), bustest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// TestFrameBytes pins the framing: a big-endian uint32 length, then the
// record's JSON with exactly NoETL's four keys, the notification as a
// string.
func TestFrameBytes(t *testing.T) {
	rec, err := commandbus.RecordOf(notification(7, 300))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(rec)
	want := `{"global_sequence":300,"execution_id":"7","transaction_id":"","payload":` + strconvQuote(string(notification(7, 300))) + `}`
	if string(body) != want {
		t.Errorf("record %s\nwant   %s", body, want)
	}
	f := commandbus.Frame(body)
	if binary.BigEndian.Uint32(f) != uint32(len(body)) || !bytes.Equal(f[4:], body) || f[0] != 0 {
		t.Errorf("frame % x…: want a 4-byte big-endian length %d, then the body", f[:8], len(body))
	}
	if _, err := commandbus.RecordOf([]byte(`{"execution_id":"x","event_id":1}`)); err == nil {
		t.Error("a non-integer execution_id was accepted")
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestPublishAcked: each notification becomes one record of the writer's
// log, answered with its sort key; concurrent publishes share the
// connection and each gets its own answer.
func TestPublishAcked(t *testing.T) {
	w := startWriter(t)
	p := busOver(t, w.IngestAddr())
	ctx := context.Background()
	key, err := p.Bus().Send(ctx, notification(11, 500))
	if err != nil || key != 1 {
		t.Fatalf("first record: key %d, %v; want 1", key, err)
	}
	var wg sync.WaitGroup
	keys := make(chan uint64, 40)
	for i := range 40 {
		wg.Go(func() {
			k, err := p.Bus().Send(ctx, notification(11, int64(501+i)))
			if err != nil {
				t.Error(err)
			}
			keys <- k
		})
	}
	wg.Wait()
	close(keys)
	seen := map[uint64]bool{}
	for k := range keys {
		seen[k] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct sort keys for 40 records", len(seen))
	}
	recs := w.Records()
	if len(recs) != 41 || w.Stats().Ingested != 41 {
		t.Fatalf("%d records, stats %+v; want 41", len(recs), w.Stats())
	}
	if r := recs[0]; r.GlobalSequence != 500 || r.ExecutionID != "11" || r.TransactionID != "" || r.Payload != string(notification(11, 500)) {
		t.Errorf("record %+v", r)
	}
}

// TestPublishAcrossRestart: a stopped writer fails the publish (the outbox
// keeps the row); once it is back, the same publisher delivers again on a
// new connection, and the log kept every record acked before the stop.
func TestPublishAcrossRestart(t *testing.T) {
	w := startWriter(t)
	p := busOver(t, w.IngestAddr())
	ctx := context.Background()
	if err := p.Publish(ctx, "s", "m", notification(1, 10)); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if err := p.Publish(ctx, "s", "m", notification(1, 11)); err == nil {
		t.Fatal("a publish to a stopped writer succeeded")
	}
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	var last error
	for range 200 { // the redial back-off lets one try through at a time
		if last = p.Publish(ctx, "s", "m", notification(1, 11)); last == nil {
			break
		}
		waitABit()
	}
	if last != nil {
		t.Fatalf("after the restart: %v", last)
	}
	recs := w.Records()
	if len(recs) != 2 || recs[0].GlobalSequence != 10 || recs[1].GlobalSequence != 11 {
		t.Errorf("records after the restart: %+v", recs)
	}
}

// TestNoAnswerIsNotDelivered: a writer that closes the connection instead
// of answering (its only way to refuse) fails the publish.
func TestNoAnswerIsNotDelivered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	frames := make(chan []byte, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			body, _ := commandbus.ReadFrame(c, 1<<20)
			frames <- body
			c.Close()
		}
	}()
	p := busOver(t, ln.Addr().String())
	err = p.Publish(context.Background(), "s", "m", notification(3, 30))
	if err == nil || !strings.Contains(err.Error(), "not delivered") {
		t.Fatalf("publish answered by a close: %v, want not delivered", err)
	}
	// Sent on a fresh connection both times: a broken connection is
	// retried once at once, then left to the outbox.
	if n := len(frames); n != 2 {
		t.Errorf("the writer read %d frames, want 2 (one try, one retry)", n)
	}
}

// TestFanOut: shadow publishes to NATS and the bus and fails when either
// fails; ehdb never touches NATS; nats never touches the bus.
func TestFanOut(t *testing.T) {
	w := startWriter(t)
	var natsCalls int
	var natsErr error
	nats := commandbusChannel(func() error { natsCalls++; return natsErr })
	ctx := context.Background()
	for _, c := range []struct {
		mode            string
		natsFails       bool
		wantNATS, wantR int
		wantErr         bool
	}{
		{"nats", false, 1, 0, false},
		{"ehdb", false, 0, 1, false},
		{"shadow", false, 1, 1, false},
		{"shadow", true, 1, 1, true},
	} {
		writers := ""
		if c.mode != "nats" {
			writers = "0@" + w.IngestAddr()
		}
		s, err := commandbus.ParseSettings(c.mode, writers, "")
		if err != nil {
			t.Fatal(err)
		}
		natsCalls, natsErr = 0, nil
		if c.natsFails {
			natsErr = errors.New("nats: no responders")
		}
		before := len(w.Records())
		p := commandbus.New(s, nats, commandbus.Options{})
		err = p.Publish(ctx, "noetl.commands.shared.1", "c:1", notification(1, 40))
		p.Close()
		if got := len(w.Records()) - before; natsCalls != c.wantNATS || got != c.wantR || (err != nil) != c.wantErr {
			t.Errorf("%s (NATS fails %v): NATS %d, bus records %d, error %v; want %d, %d, error %v",
				c.mode, c.natsFails, natsCalls, got, err, c.wantNATS, c.wantR, c.wantErr)
		}
	}
}

type commandbusChannel func() error

func (f commandbusChannel) Publish(context.Context, string, string, []byte) error { return f() }

func waitABit() { <-time.After(50 * time.Millisecond) }

// TestUnreachableWriter: a writer nobody listens for fails the first
// publish, and every later one at once while a background loop redials it
// (no request waits on a writer that is away); once it listens, publishes
// go through again.
func TestUnreachableWriter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := busOver(t, addr)
	ctx := context.Background()
	if err := p.Publish(ctx, "s", "m", notification(5, 50)); err == nil {
		t.Fatal("a publish to nobody succeeded")
	}
	for range 5 {
		if err := p.Publish(ctx, "s", "m", notification(5, 51)); err == nil || !strings.Contains(err.Error(), "being redialed") {
			t.Fatalf("while unreachable: %v, want a failure at once (being redialed)", err)
		}
	}
	w, err := bustest.StartOn(t.TempDir(), addr, bustest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last error
	for range 400 {
		if last = p.Publish(ctx, "s", "m", notification(5, 51)); last == nil {
			break
		}
		waitABit()
	}
	if last != nil || len(w.Records()) != 1 {
		t.Fatalf("once the writer listens: %v, %d records", last, len(w.Records()))
	}
}
