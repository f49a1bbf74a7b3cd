package devserver

import (
	"net/http"
	"time"
)

// Timeouts bound how long one client can hold a connection of the local
// server (noetl serve and noetl dev) without making progress. A zero field
// takes its default.
//
// No timeout bounds the work a handler does: a request that takes long on
// the server (a replay of a large execution, a report queued behind a lock) is
// answered however long it takes. In AWS, API Gateway's 30 s integration
// timeout and the function's own timeout bound that work instead.
type Timeouts struct {
	// ReadHeader bounds reading the request line and headers (default 10 s).
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included, from its first
	// byte (default 60 s: a body at the gateway's 10 MB limit arrives at 170
	// KB/s; the API's own limit is 1 MiB). A body trickled in a byte at a time
	// is cut off here with a 400.
	Read time.Duration
	// Write bounds writing a response, from its first byte (default 60 s), so
	// a client that stops reading cannot hold the connection. Unlike
	// http.Server's WriteTimeout, which starts when the request's headers are
	// read, it leaves the handler's own time alone.
	Write time.Duration
	// Idle bounds a kept-alive connection between requests (default 120 s:
	// above Go clients' 90 s, so a client closes an idle connection before the
	// server does and never sends a request into one being closed).
	Idle time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	return Timeouts{ReadHeader: or(t.ReadHeader, 10*time.Second), Read: or(t.Read, 60*time.Second),
		Write: or(t.Write, 60*time.Second), Idle: or(t.Idle, 120*time.Second)}
}

// server is an http.Server for h with these timeouts.
func (t Timeouts) server(h http.Handler) *http.Server {
	t = t.withDefaults()
	return &http.Server{ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, IdleTimeout: t.Idle,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&deadlineWriter{ResponseWriter: w, d: t.Write}, r)
		})}
}

// deadlineWriter sets the connection's write deadline when the response's
// first byte is written; net/http clears it after the response.
type deadlineWriter struct {
	http.ResponseWriter
	d     time.Duration
	armed bool
}

func (w *deadlineWriter) arm() {
	if !w.armed {
		w.armed = true
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
