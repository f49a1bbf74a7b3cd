package e2e

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDevDemoExit is make run's smoke test: `noetl dev --demo --exit` brings the
// stack up from nothing, runs the demo to COMPLETED, prints its result and the
// URLs, exits 0, and leaves nothing running.
func TestDevDemoExit(t *testing.T) {
	t.Parallel()
	bin := buildNoetl(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "dev", "--demo", "--exit", "--listen", "127.0.0.1:0")
	cmd.Dir = ".." // examples/ lives at the module root
	cmd.Env = append(cmd.Environ(), "NOETL_DATABASE_URL=", "NOETL_SHARD_URLS=", "NOETL_NATS_URL=", "NOETL_API_TOKEN=",
		"NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_TOKEN=", "NOETL_INTERNAL_API_TOKEN=", "NOETL_LISTEN=")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("noetl dev --exit: %v\n%s", err, text)
	}
	for _, want := range []string{"registered examples/demo.yaml", "COMPLETED", `"verdict": "long"`, "/api/health", "/api/openapi.json", "stopping"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	dsn := regexp.MustCompile(`cluster database (\S+)`).FindStringSubmatch(text)
	natsURL := regexp.MustCompile(`NATS at (\S+)`).FindStringSubmatch(text)
	if dsn == nil || natsURL == nil {
		t.Fatalf("the throwaway parts were not printed:\n%s", text)
	}
	// Nothing left running: the database and NATS no longer answer.
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if conn, err := pgx.Connect(cctx, dsn[1]); err == nil {
		conn.Close(cctx)
		t.Fatalf("the throwaway Postgres still answers at %s", dsn[1])
	}
	u, err := url.Parse(natsURL[1])
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Fatalf("NATS still answers at %s", u.Host)
	} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "refused") {
		t.Logf("dial NATS: %v", err)
	}
}
