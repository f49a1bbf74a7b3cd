package duckdb

// The helper: DuckDB as the tool user. DuckDB reads and writes files from
// SQL (read_csv, COPY … TO, ATTACH, the database file itself), so a worker
// running as root that ran it in its own process would let a step read
// root-only files and write root-owned ones. With a tool user the engine
// runs in a helper process instead: the worker's own binary, re-executed as
// that user (tools.RunAs, the rule python and shell follow) with
// helperEnv set, which this package's init turns into serveHelper before
// anything else runs. One helper serves every step of the engine (so a
// database file is still opened once), speaking JSON lines over its stdin
// and stdout:
//
//	→ {"id", "op": "open", "path"}            ← {"id", "db", "extensions"}
//	→ {"id", "op": "exec", "db", "sql", "params"}   ← {"id", "entry"}
//	→ {"id", "op": "query", "db", "sql", "n"} ← {"id", "columns", "rows", "more": true} …
//	→ {"id", "op": "next" | "stop", "target"}  (after each batch) … ← {"id", "done": true}
//	→ {"id", "op": "close", "db"}             ← {"id"}
//	→ {"op": "cancel", "target"}              (the target answers with its error)
//
// Any answer may carry "error" instead. The helper says {"id": 0, "hello":
// helperHello} first; it ends when its stdin closes (the worker is gone).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/tools"
)

const (
	// helperEnv, set to "1" in a process's environment, makes this package's
	// init serve the helper protocol instead of running the program.
	helperEnv   = "NOETL_DUCKDB_HELPER"
	helperHello = "noetl-duckdb/1"
	// helperStart bounds the helper's start (loading the binary, the hello).
	helperStart = 30 * time.Second
)

func init() {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(serveHelper(os.Stdin, os.Stdout))
	}
}

// AsUser implements tools.SQLEngineAsUser: the engine in a helper process
// running as u, one per user and data dir for the life of e.
func (e *Engine) AsUser(u *tools.User, dataDir string, log *slog.Logger) tools.SQLEngine {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := fmt.Sprintf("%d:%s", u.UID, dataDir)
	if h := e.helpers[key]; h != nil {
		return h
	}
	if log == nil {
		log = slog.Default()
	}
	h := &helperEngine{user: u, dir: dataDir, log: log}
	e.helpers[key] = h
	return h
}

// helperEngine is the client side: a tools.SQLEngine whose databases live in
// the helper process, started on first use and again after it died.
type helperEngine struct {
	user *tools.User
	dir  string
	log  *slog.Logger

	mu   sync.Mutex
	proc *helperProc
}

func (h *helperEngine) Open(ctx context.Context, path string) (tools.SQLDB, error) {
	p, err := h.running()
	if err != nil {
		return nil, err
	}
	resp, err := p.call(ctx, map[string]any{"op": "open", "path": path})
	if err != nil {
		return nil, err
	}
	db, _ := resp["db"].(int64)
	var exts []string
	for _, x := range asList(resp["extensions"]) {
		if s, ok := x.(string); ok {
			exts = append(exts, s)
		}
	}
	return &helperConn{p: p, db: db, exts: exts}, nil
}

// running returns the live helper, starting one when there is none.
func (h *helperEngine) running() (*helperProc, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc != nil && !h.proc.ended() {
		return h.proc, nil
	}
	p, err := startHelper(h.user, h.dir, h.log)
	if err != nil {
		return nil, err
	}
	h.proc = p
	return p, nil
}

// startHelper runs this binary as u in dir, which it first makes u's.
func startHelper(u *tools.User, dir string, log *slog.Logger) (*helperProc, error) {
	who := u.String()
	if err := ownDataDir(dir, u); err != nil {
		return nil, err
	}
	exe, err := selfExe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Dir = dir
	// The tools' environment (R-P3): nothing of the worker's secrets.
	cmd.Env = []string{helperEnv + "=1", "HOME=" + dir, "TMPDIR=" + dir, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	tools.RunAs(cmd, u)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &helperProc{cmd: cmd, stdin: stdin, pending: map[int64]chan map[string]any{}, done: make(chan struct{}),
		stderr: &tail{max: 4096}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the duckdb helper as tool user %s (the worker's binary %s, run from %s, must be executable by that user): %w", who, exe, dir, err)
	}
	hello := make(chan error, 1)
	go p.read(bufio.NewReader(stdout), hello, log)
	timer := time.NewTimer(helperStart)
	defer timer.Stop()
	select {
	case err := <-hello:
		if err != nil {
			_ = cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("the duckdb helper as tool user %s did not start: %w%s", who, err, p.stderrNote())
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("the duckdb helper as tool user %s did not answer within %s%s", who, helperStart, p.stderrNote())
	}
	log.Info("duckdb steps run in a helper process as "+who, "pid", cmd.Process.Pid, "dir", dir)
	return p, nil
}

// ownDataDir makes dir when missing and gives it to u. Its default is under
// /tmp, where anyone may have made that name a link first, and chowning
// through a link gives its target away: so it must be a directory itself,
// root's or u's (or this process's), writable by no one else, and is chowned
// without following a link.
func ownDataDir(dir string, u *tools.User) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the data dir %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		what := "not a directory"
		if fi.Mode()&os.ModeSymlink != 0 {
			what = "a symbolic link, not a directory"
		}
		return fmt.Errorf("the data dir %s is %s: remove it, or set another with --data-dir (NOETL_DATA_DIR)", dir, what)
	}
	// One another user made first, or may write in (/tmp itself, say), holds
	// what they put there, and would be given away whole.
	if uid, ok := ownerOf(fi); ok && uid != 0 && uid != u.UID && uid != uint32(os.Geteuid()) {
		return fmt.Errorf("the data dir %s belongs to uid %d, neither root nor the tool user %s: another local user made it first; remove it, or set another with --data-dir (NOETL_DATA_DIR)", dir, uid, u)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("the data dir %s is writable by other users (mode %o): give the duckdb steps a directory of their own with --data-dir (NOETL_DATA_DIR)", dir, fi.Mode().Perm())
	}
	if err := os.Lchown(dir, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("give the data dir %s to tool user %s: %w", dir, u, err)
	}
	return nil
}

// selfExe is the running binary. On Linux /proc/self/exe, which the child
// opens itself after switching users: the binary's folders (a go test's
// build dir, root's home) need not be open to the tool user, only the file.
func selfExe() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// helperProc is one running helper: requests go out under wmu, answers are
// routed to their request by read.
type helperProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan map[string]any
	err     error         // why it ended, once done is closed
	done    chan struct{} // closed when the helper is gone
}

func (p *helperProc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *helperProc) stderrNote() string {
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		return ": " + s
	}
	return ""
}

// read routes answers until the helper's stdout ends; then every pending
// request fails with why.
func (p *helperProc) read(r *bufio.Reader, hello chan<- error, log *slog.Logger) {
	greeted := false
	var err error
	for {
		line, rerr := r.ReadBytes('\n')
		if len(line) > 0 {
			msg, derr := jsonx.DecodeObject(line)
			if derr != nil {
				err = fmt.Errorf("the duckdb helper wrote %q: %w", cut(string(line), 200), derr)
				break
			}
			if !greeted {
				if msg["hello"] != helperHello {
					err = fmt.Errorf("the binary did not answer as the duckdb helper (%q)", cut(string(line), 200))
					break
				}
				greeted = true
				hello <- nil
				continue
			}
			id, _ := msg["id"].(int64)
			p.mu.Lock()
			ch := p.pending[id]
			p.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
		}
		if rerr != nil {
			err = fmt.Errorf("the duckdb helper ended: %w", rerr)
			break
		}
	}
	_ = p.cmd.Process.Kill()
	werr := p.cmd.Wait()
	if werr != nil {
		err = fmt.Errorf("the duckdb helper ended (%v)", werr)
	}
	err = fmt.Errorf("%w%s", err, p.stderrNote())
	if !greeted {
		hello <- err
	} else {
		log.Warn("duckdb helper ended", "err", err)
	}
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(p.done)
}

// begin registers a request id and its answers' channel.
func (p *helperProc) begin() (int64, chan map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	ch := make(chan map[string]any, 4)
	p.pending[p.nextID] = ch
	return p.nextID, ch
}

func (p *helperProc) end(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, id)
}

func (p *helperProc) send(msg map[string]any) error {
	b, err := jsonx.Marshal(msg)
	if err != nil {
		return fmt.Errorf("duckdb helper request: %w", err)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return p.gone(err)
	}
	return nil
}

// gone is the error of a request to a helper that ended.
func (p *helperProc) gone(cause error) error {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-time.After(time.Second):
		return fmt.Errorf("the duckdb helper: %w", cause)
	}
}

// call sends one request and waits for its one answer; ctx ending cancels
// it in the helper and waits for the answer it then gives.
func (p *helperProc) call(ctx context.Context, msg map[string]any) (map[string]any, error) {
	id, ch := p.begin()
	defer p.end(id)
	msg["id"] = id
	if err := p.send(msg); err != nil {
		return nil, err
	}
	return p.await(ctx, id, ch)
}

func (p *helperProc) await(ctx context.Context, id int64, ch chan map[string]any) (map[string]any, error) {
	done := ctx.Done()
	for {
		select {
		case resp := <-ch:
			if e, _ := resp["error"].(string); e != "" {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, errors.New(e)
			}
			return resp, nil
		case <-p.done:
			return nil, p.gone(nil)
		case <-done:
			// Cancel it there, then wait for the answer it gives.
			done = nil
			_ = p.send(map[string]any{"op": "cancel", "target": id})
		}
	}
}

// helperConn is one tool run's connection in the helper.
type helperConn struct {
	p    *helperProc
	db   int64
	exts []string
}

func (c *helperConn) Extensions() []string { return c.exts }

func (c *helperConn) Exec(ctx context.Context, statement string, params []any) (map[string]any, error) {
	resp, err := c.p.call(ctx, map[string]any{"op": "exec", "db": c.db, "sql": statement, "params": params})
	if err != nil {
		return nil, err
	}
	entry, _ := resp["entry"].(map[string]any)
	return entry, nil
}

func (c *helperConn) Query(ctx context.Context, query string, n int, each func(columns []string, rows [][]any) error) error {
	p := c.p
	id, ch := p.begin()
	defer p.end(id)
	if err := p.send(map[string]any{"id": id, "op": "query", "db": c.db, "sql": query, "n": n}); err != nil {
		return err
	}
	var eachErr error
	for {
		resp, err := p.await(ctx, id, ch)
		if err != nil {
			return errors.Join(eachErr, err)
		}
		if resp["done"] == true {
			return eachErr
		}
		var cols []string
		for _, x := range asList(resp["columns"]) {
			s, _ := x.(string)
			cols = append(cols, s)
		}
		var rows [][]any
		for _, r := range asList(resp["rows"]) {
			rows = append(rows, asList(r))
		}
		op := "next"
		if eachErr == nil {
			eachErr = each(cols, rows)
		}
		if eachErr != nil {
			op = "stop"
		}
		if err := p.send(map[string]any{"op": op, "target": id}); err != nil {
			return errors.Join(eachErr, err)
		}
	}
}

func (c *helperConn) Close() error {
	_, err := c.p.call(context.Background(), map[string]any{"op": "close", "db": c.db})
	return err
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// tail keeps the last max bytes written (the helper's stderr, for errors).
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// serveHelper is the helper process: an engine of its own, serving the
// protocol above until in ends. It returns the exit status.
func serveHelper(in io.Reader, out io.Writer) int {
	s := &server{e: New(), out: bufio.NewWriter(out), conns: map[int64]*conn{}, running: map[int64]*served{}}
	if err := s.write(map[string]any{"id": int64(0), "hello": helperHello}); err != nil {
		return 1
	}
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			msg, derr := jsonx.DecodeObject(line)
			if derr != nil {
				fmt.Fprintf(os.Stderr, "duckdb helper: bad request: %v\n", derr)
				break
			}
			s.handle(msg)
		}
		if err != nil {
			break
		}
	}
	// The worker is gone: stop what runs, close (and checkpoint) every file.
	s.mu.Lock()
	for _, r := range s.running {
		r.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, c := range s.conns {
		_ = c.Close()
	}
	return 0
}

type server struct {
	e  *Engine
	wg sync.WaitGroup

	wmu sync.Mutex
	out *bufio.Writer

	mu      sync.Mutex
	nextDB  int64
	conns   map[int64]*conn
	running map[int64]*served // by request id
}

// served is a request being served: its cancel, and a query's replies to
// its batches (next or stop).
type served struct {
	cancel context.CancelFunc
	reply  chan string
}

func (s *server) write(msg map[string]any) error {
	b, err := jsonx.Marshal(msg)
	if err != nil {
		id := msg["id"]
		b = jsonx.MustMarshal(map[string]any{"id": id, "error": fmt.Sprintf("encode the answer: %v", err)})
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		return err
	}
	return s.out.Flush()
}

func (s *server) fail(id int64, err error) {
	_ = s.write(map[string]any{"id": id, "error": err.Error()})
}

func (s *server) handle(msg map[string]any) {
	id, _ := msg["id"].(int64)
	target, _ := msg["target"].(int64)
	op, _ := msg["op"].(string)
	switch op {
	case "cancel", "next", "stop":
		s.mu.Lock()
		r := s.running[target]
		s.mu.Unlock()
		switch {
		case r == nil:
		case op == "cancel":
			r.cancel()
		default:
			r.reply <- op
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &served{cancel: cancel, reply: make(chan string, 1)}
	s.mu.Lock()
	s.running[id] = r
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.running, id)
			s.mu.Unlock()
			cancel()
		}()
		s.serve(ctx, id, op, msg, r)
	}()
}

func (s *server) serve(ctx context.Context, id int64, op string, msg map[string]any, r *served) {
	sql, _ := msg["sql"].(string)
	dbID, _ := msg["db"].(int64)
	s.mu.Lock()
	c := s.conns[dbID]
	s.mu.Unlock()
	if op != "open" && c == nil {
		s.fail(id, fmt.Errorf("no open database %d", dbID))
		return
	}
	switch op {
	case "open":
		path, _ := msg["path"].(string)
		db, err := s.e.Open(ctx, path)
		if err != nil {
			s.fail(id, err)
			return
		}
		s.mu.Lock()
		s.nextDB++
		n := s.nextDB
		s.conns[n] = db.(*conn)
		s.mu.Unlock()
		exts := make([]any, 0, len(db.Extensions()))
		for _, x := range db.Extensions() {
			exts = append(exts, x)
		}
		_ = s.write(map[string]any{"id": id, "db": n, "extensions": exts})
	case "exec":
		entry, err := c.Exec(ctx, sql, asList(msg["params"]))
		if err != nil {
			s.fail(id, err)
			return
		}
		_ = s.write(map[string]any{"id": id, "entry": entry})
	case "query":
		n := jsonx.Int(msg["n"])
		err := c.Query(ctx, sql, n, func(columns []string, rows [][]any) error {
			cols := make([]any, len(columns))
			for i, col := range columns {
				cols[i] = col
			}
			list := make([]any, len(rows))
			for i, row := range rows {
				list[i] = row
			}
			if err := s.write(map[string]any{"id": id, "columns": cols, "rows": list, "more": true}); err != nil {
				return err
			}
			select {
			case reply := <-r.reply:
				if reply == "stop" {
					return errStopped
				}
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && !errors.Is(err, errStopped) {
			s.fail(id, err)
			return
		}
		_ = s.write(map[string]any{"id": id, "done": true})
	case "close":
		s.mu.Lock()
		delete(s.conns, dbID)
		s.mu.Unlock()
		if err := c.Close(); err != nil {
			s.fail(id, err)
			return
		}
		_ = s.write(map[string]any{"id": id})
	default:
		s.fail(id, fmt.Errorf("unknown op %q", op))
	}
}

// errStopped ends a query the worker stopped reading.
var errStopped = errors.New("stopped by the worker")
