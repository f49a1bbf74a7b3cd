package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/store"
)

// commitCounter reads the committed transactions of the server's databases
// from pg_stat_database. It connects to each Postgres server's maintenance
// database, so its own reads are not counted.
type commitCounter struct {
	servers []*pgx.Conn
	names   [][]string // per server, the databases counted
	local   []bool     // per server: on this machine (its processes are in /proc)
}

func newCommitCounter(ctx context.Context, urls []string) (*commitCounter, error) {
	c := &commitCounter{}
	byServer := map[string]int{}
	for _, u := range urls {
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("database URL: %w", err)
		}
		key := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
		i, ok := byServer[key]
		if !ok {
			db := cfg.Database
			cfg.Database = "postgres"
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				c.close()
				return nil, fmt.Errorf("connect to %s to read pg_stat_database: %w", key, err)
			}
			i = len(c.servers)
			byServer[key] = i
			c.servers = append(c.servers, conn)
			c.names = append(c.names, nil)
			c.local = append(c.local, isLoopback(cfg.Host))
			cfg.Database = db
		}
		c.names[i] = append(c.names[i], cfg.Database)
	}
	return c, nil
}

func (c *commitCounter) close() {
	for _, conn := range c.servers {
		conn.Close(context.Background())
	}
}

// read returns the commits so far, or -1 when no database is known.
func (c *commitCounter) read(ctx context.Context) (int64, error) {
	if len(c.servers) == 0 {
		return -1, nil
	}
	var total int64
	for i, conn := range c.servers {
		var n int64
		// A fresh statistics snapshot each time (stats_fetch_consistency).
		if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			return 0, err
		}
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(xact_commit), 0)::bigint FROM pg_stat_database WHERE datname = ANY($1)`,
			c.names[i]).Scan(&n); err != nil {
			return 0, fmt.Errorf("read pg_stat_database: %w", err)
		}
		total += n
	}
	return total, nil
}

// postgresPIDs lists the processes of the Postgres servers counted: every
// backend and background process pg_stat_activity shows, and their parent,
// the postmaster. Only a server on this machine has them in /proc.
func (c *commitCounter) postgresPIDs(ctx context.Context) ([]int, error) {
	var out []int
	for i, conn := range c.servers {
		if !c.local[i] {
			continue
		}
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity`)
		if err != nil {
			return nil, fmt.Errorf("read pg_stat_activity: %w", err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return nil, fmt.Errorf("read pg_stat_activity: %w", err)
		}
		for _, pid := range pids {
			out = append(out, int(pid))
		}
		if len(pids) > 0 {
			if ppid, ok := parentPID(int(pids[0])); ok {
				out = append(out, ppid)
			}
		}
	}
	return out, nil
}

// isLoopback: a Postgres host on this machine (a loopback address, localhost
// or a Unix socket's directory).
func isLoopback(host string) bool {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// statsFlushLag bounds how late a backend reports its counts: Postgres 15
// flushes them when a backend goes idle, but at most once a second, and a
// backend that went idle within a second of its last flush waits 10 s.
const statsFlushLag = 11 * time.Second

// settle reads the count once every backend has reported what it did before
// ended: statsFlushLag after it. (Waiting for the count to stop moving
// waited for the longest, 3×statsFlushLag, whenever anything else committed
// meanwhile, such as the server's schedules' loop once a second.)
func (c *commitCounter) settle(ctx context.Context, since int64, ended time.Time) (int64, error) {
	if since < 0 {
		return -1, nil
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Until(ended.Add(statsFlushLag))):
	}
	return c.read(ctx)
}

// dbWork reads the server's own count of its work in Postgres from /metrics;
// false when it serves none.
func dbWork(ctx context.Context, server, token string) (store.CounterSnapshot, bool) {
	var c store.CounterSnapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/metrics", nil)
	if err != nil {
		return c, false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, false
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(value, 10, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "noetl_db_round_trips_total":
			c.RoundTrips, found = n, found+1
		case "noetl_db_statements_total":
			c.Statements, found = n, found+1
		case "noetl_db_commits_total":
			c.Commits, found = n, found+1
		case "noetl_db_transactions_total":
			c.Transactions, found = n, found+1
		}
	}
	return c, resp.StatusCode == http.StatusOK && found == 4
}

// rssSampler samples a process's resident set every 100 ms.
type rssSampler struct {
	pid     int
	stopped chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []int64 // KiB
}

func startRSS(pid int) *rssSampler {
	s := &rssSampler{pid: pid, stopped: make(chan struct{}), done: make(chan struct{})}
	if pid <= 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := residentKiB(pid); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, kb)
				s.mu.Unlock()
			}
			select {
			case <-s.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends sampling and returns the peak in MB and the growth from the first
// half's peak to the second half's (nil when not measured).
func (s *rssSampler) stop() (peak, growth *float64) {
	if s.pid > 0 {
		close(s.stopped)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return nil, nil
	}
	maxOf := func(xs []int64) int64 {
		m := int64(0)
		for _, x := range xs {
			m = max(m, x)
		}
		return m
	}
	half := len(s.samples) / 2
	p := float64(maxOf(s.samples)) / 1024
	g := float64(maxOf(s.samples[half:])-maxOf(s.samples[:max(half, 1)])) / 1024
	return &p, &g
}

// residentKiB reads VmRSS from /proc/<pid>/status.
func residentKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
