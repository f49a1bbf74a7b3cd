package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPprofHostRule: the profiler answers the Host names the API's local
// server answers and refuses others (421), so a page whose DNS name was
// rebound to 127.0.0.1 reads neither the command line nor a goroutine dump.
func TestPprofHostRule(t *testing.T) {
	t.Setenv("NOETL_ALLOWED_HOSTS", "noetl.internal")
	t.Setenv("NOETL_SERVER_URL", "")
	var out bytes.Buffer
	stop, err := startPprof("127.0.0.1:0", &out, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, rest, _ := strings.Cut(out.String(), "pprof at http://")
	addr, _, _ := strings.Cut(rest, "/")
	_, port, _ := strings.Cut(addr, ":")
	get := func(host, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1.nip.io:" + port} {
		for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2"} {
			code, body := get(host, path)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "NOETL_ALLOWED_HOSTS") || strings.Contains(body, "goroutine ") {
				t.Errorf("Host %s %s: %d %.200q, want 421 naming NOETL_ALLOWED_HOSTS", host, path, code, body)
			}
		}
	}
	for _, host := range []string{addr, "localhost:" + port, "[::1]:" + port, "noetl.internal:" + port} {
		if code, body := get(host, "/debug/pprof/cmdline"); code != http.StatusOK || body == "" {
			t.Errorf("Host %s: %d %.200q, want the command line", host, code, body)
		}
	}
}
