package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/wire"
)

// conn holds the flags every client command shares.
type conn struct {
	server string
	token  string
	asJSON bool
}

func (c *conn) register(fs *flag.FlagSet) {
	server := os.Getenv("NOETL_SERVER_URL")
	if server == "" {
		server = "http://127.0.0.1:8082"
	}
	fs.StringVar(&c.server, "server", server, "control plane URL (env NOETL_SERVER_URL)")
	fs.StringVar(&c.token, "token", os.Getenv("NOETL_API_TOKEN"), "API token (env NOETL_API_TOKEN)")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON for scripts")
}

// clientFlags is a client command's flag set with the flags every client
// command shares.
func clientFlags(name string, stderr io.Writer) (*conn, *flag.FlagSet) {
	c, fs := &conn{}, newFlags(name, stderr)
	c.register(fs)
	return c, fs
}

func (c *conn) client() *client.Client { return client.New(c.server, c.token) }

// parseFlags parses args, printing usage on error; ok false means return code.
func parseFlags(fs *flag.FlagSet, args []string, usage, help string) (int, bool) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: noetl %s\n\n%s\n\nflags:\n", usage, help)
		fs.PrintDefaults()
	}
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return 0, true
}

// noArgs rejects positional arguments for a command that takes none.
func noArgs(fs *flag.FlagSet, stderr io.Writer) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(stderr, "noetl %s: unexpected arguments %q (this command takes only flags)\n", fs.Name(), fs.Args())
	fs.Usage()
	return false
}

// flagsOnly is parseFlags for a command that takes no positional
// arguments: any is refused with the usage (noArgs).
func flagsOnly(fs *flag.FlagSet, args []string, usage, help string, stderr io.Writer) (int, bool) {
	if code, ok := parseFlags(fs, args, usage, help); !ok {
		return code, false
	}
	if !noArgs(fs, stderr) {
		return exitUsage, false
	}
	return 0, true
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "noetl %s: %v\n", cmd, err)
	return exitFail
}

// oneArg parses a command's flags and its one positional argument, which
// read reads (executionID, scheduleIDArg, nameArg); ok false means return
// code.
func oneArg[T any](fs *flag.FlagSet, args []string, stderr io.Writer, usage, help string,
	read func(*flag.FlagSet, io.Writer) (T, bool)) (v T, code int, ok bool) {
	if code, ok := parseFlags(fs, args, usage, help); !ok {
		return v, code, false
	}
	if v, ok = read(fs, stderr); !ok {
		return v, exitUsage, false
	}
	return v, 0, true
}

// onOne is a client command on one thing: it reads the one positional
// argument (read, as oneArg), asks the server about it (call) and replies
// with the answer under the command's name (conn.reply), text printing it.
func onOne[A, T any](c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage, help string,
	read func(*flag.FlagSet, io.Writer) (A, bool), call func(*client.Client, A) (T, error), text func(A, T) int) int {
	a, code, ok := oneArg(fs, args, stderr, usage, help, read)
	if !ok {
		return code
	}
	answer, err := call(c.client(), a)
	return c.reply(stdout, stderr, fs.Name(), answer, err, func() int { return text(a, answer) })
}

// reply ends a client command: a failed call is reported under the
// command's name, the answer printed as JSON with --json, or else as text
// writes it (text's result is the exit code).
func (c *conn) reply(stdout, stderr io.Writer, cmd string, answer any, err error, text func() int) int {
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if c.asJSON {
		printJSON(stdout, answer)
		return exitOK
	}
	return text()
}

func printJSON(w io.Writer, v any) {
	b, _ := jsonx.Marshal(v)
	fmt.Fprintln(w, string(b))
}

// executionID reads the one positional execution id.
func executionID(fs *flag.FlagSet, stderr io.Writer) (int64, bool) {
	return idArg(fs, stderr, "an", "execution")
}

// idArg reads the one positional argument as the id of a kind of thing
// (article: "a" or "an" before it).
func idArg(fs *flag.FlagSet, stderr io.Writer, article, kind string) (int64, bool) {
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "give exactly one %s id\n", kind)
		fs.Usage()
		return 0, false
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id <= 0 {
		fmt.Fprintf(stderr, "%q is not %s %s id (a positive integer)\n", fs.Arg(0), article, kind)
		return 0, false
	}
	return id, true
}

func runRegister(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(fs, args, "register [flags] FILE...", "Registers playbook files; the server validates them and answers every problem."); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "name at least one playbook file")
		fs.Usage()
		return exitUsage
	}
	code := exitOK
	for _, f := range fs.Args() {
		r, err := registerFile(ctx, c.client(), f)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			code = exitFail
			continue
		}
		if c.asJSON {
			printJSON(stdout, map[string]any{"file": f, "catalog_id": r.CatalogID, "path": r.Path, "version": r.Version, "warnings": r.Warnings})
			continue
		}
		fmt.Fprintf(stdout, "%s: registered %s version %d (catalog id %d)\n", f, r.Path, r.Version, r.CatalogID)
		for _, w := range r.Warnings {
			fmt.Fprintf(stdout, "  warning %v\n", w)
		}
	}
	return code
}

func registerFile(ctx context.Context, cl *client.Client, file string) (*wire.Registered, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return cl.Register(ctx, string(src))
}

// setFlags collects repeated --set k=v.
type setFlags map[string]any

func (s setFlags) String() string { return fmt.Sprint(map[string]any(s)) }

// Set parses k=v; a value that is valid JSON (numbers, booleans, lists, objects,
// quoted strings) is taken as JSON, anything else as a plain string.
func (s setFlags) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("expected key=value, got %q", kv)
	}
	if parsed, err := jsonx.Decode([]byte(v)); err == nil {
		s[k] = parsed
	} else {
		s[k] = v
	}
	return nil
}

func runExec(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	sets := setFlags{}
	fs.Var(sets, "set", "payload value key=value (repeatable; JSON values allowed)")
	payloadFile := fs.String("payload", "", "JSON file with the payload (--set values win)")
	wait := fs.Bool("wait", false, "wait until the execution ends and print its status, error and result (--json: the execution's view, without its steps when the view is over the client's limit); exit 1 unless it COMPLETED")
	timeout := fs.Duration("timeout", 30*time.Minute, "with --wait, how long to wait")
	version := fs.Int("version", 0, "catalog version (default: latest)")
	pool := fs.String("pool", "", "execution pool (worker pool)")
	if code, ok := parseFlags(fs, args, "exec [flags] PATH|FILE", "Starts an execution of a catalog path. A FILE that exists is registered first."); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "give one catalog path or playbook file")
		fs.Usage()
		return exitUsage
	}
	payload := map[string]any{}
	if *payloadFile != "" {
		b, err := os.ReadFile(*payloadFile)
		if err != nil {
			return fail(stderr, "exec", err)
		}
		if payload, err = jsonx.DecodeObject(b); err != nil {
			return fail(stderr, "exec", fmt.Errorf("--payload %s: %w", *payloadFile, err))
		}
	}
	for k, v := range sets {
		payload[k] = v
	}
	cl := c.client()
	path := fs.Arg(0)
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		r, err := registerFile(ctx, cl, path)
		if err != nil {
			return fail(stderr, "exec", fmt.Errorf("register %s: %w", path, err))
		}
		path = r.Path
	}
	// A key of its own makes the request safe to send again, so the client
	// rides out a server whose database is failing over (503, Retry-After).
	id, err := cl.Execute(ctx, wire.ExecuteRequest{Path: path, Version: wire.Version(*version), Payload: payload, Pool: *pool,
		IdempotencyKey: "cli-" + rand.Text()})
	if err != nil {
		return fail(stderr, "exec", err)
	}
	if !*wait {
		if c.asJSON {
			printJSON(stdout, map[string]any{"execution_id": strconv.FormatInt(id, 10), "status": "started"})
		} else {
			fmt.Fprintf(stdout, "started execution %d of %s\n", id, path)
		}
		return exitOK
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	// The summary is the outcome without the steps, which can be large; --json
	// prints the whole view when it fits the client's limit, else the summary.
	view, err := cl.WaitSummary(wctx, id, 250*time.Millisecond)
	if err != nil {
		return fail(stderr, "exec", fmt.Errorf("execution %d: %w", id, err))
	}
	if c.asJSON {
		full, err := cl.Execution(wctx, id)
		var tooLarge *client.AnswerTooLargeError
		switch {
		case err == nil:
			view = full
		case errors.As(err, &tooLarge):
			fmt.Fprintf(stderr, "noetl exec: printing the execution without its steps: %v\n", err)
		default:
			return fail(stderr, "exec", fmt.Errorf("execution %d: %w", id, err))
		}
	}
	if c.asJSON {
		printJSON(stdout, view)
	} else {
		fmt.Fprintf(stdout, "execution %d of %s: %s\n", id, path, view.Status)
		if view.Error != "" {
			fmt.Fprintf(stdout, "error: %s\n", view.Error)
		}
		fmt.Fprintf(stdout, "result: %s\n", client.MarshalIndent(view.Result))
	}
	if view.Status != "COMPLETED" {
		return exitFail
	}
	return exitOK
}

func runStatus(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "status [flags] EXECUTION_ID", "Shows an execution's status, current step and progress.", executionID,
		func(cl *client.Client, id int64) (*wire.Status, error) { return cl.Status(ctx, id) },
		func(id int64, st *wire.Status) int {
			p := st.Progress
			fmt.Fprintf(stdout, "execution %d: %s\n", id, st.Status)
			if st.CurrentStep != "" {
				fmt.Fprintf(stdout, "current step: %s\n", st.CurrentStep)
			}
			fmt.Fprintf(stdout, "steps: %d total, %d completed, %d running, %d failed, %d skipped\n",
				p.TotalSteps, p.CompletedSteps, p.RunningSteps, p.FailedSteps, p.SkippedSteps)
			return exitOK
		})
}

func runWatch(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Lookup("json").Usage = "print the execution view (as exec --wait --json prints it) as one JSON line each time it changes; the last line is the final view"
	every := fs.Duration("every", 500*time.Millisecond, "refresh interval")
	if code, ok := parseFlags(fs, args, "watch [flags] EXECUTION_ID", "Follows an execution until it ends: a step table and a progress bar, or with --json a stream of\n"+
		"JSON lines (one per change of the execution view, the last one final). Exits 1 unless it COMPLETED."); !ok {
		return code
	}
	id, ok := executionID(fs, stderr)
	if !ok {
		return exitUsage
	}
	cl := c.client()
	tty := !c.asJSON && isTerminal(stdout)
	last := ""
	for {
		view, err := cl.Execution(ctx, id)
		if err != nil {
			return fail(stderr, "watch", err)
		}
		var frame string
		if c.asJSON {
			b, err := jsonx.Marshal(view)
			if err != nil {
				return fail(stderr, "watch", err)
			}
			frame = string(b) + "\n"
		} else {
			frame = renderWatch(id, view)
		}
		if frame != last {
			if tty && last != "" {
				fmt.Fprintf(stdout, "\033[%dA\033[J", strings.Count(last, "\n"))
			}
			fmt.Fprint(stdout, frame)
			last = frame
		}
		if lifecycle.ExecutionEnded(view.Status) {
			if view.Status != "COMPLETED" {
				return exitFail
			}
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitFail
		case <-time.After(*every):
		}
	}
}

// renderWatch draws the step table and progress bar of an execution view.
func renderWatch(id int64, view *wire.Execution) string {
	steps := view.Steps
	names := make([]string, 0, len(steps))
	done := 0
	for n, s := range steps {
		names = append(names, n)
		switch s.Status {
		case "completed", "skipped", "failed", "cancelled":
			done++
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := steps[names[i]].StartedAt.Time, steps[names[j]].StartedAt.Time
		if !a.Equal(b) {
			return a.Before(b) && !a.IsZero() || b.IsZero()
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "execution %d  %-10s %s\n", id, view.Status, view.Path)
	fmt.Fprintf(&b, "  %-28s %-10s %6s %8s\n", "STEP", "STATUS", "VISITS", "ATTEMPTS")
	for _, n := range names {
		s := steps[n]
		fmt.Fprintf(&b, "  %-28s %-10s %6d %8d\n", n, s.Status, s.Visits, s.Attempts)
	}
	total := len(steps)
	width := 30
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	fmt.Fprintf(&b, "  [%s%s] %d/%d steps finished\n", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total)
	if view.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", view.Error)
	}
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func runEvents(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := parseFlags(fs, args, "events [flags] EXECUTION_ID", "Lists an execution's events in order."); !ok {
		return code
	}
	id, ok := executionID(fs, stderr)
	if !ok {
		return exitUsage
	}
	cl := c.client()
	var after int64
	for {
		evs, next, err := cl.Events(ctx, id, after, 1000)
		if err != nil {
			return fail(stderr, "events", err)
		}
		for _, e := range evs {
			if c.asJSON {
				printJSON(stdout, e)
				continue
			}
			fmt.Fprintf(stdout, "%5d  %-20s %-22s %-10s %s\n", e.Seq, e.NodeName, e.EventType, e.Status, e.CreatedAt.Text())
		}
		if next == 0 || len(evs) == 0 {
			return exitOK
		}
		after = next
	}
}

func runCancel(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Lookup("json").Usage = `print the API's answer as JSON: {"execution_id": "ID", "status": "CANCELLED", "cancelled_executions": [...]}`
	reason := fs.String("reason", "cancelled from the CLI", "why")
	id, code, ok := oneArg(fs, args, stderr, "cancel [flags] EXECUTION_ID", "Cancels an execution and its children. Cancelling a cancelled execution succeeds again;\n"+
		"a COMPLETED or FAILED one is left as it is (exit 1; the answer says how it ended).", executionID)
	if !ok {
		return code
	}
	answer, err := c.client().Cancel(ctx, id, *reason)
	// One that had ended COMPLETED or FAILED is left as it is: exit 1, with
	// --json too (the answer printed).
	ended := err == nil && answer.Already != "" && answer.Already != "CANCELLED"
	code = c.reply(stdout, stderr, "cancel", answer, err, func() int {
		if ended {
			fmt.Fprintf(stderr, "execution %d had already ended %s: nothing cancelled\n", id, answer.Already)
			return exitFail
		}
		fmt.Fprintf(stdout, "execution %d cancelled\n", id)
		return exitOK
	})
	if ended {
		return exitFail
	}
	return code
}

func runReplay(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	eventsFile := fs.String("events", "", "fold this JSON log file offline (rows shaped like the parity data set) instead of asking a server")
	query := queryFlags(fs,
		queryFlag{"as-of-event-id", "cutoff: fold up to this event id (inclusive)"},
		queryFlag{"as-of-position", "cutoff: fold up to this sequence number (inclusive)"},
		queryFlag{"as-of-time", "cutoff: fold up to this RFC 3339 time (inclusive)"},
		queryFlag{"diff-from", "also show what changed since this cutoff (event_id:N, position:N, time:T)"},
		queryFlag{"projection", "execution|stage|frame|command|business_object|loop|step|all"})
	verify := fs.Bool("verify", false, "compare the full fold with the live snapshot")
	limit := fs.Int("limit", 0, "fold at most this many events (default and most: 100000, replay.MaxLimit); the output says truncated when the log is longer")
	if code, ok := parseFlags(fs, args, "replay [flags] EXECUTION_ID | replay --events FILE.json", "Folds an event log into deterministic projections with checksums and prints the state as JSON."); !ok {
		return code
	}
	q := query()
	if *verify {
		q.Set("verify", "true")
	}
	if *limit > 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	if *eventsFile != "" {
		if fs.NArg() != 0 {
			fmt.Fprintln(stderr, "give either --events FILE or an execution id, not both")
			return exitUsage
		}
		return replayFile(*eventsFile, q, stdout, stderr)
	}
	id, ok := executionID(fs, stderr)
	if !ok {
		return exitUsage
	}
	doc, err := c.client().Replay(ctx, id, q)
	if err != nil {
		return fail(stderr, "replay", err)
	}
	fmt.Fprintln(stdout, client.MarshalIndent(doc))
	if v, ok := doc["verify"].(map[string]any); ok && v["consistent"] == false {
		return exitFail
	}
	return exitOK
}
