package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/notify"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, n *devstack.NATS) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestSubjectsAndPools(t *testing.T) {
	if got := notify.Subject("shared", 1025); got != "noetl.commands.shared.1025" {
		t.Errorf("Subject = %s", got)
	}
	for _, c := range []struct{ req, path, want string }{
		{"gpu", "system/x", "gpu"},
		{"", "system/cleanup", "system"},
		{"", "systems/x", "shared"},
		{"", "examples/hello", "shared"},
	} {
		if got := notify.PoolFor(c.req, c.path); got != c.want {
			t.Errorf("PoolFor(%q, %q) = %s, want %s", c.req, c.path, got, c.want)
		}
	}
	for _, ok := range []string{"shared", "gpu-1", "a_b"} {
		if err := notify.ValidatePool(ok); err != nil {
			t.Errorf("ValidatePool(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", "a>", "a b", "pool/x"} {
		if err := notify.ValidatePool(bad); err == nil {
			t.Errorf("ValidatePool(%q) accepted", bad)
		}
	}
	if got := notify.MsgID("1025:start:2049", 2); got != "1025:start:2049:2" {
		t.Errorf("MsgID = %s", got)
	}
	if c := notify.ConsumerConfig("gpu"); c.Durable != "noetl-gpu" || c.FilterSubject != "noetl.commands.gpu.>" {
		t.Errorf("ConsumerConfig = %+v", c)
	}
}

func TestBodyJSON(t *testing.T) {
	b := notify.Body{ExecutionID: 9007199254740993, EventID: 9007199254741001, CommandID: "c", Step: "s", ServerURL: "http://127.0.0.1:8082", ExecutionPool: "shared"}
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"execution_id":9007199254740993,"event_id":9007199254741001,"command_id":"c","step":"s","server_url":"http://127.0.0.1:8082","execution_pool":"shared"}`
	if string(data) != want {
		t.Errorf("body %s\nwant %s", data, want)
	}
}

func TestEnsureStreamIdempotent(t *testing.T) {
	ctx := testContext(t)
	js := connect(t, devstacktest.NATS(t))
	for range 2 {
		if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, notify.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if !slices.Equal(c.Subjects, []string{"noetl.commands", "noetl.commands.>"}) || c.Retention != jetstream.LimitsPolicy ||
		c.MaxAge != 24*time.Hour || c.Duplicates != 2*time.Minute {
		t.Errorf("stream config %+v", c)
	}
	// A changed window is applied to the existing stream.
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{Duplicates: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	info, _ = s.Info(ctx)
	if info.Config.Duplicates != 5*time.Minute {
		t.Errorf("duplicates window %s after update, want 5m", info.Config.Duplicates)
	}
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{Duplicates: 25 * time.Hour}); err == nil {
		t.Error("a window above max age accepted")
	}
}

func TestPublishDeduplicatesAndConsumerReceives(t *testing.T) {
	ctx := testContext(t)
	js := connect(t, devstacktest.NATS(t))
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	shared, err := notify.EnsureConsumer(ctx, js, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.EnsureConsumer(ctx, js, "shared"); err != nil {
		t.Fatalf("EnsureConsumer again: %v", err)
	}
	gpu, err := notify.EnsureConsumer(ctx, js, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.EnsureConsumer(ctx, js, "bad.pool"); err == nil {
		t.Error("invalid pool accepted")
	}

	p := notify.NewPublisher(js, notify.StreamOptions{})
	// publish sends b the way the outbox row the control plane writes is sent.
	publish := func(pool string, b notify.Body, attempt int) (*jetstream.PubAck, error) {
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return p.Publish(ctx, notify.Subject(pool, b.ExecutionID), notify.MsgID(b.CommandID, attempt), data)
	}
	body := notify.Body{ExecutionID: 1025, EventID: 2049, CommandID: "1025:start:2049", Step: "start", ServerURL: "http://x"}
	first, err := publish("shared", body, 1)
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: %+v %v", first, err)
	}
	again, err := publish("shared", body, 1) // the outbox drain re-publishing
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("re-publish: %+v %v; want a duplicate of seq %d", again, err, first.Sequence)
	}
	retry, err := publish("shared", body, 2) // a retry is a new message
	if err != nil || retry.Duplicate {
		t.Fatalf("retry publish: %+v %v", retry, err)
	}
	other := notify.Body{ExecutionID: 2050, EventID: 3073, CommandID: "2050:a:3073", Step: "a"}
	if _, err := publish("gpu", other, 1); err != nil {
		t.Fatal(err)
	}

	if name := shared.CachedInfo().Name; name != "noetl-shared" {
		t.Errorf("consumer name %s", name)
	}
	batch, err := shared.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []notify.Body
	for m := range batch.Messages() {
		var b notify.Body
		if err := json.Unmarshal(m.Data(), &b); err != nil {
			t.Fatal(err)
		}
		if m.Subject() != "noetl.commands.shared.1025" {
			t.Errorf("shared consumer got subject %s", m.Subject())
		}
		got = append(got, b)
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != body || got[1] != body {
		t.Errorf("shared consumer received %+v, want the body twice (attempts 1 and 2)", got)
	}

	gpuBatch, err := gpu.Fetch(3, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for m := range gpuBatch.Messages() {
		subjects = append(subjects, m.Subject())
	}
	if len(subjects) != 1 || subjects[0] != "noetl.commands.gpu.2050" {
		t.Errorf("gpu consumer received %v, want only noetl.commands.gpu.2050", subjects)
	}
}

func TestPublishCreatesMissingStream(t *testing.T) {
	ctx := testContext(t)
	js := connect(t, devstacktest.NATS(t))
	if _, err := js.Stream(ctx, notify.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("fresh server has the stream already: %v", err)
	}
	p := notify.NewPublisher(js, notify.StreamOptions{Duplicates: 3 * time.Minute})
	ack, err := p.Publish(ctx, notify.Subject("shared", 7), "7:s:9:1", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Stream != notify.StreamName {
		t.Errorf("acked by stream %s", ack.Stream)
	}
	s, err := js.Stream(ctx, notify.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || info.Config.Duplicates != 3*time.Minute || info.Config.MaxAge != 24*time.Hour {
		t.Errorf("created stream: %d msgs, config %+v", info.State.Msgs, info.Config)
	}
}

// TestPublishWhileNATSDown: publishing fails while the server is down and works again
// once it is back on the same port (the outbox covers the gap).
func TestPublishWhileNATSDown(t *testing.T) {
	ctx := testContext(t)
	n := devstacktest.NATS(t)
	js := connect(t, n)
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	p := notify.NewPublisher(js, notify.StreamOptions{})
	n.Down()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := p.Publish(short, notify.Subject("shared", 1), "1:s:2:1", []byte(`{}`))
	cancel()
	if err == nil {
		t.Fatal("publish succeeded while NATS was down")
	}
	if err := n.Up(); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = p.Publish(ctx, notify.Subject("shared", 1), "1:s:2:1", []byte(`{}`))
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the client reconnects in the background
	}
	if err != nil {
		t.Fatalf("publish after NATS came back: %v", err)
	}
}
