// Package lambdaemu is a small Lambda Runtime API emulator, so tests can run a
// real function binary (bootstrap) and invoke it the way AWS Lambda does: the
// binary polls GET /2018-06-01/runtime/invocation/next and posts its answer to
// …/{request id}/response or …/error. The AWS Runtime Interface Emulator is not
// installable here; this covers what provided.al2023 functions use.
package lambdaemu

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Emulator serves the Runtime API on a loopback port.
type Emulator struct {
	srv      *http.Server
	addr     string
	queue    chan *invocation
	mu       sync.Mutex
	inflight map[string]*invocation
	seq      int
	initErr  chan string
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan Result
}

// Result is a function's answer to one invocation.
type Result struct {
	Payload []byte
	// Error is set when the function reported an invocation error.
	Error string
}

// Start listens on 127.0.0.1 on a free port.
func Start() (*Emulator, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &Emulator{addr: ln.Addr().String(), queue: make(chan *invocation, 16), inflight: map[string]*invocation{}, initErr: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", e.next)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", e.answer(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", e.answer(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case e.initErr <- string(b):
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln) //nolint:errcheck // ends with Close
	return e, nil
}

// Addr is the value for AWS_LAMBDA_RUNTIME_API.
func (e *Emulator) Addr() string { return e.addr }

// Close stops the emulator.
func (e *Emulator) Close() error { return e.srv.Close() }

// Invoke queues one invocation and waits for the function's answer.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) (Result, error) {
	e.mu.Lock()
	e.seq++
	inv := &invocation{id: fmt.Sprintf("req-%d", e.seq), payload: payload, deadline: time.Now().Add(30 * time.Second), done: make(chan Result, 1)}
	e.inflight[inv.id] = inv
	e.mu.Unlock()
	select {
	case e.queue <- inv:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	select {
	case r := <-inv.done:
		return r, nil
	case msg := <-e.initErr:
		return Result{}, fmt.Errorf("the function failed to initialise: %s", msg)
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

func (e *Emulator) next(w http.ResponseWriter, r *http.Request) {
	select {
	case inv := <-e.queue:
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:local")
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Sampled=0")
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.payload)
	case <-r.Context().Done():
	}
}

func (e *Emulator) answer(isErr bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		e.mu.Lock()
		inv := e.inflight[id]
		delete(e.inflight, id)
		e.mu.Unlock()
		if inv == nil {
			http.Error(w, `{"errorMessage":"unknown request id"}`, http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		res := Result{Payload: b}
		if isErr {
			var msg struct {
				ErrorMessage string `json:"errorMessage"`
				ErrorType    string `json:"errorType"`
			}
			if json.Unmarshal(b, &msg) == nil && msg.ErrorMessage != "" {
				res.Error = strings.TrimSpace(msg.ErrorType + ": " + msg.ErrorMessage)
			} else {
				res.Error = string(b)
			}
		}
		inv.done <- res
		w.WriteHeader(http.StatusAccepted)
	}
}
