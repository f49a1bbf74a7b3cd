package controlplane_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// retryOnce fails its first step once (the test reports the failure) and
// retries it at once; then two more steps.
const retryOnce = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: retry_once, path: tests/retry_once}
workflow:
  - step: start
    tool: {kind: noop}
    retry: {max_attempts: 2, delay: 0}
    next: middle
  - step: middle
    tool: {kind: noop}
    next: end
  - step: end
    tool: {kind: noop}
`

// notified is a notification a test worker took from the pool's consumer.
type notified struct {
	msgID   string
	eventID int64
}

// takeAll fetches what the consumer has now and acks it: a worker that took
// the notifications.
func takeAll(t *testing.T, s *stack, cons jetstream.Consumer) []notified {
	t.Helper()
	batch, err := cons.FetchNoWait(100)
	if err != nil {
		t.Fatal(err)
	}
	var out []notified
	for m := range batch.Messages() {
		var b notify.Body
		if err := jsonUnmarshal(m.Data(), &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, notified{msgID: m.Headers().Get(jetstream.MsgIDHeader), eventID: b.EventID})
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Fatal(err)
	}
	return out
}

// untilAnnounced runs the drain until a notification reaches the consumer,
// then returns the notifications and how many times the drain announced a
// command again meanwhile. The wait is for lifecycle.ReannounceDue's
// interval; the rounds only bound a broken run.
func untilAnnounced(t *testing.T, s *stack, cons func() jetstream.Consumer) ([]notified, int) {
	t.Helper()
	again := 0
	for range 200 {
		r, err := s.svc.Drain(s.ctx, 100)
		if err == nil {
			again += r.Reannounced
		}
		if got := takeAll(t, s, cons()); len(got) > 0 {
			return got, again
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no notification reached the pool's consumer after 200 drains (%d announced again)", again)
	return nil, 0
}

// TestLostNotificationsAreAnnouncedAgain: a pending command whose
// notification was lost is announced again and claimed, whatever its
// attempt: a first attempt's notification taken by a worker that died
// before claiming, a retry's lost the same way (its first id is then inside
// JetStream's two-minute duplicate window, so the announcement again must
// carry an id of its own), and a notification lost with the stream when
// NATS restarts empty. Each is claimed at the first announcement again.
func TestLostNotificationsAreAnnouncedAgain(t *testing.T) {
	const every = 300 * time.Millisecond
	s := newStack(t, func(c *controlplane.Config) {
		c.Reannounce = lifecycle.Reannounce{First: every, Max: every}
	})
	s.register(t, retryOnce)
	cons, err := notify.EnsureConsumer(s.ctx, s.js, notify.PoolShared)
	if err != nil {
		t.Fatal(err)
	}
	current := func() jetstream.Consumer { return cons }
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/retry_once"})
	if err != nil {
		t.Fatal(err)
	}
	first := s.pending(t, st.ExecutionID)[0]

	// 1. The first attempt's notification is taken and lost.
	lost := takeAll(t, s, cons)
	if len(lost) != 1 || lost[0].msgID != notify.MsgID(first.CommandID, 1) {
		t.Fatalf("the first notification: %+v", lost)
	}
	got, again := untilAnnounced(t, s, current)
	if len(got) != 1 || got[0].eventID != first.IssuedEventID || got[0].msgID == lost[0].msgID || again != 1 {
		t.Fatalf("announced again %d times, delivered %+v; want once, for %d, under an id other than %s", again, got, first.IssuedEventID, lost[0].msgID)
	}
	body, err := s.svc.Claim(s.ctx, got[0].eventID, "w1", true)
	if err != nil || body.Attempt != 1 {
		t.Fatalf("claim after the announcement again: %+v %v", body, err)
	}
	fail(t, s, body, "w1")

	// 2. The retry's notification (command_id:2) is taken and lost too.
	lost = takeAll(t, s, cons)
	if len(lost) != 1 || lost[0].msgID != notify.MsgID(first.CommandID, 2) {
		t.Fatalf("the retry's notification: %+v", lost)
	}
	got, again = untilAnnounced(t, s, current)
	if len(got) != 1 || got[0].eventID != first.IssuedEventID || got[0].msgID == lost[0].msgID || again != 1 {
		t.Fatalf("retry announced again %d times, delivered %+v; want once under an id other than %s", again, got, lost[0].msgID)
	}
	body, err = s.svc.Claim(s.ctx, got[0].eventID, "w1", true)
	if err != nil || body.Attempt != 2 {
		t.Fatalf("claim of the retry: %+v %v", body, err)
	}
	s.report(t, body, "w1", map[string]any{"ok": true})

	// 3. NATS restarts with an empty store: the stream and the next
	// command's notification in it are gone.
	middle := s.pending(t, st.ExecutionID)
	if len(middle) != 1 || middle[0].Step != "middle" {
		t.Fatalf("pending after start: %+v", middle)
	}
	if err := s.nats.Restart(); err != nil {
		t.Fatal(err)
	}
	for !s.nc.IsConnected() {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.js.Stream(s.ctx, notify.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("after the restart the stream is %v, want gone", err)
	}
	// The consumer comes back with the stream (a worker makes it again).
	var recreated jetstream.Consumer
	got, _ = untilAnnounced(t, s, func() jetstream.Consumer {
		if recreated == nil {
			if c, err := notify.EnsureConsumer(s.ctx, s.js, notify.PoolShared); err == nil {
				recreated = c
			}
		}
		if recreated == nil {
			return cons
		}
		return recreated
	})
	if len(got) != 1 || got[0].eventID != middle[0].IssuedEventID || !strings.HasPrefix(got[0].msgID, notify.MsgID(middle[0].CommandID, 1)+":r") {
		t.Fatalf("after the restart: %+v, want %s announced again", got, middle[0].CommandID)
	}
	body, err = s.svc.Claim(s.ctx, got[0].eventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	s.report(t, body, "w1", nil)
	s.drive(t, st.ExecutionID, func(store.Command) any { return nil })
	if v := s.execution(t, st.ExecutionID); v.Row.Status != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", v.Row.Status)
	}
}

// TestAnnouncedAgainBacksOff: a pending command nobody claims is announced
// again after lifecycle.Reannounce.First, then after as long again as it has
// waited, never more than Max apart, each under its own id: a pool without
// workers costs a bounded trickle of notifications.
func TestAnnouncedAgainBacksOff(t *testing.T) {
	row := func(avail, announced time.Duration) lifecycle.Row {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		r := lifecycle.Row{Status: lifecycle.Pending, AvailableAt: now.Add(-avail)}
		if announced >= 0 {
			r.AnnouncedAt = now.Add(-announced)
		}
		return r
	}
	clk := lifecycle.Clock{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := lifecycle.Reannounce{First: 10 * time.Second, Max: time.Minute}
	for _, c := range []struct {
		avail, announced time.Duration // ago; announced < 0: never
		due              bool
	}{
		{9 * time.Second, -1, false}, {10 * time.Second, -1, true},
		// announced at 10 s: next after 10 s more; at 20 s: after 20 s more.
		{19 * time.Second, 9 * time.Second, false}, {20 * time.Second, 10 * time.Second, true},
		{39 * time.Second, 19 * time.Second, false}, {40 * time.Second, 20 * time.Second, true},
		// long waits: a minute apart at most.
		{time.Hour, 59 * time.Second, false}, {time.Hour, time.Minute, true},
	} {
		if got := lifecycle.ReannounceDue(row(c.avail, c.announced), clk, a); got != c.due {
			t.Errorf("available %s ago, announced %s ago: due %v, want %v", c.avail, c.announced, got, c.due)
		}
	}
	ids := []string{notify.MsgID("1:s:2", 1), notify.AgainMsgID("1:s:2", 1, clk.Now), notify.AgainMsgID("1:s:2", 1, clk.Now.Add(time.Microsecond))}
	if slices.Sort(ids); len(slices.Compact(ids)) != 3 {
		t.Errorf("message ids repeat: %v", ids)
	}
}

// fail reports the command failed, as a worker whose tool failed.
func fail(t *testing.T, s *stack, body *controlplane.CommandBody, worker string) {
	t.Helper()
	_, err := s.svc.Ingest(s.ctx, controlplane.EventInput{ExecutionID: body.ExecutionID, Type: "command.failed", Status: "FAILED",
		Step: body.Step, WorkerID: worker, Meta: map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)},
		Payload: map[string]any{"error": "boom"}})
	if err != nil {
		t.Fatal(err)
	}
}
