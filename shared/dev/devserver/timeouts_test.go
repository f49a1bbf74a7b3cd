package devserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// shortTimeouts are timeouts a test can wait out.
func shortTimeouts() Timeouts {
	return Timeouts{ReadHeader: 500 * time.Millisecond, Read: time.Second, Write: 500 * time.Millisecond, Idle: time.Second}
}

// hangGuard bounds how long a test waits for the server to give up on a
// client; it is never what the test measures.
const hangGuard = 30 * time.Second

// trickle writes head, then the rest a byte every 2 s until the connection
// breaks or done closes.
func trickle(conn net.Conn, head, rest string, done <-chan struct{}) {
	if _, err := io.WriteString(conn, head); err != nil {
		return
	}
	for i := range len(rest) {
		if _, err := io.WriteString(conn, rest[i:i+1]); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// readUntilClosed reads what the server sends until it closes the
// connection; false when the hang guard ran out first.
func readUntilClosed(t *testing.T, conn net.Conn) (string, bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), false
	}
	return string(b), true // EOF or a reset: closed
}

// TestTrickledRequestCutOff: noetl serve/dev's server (devserver.Start)
// closes a connection whose body arrives a byte every 2 s once Read has
// passed, answering 400, and one whose headers trickle once ReadHeader has.
// Before, a trickled body held the connection for as long as it went on.
func TestTrickledRequestCutOff(t *testing.T) {
	pg := devstacktest.Postgres(t, 1)
	s, err := Start(t.Context(), Options{DatabaseURL: pg.ClusterDSN, ShardURLs: strings.Join(pg.ShardDSNs, ","), Migrate: true,
		Timeouts: shortTimeouts(), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	addr := strings.TrimPrefix(s.URL, "http://")
	body := `{"path": "` + strings.Repeat("x", 100) + `"}`
	for _, tc := range []struct{ name, head, rest, want string }{
		{"body", "POST /api/execute HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n", body, "HTTP/1.1 400 "},
		{"headers", "GET /api/health HTTP/1.1\r\n", "Host: x\r\nX-Slow: " + strings.Repeat("y", 100) + "\r\n\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			done := make(chan struct{})
			defer close(done)
			go trickle(conn, tc.head, tc.rest, done)
			got, closed := readUntilClosed(t, conn)
			if !closed {
				t.Fatalf("the server still holds the trickling connection after %s", hangGuard)
			}
			if !strings.HasPrefix(got, tc.want) || (tc.want != "" && !strings.Contains(got, "reading the request body")) {
				t.Fatalf("the server answered %q, want %q", got, tc.want)
			}
		})
	}
	// The server is still serving.
	resp, err := http.Get(s.URL + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// serveWith runs h behind the timeouts on a free port.
func serveWith(t *testing.T, to Timeouts, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := to.server(h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestWriteTimeoutSparesSlowHandlers: the write timeout runs from a
// response's first byte, so a handler working three times longer is still
// answered in full, while a client that stops reading a large response is cut
// off (the handler's write fails) instead of holding the connection.
func TestWriteTimeoutSparesSlowHandlers(t *testing.T) {
	short := shortTimeouts()
	writeErr := make(chan error, 1)
	addr := serveWith(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * short.Write)
			_, _ = io.WriteString(w, "worth the wait")
			return
		}
		chunk := []byte(strings.Repeat("z", 1<<20))
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}))

	resp, err := http.Get("http://" + addr + "/slow")
	if err != nil {
		t.Fatalf("a slow handler was cut off: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "worth the wait" {
		t.Fatalf("slow handler: %d %q", resp.StatusCode, b)
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(conn).Peek(1); err != nil { // the response started; now stop reading
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	select {
	case err := <-writeErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("writing to a client that stopped reading: %v, want a timeout", err)
		}
	case <-ctx.Done():
		t.Fatalf("the server still writes to a client that stopped reading after %s", hangGuard)
	}
}
