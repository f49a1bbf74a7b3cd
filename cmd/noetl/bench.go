package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/noetl-go/noetl/shared/dev/bench"
)

// shapeFlags collects repeated --shape/--loop values.
type shapeFlags struct {
	parse  func(string) (bench.Shape, error)
	shapes []bench.Shape
}

func (s *shapeFlags) String() string { return fmt.Sprint(s.shapes) }

func (s *shapeFlags) Set(v string) error {
	sh, err := s.parse(v)
	if err != nil {
		return err
	}
	s.shapes = append(s.shapes, sh)
	return nil
}

func runBench(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	server := fs.String("server", "", "measure a running control plane at this URL (with --nats); empty: start a durable Postgres and noetl serve")
	natsURL := fs.String("nats", os.Getenv("NOETL_NATS_URL"), "the running control plane's NATS, with --server (env NOETL_NATS_URL)")
	dbURLs := fs.String("database-urls", "", "with --server: comma-separated URLs of its databases, to count commits per step")
	serverPID := fs.Int("server-pid", 0, "with --server: its process id, to sample its memory")
	shards := fs.Int("shards", 2, "shard databases of the started stack")
	concurrency := fs.Int("concurrency", 100, "commands the worker runs at once (100: River's MaxWorkers in ../shared/bench/river-bench.sh)")
	pprofAddr := fs.String("pprof", "", "serve the started server's pprof on this address (e.g. 127.0.0.1:6060)")
	serverLog := fs.String("server-log", "", "append the started server's log (JSON, warnings and errors) to this file")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	reps := fs.Int("reps", 3, "run every shape this many times, in rounds, and print each shape's median [min..max] (3: REPS in ../shared/bench/river-bench.sh, which prints River's so)")
	warmup := fs.Bool("warmup", true, "run a small shape first, not reported (a fresh stack's first steps prepare statements and fill caches)")
	shapes := &shapeFlags{parse: bench.ParseShape}
	loops := &shapeFlags{parse: bench.ParseLoop}
	noetl := &shapeFlags{parse: bench.ParseNoETL(bench.NoETLCalls)}
	noetlBatch := &shapeFlags{parse: bench.ParseNoETL(bench.NoETLBatches)}
	fs.Var(shapes, "shape", "WxK: W executions at once of a chain of K noop steps (repeatable; default 50x10, 1x200, 500x10)")
	fs.Var(loops, "loop", "NxM: one loop of N noop iterations with M in flight (repeatable; default none)")
	fs.Var(noetl, "noetl", "WxK: a chain shape served by a client speaking NoETL's Rust worker's protocol (claim, then command.started, call.done, command.completed: four requests per step; repeatable; default none)")
	fs.Var(noetlBatch, "noetl-batch", "WxK: a chain shape served by a client speaking NoETL's Python worker's protocol (claim, then two event batches: three requests per step; repeatable; default none)")
	if code, ok := flagsOnly(fs, args, "bench [flags]", "Measures the step path with the project's worker: steps/s, the step cycle (issue of step i → step i+1),\n"+
		"execution latency, Postgres commits, HTTP requests and event rows per step, the server's peak memory;\n"+
		"--noetl and --noetl-batch measure the same with NoETL's workers' protocols instead of ours.\n"+
		"Without --server it starts Postgres with fsync and synchronous_commit on, and noetl serve over it.", stderr); !ok {
		return code
	}
	if *reps < 1 {
		fmt.Fprintf(stderr, "noetl bench: --reps %d: want at least 1 run of each shape\n", *reps)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := bench.Options{Server: *server, NATSURL: *natsURL, Token: os.Getenv("NOETL_WORKER_TOKEN"),
		APIToken: os.Getenv("NOETL_API_TOKEN"), Concurrency: *concurrency, ServerPID: *serverPID, Warmup: *warmup,
		Reps: *reps, Progress: stderr}
	ours := shapes.shapes
	if len(ours) == 0 {
		ours = bench.DefaultShapes()
	}
	o.Shapes = slices.Concat(ours, loops.shapes, noetl.shapes, noetlBatch.shapes)
	if *dbURLs != "" {
		o.Databases = strings.Split(*dbURLs, ",")
	}
	if *server == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail(stderr, "bench", err)
		}
		var serveArgs []string
		if *pprofAddr != "" {
			serveArgs = append(serveArgs, "--pprof", *pprofAddr)
		}
		so := bench.StackOptions{Exe: exe, Shards: *shards, ServeArgs: serveArgs}
		if *serverLog != "" {
			f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fail(stderr, "bench", err)
			}
			defer f.Close()
			so.ServerLog = f
		}
		fmt.Fprintln(stderr, "noetl bench: starting Postgres (fsync on, synchronous_commit on) and noetl serve")
		st, err := bench.StartStack(ctx, so)
		if err != nil {
			return fail(stderr, "bench", err)
		}
		defer st.Close()
		o.Server, o.NATSURL, o.Databases, o.ServerPID = st.ServerURL, st.NATSURL, st.Databases, st.PID
		fmt.Fprintf(stderr, "noetl bench: server %s (pid %d), NATS %s\n", st.ServerURL, st.PID, st.NATSURL)
	} else if *natsURL == "" {
		fmt.Fprintln(stderr, "noetl bench: --server needs --nats (the server's NATS URL) for the worker")
		return exitUsage
	}
	results, err := bench.Run(ctx, o)
	if *asJSON {
		b, _ := json.MarshalIndent(results, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		printResults(stdout, results)
	}
	if err != nil {
		return fail(stderr, "bench", err)
	}
	return exitOK
}

// printResults prints each run's figures, then, when a shape ran more than
// once, each shape's median [min..max] of the timings and CPU.
func printResults(w io.Writer, rs []bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\trun\tsteps/s\tcycle p50 ms\tcycle p99 ms\texec p50 ms\texec p99 ms\tcommits/step\tserver commits/step\tserver txns/step\tdb trips/step\tdb stmts/step\thttp/step\tevents/step\tserver peak RSS MB\tRSS growth MB\tserver CPU ms/step\tworker CPU ms/step\tpg CPU ms/step\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", r.Shape, r.Rep, r.StepsPerSecond,
			opt(r.StepCycleP50Ms, "%.2f"), opt(r.StepCycleP99Ms, "%.2f"), r.ExecutionP50Ms, r.ExecutionP99Ms,
			opt(r.CommitsPerStep, "%.2f"), opt(r.ServerCommitsPerStep, "%.2f"), opt(r.TransactionsPerStep, "%.2f"), opt(r.RoundTripsPerStep, "%.2f"), opt(r.StatementsPerStep, "%.1f"),
			r.HTTPRequestsPerStep, r.EventRowsPerStep, opt(r.ServerPeakRSSMB, "%.1f"), opt(r.ServerRSSGrowthMB, "%.1f"),
			opt(r.ServerCPUMsPerStep, "%.2f"), opt(r.WorkerCPUMsPerStep, "%.2f"), opt(r.PostgresCPUMsPerStep, "%.2f"))
	}
	tw.Flush()
	sums := bench.Summarize(rs)
	if !slices.ContainsFunc(sums, func(s bench.Summary) bool { return s.Runs > 1 }) {
		return
	}
	fmt.Fprintln(w, "\nmedian [min..max] over each shape's runs:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\truns\tsteps/s\tcycle p50 ms\tcycle p99 ms\tserver CPU ms/step\tworker CPU ms/step\tpg CPU ms/step\t")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Shape, s.Runs, spread(&s.StepsPerSecond, "%.1f"),
			spread(s.StepCycleP50Ms, "%.2f"), spread(s.StepCycleP99Ms, "%.2f"),
			spread(s.ServerCPUMsPerStep, "%.2f"), spread(s.WorkerCPUMsPerStep, "%.2f"), spread(s.PostgresCPUMsPerStep, "%.2f"))
	}
	tw.Flush()
}

// spread prints a figure's median [min..max], as river-bench.sh does.
func spread(s *bench.Spread, format string) string {
	if s == nil {
		return "n/a"
	}
	return fmt.Sprintf(format+" ["+format+".."+format+"]", s.Median, s.Min, s.Max)
}

func opt(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

var _ flag.Value = (*shapeFlags)(nil)
