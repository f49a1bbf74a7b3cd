package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// startPprof serves Go's profiler on addr (its own listener, never the API's:
// profiles are for operators, and the API's auth does not cover them). It
// returns a func that stops it.
//
// It answers only the Host names the API's local server answers: a page
// whose DNS name was rebound to 127.0.0.1 could otherwise read
// /debug/pprof/cmdline (a --database-url's password) and goroutine dumps.
func startPprof(addr string, stderr io.Writer, who string) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hosts := devserver.HostRule(ln.Addr().String(), config.SplitList(os.Getenv(config.EnvAllowedHosts)), os.Getenv(config.EnvServerURL))
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allows(r.Host) {
			http.Error(w, fmt.Sprintf("pprof does not answer for host %q: call it by its listen address or a loopback name, or add the name to %s",
				jsonx.Cut(r.Host, 100), config.EnvAllowedHosts), http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stderr, "%s: pprof at http://%s/debug/pprof/\n", who, ln.Addr())
	return func() { _ = srv.Close() }, nil
}
