package bustest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/commandbus"
)

func publish(t *testing.T, addr string, bodies ...string) []uint64 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []uint64
	for _, b := range bodies { // pipelined: every frame first, then the answers in order
		if _, err := c.Write(commandbus.Frame([]byte(b))); err != nil {
			t.Fatal(err)
		}
	}
	for range bodies {
		var k [8]byte
		if _, err := io.ReadFull(c, k[:]); err != nil {
			return keys
		}
		keys = append(keys, binary.BigEndian.Uint64(k[:]))
	}
	return keys
}

func record(eid int64, pool string) string {
	payload := fmt.Sprintf(`{\"execution_id\":%d,\"event_id\":%d,\"execution_pool\":\"%s\"}`, eid, eid*10, pool)
	return fmt.Sprintf(`{"global_sequence":%d,"execution_id":"%d","transaction_id":"","payload":"%s"}`, eid*10, eid, payload)
}

// TestWriterClaims: records are answered with ascending sort keys; a
// worker gets those of its pool only, in order; an unacked one comes back
// after the ack wait, marked redelivered; an undecodable record (or one
// with an extra key) gets no answer, the connection closes.
func TestWriterClaims(t *testing.T) {
	w, err := Start(t.TempDir(), Options{AckWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	keys := publish(t, w.IngestAddr(), record(1, "shared"), record(2, "system"), record(3, "shared"))
	if fmt.Sprint(keys) != "[1 2 3]" {
		t.Fatalf("sort keys %v, want [1 2 3]", keys)
	}
	if keys := publish(t, w.IngestAddr(), `{"global_sequence":1,"execution_id":"1","transaction_id":"","payload":"{}","extra":1}`, "not json"); len(keys) != 0 {
		t.Errorf("an extra key was answered %v", keys)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClaimer(w.ClaimAddr(), 1, "commands.shared.>")
	defer c.Close()
	a, err := c.Next(ctx)
	if err != nil || a.SortKey != 1 || a.Redelivered || a.Record.ExecutionID != "1" {
		t.Fatalf("first claim %+v, %v", a, err)
	}
	b, err := c.Next(ctx)
	if err != nil || b.SortKey != 3 {
		t.Fatalf("second claim %+v, %v; want sort key 3 (2 is the system pool's)", b, err)
	}
	if err := c.Ack(ctx, 3); err != nil {
		t.Fatal(err)
	}
	again, err := c.Next(ctx) // blocks until 1's ack wait is over
	if err != nil || again.SortKey != 1 || !again.Redelivered {
		t.Fatalf("after the ack wait: %+v, %v; want 1 redelivered", again, err)
	}
	if s := w.Stats(); s.Ingested != 3 || s.Refused != 1 || s.Delivered != 3 || s.Redelivered != 1 || s.Acked != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestWriterRestart: a restart keeps every answered record, cuts a torn
// last frame, listens on the same addresses and hands out only what no
// worker acked (the committed cursor).
func TestWriterRestart(t *testing.T) {
	dir := t.TempDir()
	w, err := Start(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ingest, claim := w.IngestAddr(), w.ClaimAddr()
	publish(t, ingest, record(1, "shared"), record(2, "shared"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClaimer(claim, 1, "commands.shared.>")
	defer c.Close()
	if a, err := c.Next(ctx); err != nil || a.SortKey != 1 {
		t.Fatalf("%+v %v", a, err)
	}
	if err := c.Ack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	f, err := os.OpenFile(filepath.Join(dir, "commands.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 1, 0, '{'}) // a crash in the middle of an append
	f.Close()
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	if w.IngestAddr() != ingest || w.ClaimAddr() != claim {
		t.Errorf("addresses after the restart %s %s, want %s %s", w.IngestAddr(), w.ClaimAddr(), ingest, claim)
	}
	if keys := publish(t, ingest, record(3, "shared")); fmt.Sprint(keys) != "[3]" {
		t.Errorf("after the restart the next sort key is %v, want [3] (the torn frame cut)", keys)
	}
	for _, want := range []uint64{2, 3} {
		a, err := c.Next(ctx) // the old connection is gone: Next redials once it fails
		if err != nil {
			if a, err = c.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if a.SortKey != want {
			t.Fatalf("claimed %d, want %d (1 was acked before the restart)", a.SortKey, want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		f, s string
		want bool
	}{
		{"commands.shared.>", "commands.shared.shard.0", true},
		{"commands.shared.>", "commands.shared", false},
		{"commands.system.>", "commands.shared.shard.0", false},
		{"commands.*.shard.0", "commands.x.shard.0", true},
		{"commands.*.shard.0", "commands.x.shard.1", false},
		{"commands.shared.shard.0", "commands.shared.shard.0", true},
	} {
		if got := Match(c.f, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.f, c.s, got)
		}
	}
}
