package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// obj decodes a JSON object literal into the jsonx convention.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := jsonx.DecodeObject([]byte(s))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

// sameJSON compares a value with a JSON literal in canonical form.
func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	w, err := jsonx.Decode([]byte(want))
	if err != nil {
		t.Fatalf("bad want JSON for %s: %v", what, err)
	}
	g, err := jsonx.Marshal(got)
	if err != nil {
		t.Fatalf("%s: marshal: %v", what, err)
	}
	if string(g) != string(jsonx.MustMarshal(w)) {
		t.Errorf("%s:\n got  %s\n want %s", what, g, jsonx.MustMarshal(w))
	}
}

// fake is a scripted tool runner. Per label, outcomes are consumed one per call (the
// last repeats). Without a script, kind "echo" answers with its input and kind "cfg"
// with its config.
type fake struct {
	script map[string][]toolresult.Envelope
	calls  []Item
	byLbl  map[string]int
}

func (f *fake) exec(_ context.Context, it Item) toolresult.Envelope {
	f.calls = append(f.calls, it)
	if f.byLbl == nil {
		f.byLbl = map[string]int{}
	}
	n := f.byLbl[it.Label]
	f.byLbl[it.Label]++
	if s := f.script[it.Label]; len(s) > 0 {
		return s[min(n, len(s)-1)]
	}
	switch it.Kind {
	case "echo":
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any(it.Input)}
	case "cfg":
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any(it.Config)}
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"ran": it.Label}}
}

func (f *fake) count(label string) int { return f.byLbl[label] }

// sleeps records requested waits; cancelAfter > 0 cancels ctx on that wait.
type sleeps struct {
	got         []time.Duration
	cancelAfter int
	cancel      context.CancelFunc
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.got = append(s.got, d)
	if s.cancelAfter > 0 && len(s.got) >= s.cancelAfter {
		s.cancel()
	}
	return ctx.Err()
}

type env struct {
	f     *fake
	s     *sleeps
	beats int
	out   toolresult.Envelope
}

var fixedNow = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// run runs payload with a fake exec and sleeper.
func run(t *testing.T, payload string, script map[string][]toolresult.Envelope) *env {
	t.Helper()
	return runCtx(t, context.Background(), payload, script, 0)
}

func runCtx(t *testing.T, ctx context.Context, payload string, script map[string][]toolresult.Envelope, cancelAfter int) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &env{f: &fake{script: script}, s: &sleeps{cancelAfter: cancelAfter, cancel: cancel}}
	e.out = Run(ctx, obj(t, payload), Options{
		Exec:      e.f.exec,
		Sleep:     e.s.sleep,
		Now:       func() time.Time { return fixedNow },
		Heartbeat: func() { e.beats++ },
	})
	return e
}

func secs(fs ...float64) []time.Duration {
	out := make([]time.Duration, len(fs))
	for i, f := range fs {
		out[i] = time.Duration(f * float64(time.Second))
	}
	return out
}

func ok(data any) toolresult.Envelope {
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}
}

func failed(msg string, data any) toolresult.Envelope {
	return toolresult.Envelope{Status: toolresult.StatusError, Data: data, Error: &toolresult.ErrorInfo{Message: msg}}
}

func httpResp(code int, body any) map[string]any {
	return map[string]any{"status_code": int64(code), "headers": map[string]any{}, "body": body}
}

func wantStatus(t *testing.T, e toolresult.Envelope, status string) {
	t.Helper()
	if e.Status != status {
		t.Fatalf("status = %q, want %q (error: %+v)", e.Status, status, e.Error)
	}
	if status == toolresult.StatusSuccess && e.Error != nil {
		t.Fatalf("success with error %+v", e.Error)
	}
	if status != toolresult.StatusSuccess && e.Error == nil {
		t.Fatalf("status %s without error", status)
	}
}

func wantErrContains(t *testing.T, e toolresult.Envelope, parts ...string) {
	t.Helper()
	if e.Error == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(e.Error.Message, p) {
			t.Errorf("error %q does not contain %q", e.Error.Message, p)
		}
	}
}
