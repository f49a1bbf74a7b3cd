package devstack

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func nil2discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestNATSDownUp(t *testing.T) {
	n, err := StartNATS(context.Background(), NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	url := n.URL()

	// No reconnect buffer: a publish while NATS is down must fail, not be replayed
	// on reconnect (which would make the message count below depend on timing).
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("1")); err != nil {
		t.Fatal(err)
	}

	n.Down()
	if n.Running() {
		t.Fatal("Running after Down")
	}
	down, downCancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = js.Publish(down, "t.a", []byte("2"))
	downCancel()
	if err == nil {
		t.Fatal("publish succeeded while NATS was down")
	}

	if err := n.Up(); err != nil {
		t.Fatal(err)
	}
	if n.URL() != url {
		t.Fatalf("URL changed across Down/Up: %s -> %s", url, n.URL())
	}
	// The client reconnects on its own; the stream and its message survived.
	var info *jetstream.StreamInfo
	for {
		s, err := js.Stream(ctx, "T")
		if err == nil {
			if info, err = s.Info(ctx); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("stream not back after Up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream has %d messages after restart, want 1", info.State.Msgs)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("3")); err != nil {
		t.Errorf("publish after Up: %v", err)
	}

	dir := n.storeDir
	n.Shutdown()
	n.Shutdown() // idempotent
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("store dir %s still there after Shutdown", dir)
	}
	if err := n.Up(); err == nil {
		t.Error("Up after Shutdown succeeded")
	}
}

func TestNATSShutdownOnContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n, err := StartNATS(ctx, NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := n.storeDir
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for n.Running() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n.Shutdown() // waits for the AfterFunc's run to finish
	if n.Running() {
		t.Fatal("still running after cancel")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("store dir %s still there", dir)
	}
}
