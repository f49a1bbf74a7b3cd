package failover

import (
	"context"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/notify"
)

// TestNATSRestartLosesTheStream (issue 28): NATS restarts with an empty
// store while work is pending, so the stream and the notifications in it
// are gone. The server makes the stream again at its next publish (R-A7)
// and announces again every pending command nobody claimed, under new
// message ids; a worker started after the restart, and one that ran across
// it, make their pool's consumer again and take the work. Every execution
// completes with its exact result, each command claimed once, at attempt 1.
func TestNATSRestartLosesTheStream(t *testing.T) {
	t.Parallel()
	st := startStack(t, options{lease: 30 * time.Second, drainEvery: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	st.startWorker(t, "across", 2)
	st.workerLog.wait(ctx, "worker started")
	// No worker serves "later" yet: its first commands' notifications wait
	// in the stream, and go with it.
	later := st.startChains(t, "later", 3, 2, 0)
	stream, err := st.srv.JS.Stream(ctx, notify.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= uint64(len(later.ids)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := st.srv.EmbeddedNATS.Restart(); err != nil {
		t.Fatal(err)
	}
	for !st.srv.NATS.IsConnected() {
		time.Sleep(20 * time.Millisecond)
	}
	t.Log("NATS restarted without its stream")
	across := st.startChains(t, "across", 3, 2, 0)
	st.startWorker(t, "later", 2)
	st.check(t, across)
	st.check(t, later)
}
