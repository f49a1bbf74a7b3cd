package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/dev/corpus"
	"github.com/noetl-go/noetl/shared/tools/duckdb"
	"github.com/noetl-go/noetl/shared/worker"
)

func runCorpus(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	dir := fs.String("dir", "", "the corpus folder (offline.json and playbooks/); default noetl-e2e in the conformance folder ($NOETL_CONFORMANCE_DIR or ../shared/conformance)")
	python := fs.String("python", envOr("NOETL_PYTHON", "python3"), "python interpreter for python steps (env NOETL_PYTHON; make corpus passes the steps' environment, see README)")
	only := fs.String("only", "", "run only the playbooks whose file contains one of these comma-separated words")
	class := fs.String("class", "all", "which playbooks: ours (local, local+http), needs (needs:…) or all")
	parallel := fs.Int("parallel", 1, "playbooks run at once")
	timeout := fs.Duration("timeout", 3*time.Minute, "default bound on one playbook's run")
	workers := fs.Int("workers", 2, "in-process workers")
	concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "commands each worker runs at once (default: the product's, as noetl dev)")
	full := fs.Bool("full", false, "run the stress playbooks at NoETL's sizes (default: smaller totals, see shared/dev/corpus checks)")
	dump := fs.String("dump", "", "write each run's final execution view to this folder (one JSON file per playbook)")
	verbose := fs.Bool("v", false, "print the stack's JSON logs")
	toolUser := toolUserFlag(fs)
	if code, ok := flagsOnly(fs, args, "corpus [flags]", "Runs NoETL's offline playbook corpus (offline.json) end to end: a throwaway stack, a database for\n"+
		"the playbooks' credential aliases and a local HTTP fixture standing in for NoETL's test API. Prints\n"+
		"per playbook PASS/FAIL, its final status and whether its own checks passed; exits 1 when one of\n"+
		"the local and local+http playbooks fails without a reason documented in docs/noetl-playbooks.md.", stderr); !ok {
		return code
	}
	if *dump != "" {
		if err := os.MkdirAll(*dump, 0o755); err != nil {
			return fail(stderr, "corpus", err)
		}
	}
	if *dir == "" {
		wd, _ := os.Getwd()
		c, err := conformance.Locate(wd)
		if err != nil {
			return fail(stderr, "corpus", err)
		}
		*dir = filepath.Join(c, "noetl-e2e")
	}
	entries, err := corpus.List(*dir)
	if err != nil {
		return fail(stderr, "corpus", err)
	}
	entries = selectEntries(entries, *class, *only)
	if len(entries) == 0 {
		return fail(stderr, "corpus", fmt.Errorf("no playbook matches --class %s --only %q", *class, *only))
	}
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	fmt.Fprintf(stdout, "noetl corpus: %d playbooks of %s\n", len(entries), *dir)
	start := time.Now()
	s, err := corpus.Start(ctx, corpus.Options{Dir: *dir, Python: *python, Workers: *workers, Concurrency: *concurrency,
		Timeout: *timeout, Logger: logger, ToolUser: *toolUser, Full: *full, DuckDB: duckdb.New()})
	if err != nil {
		return fail(stderr, "corpus", err)
	}
	defer s.Close()
	if err := s.RegisterAll(ctx); err != nil {
		return fail(stderr, "corpus", err)
	}
	fmt.Fprintf(stdout, "noetl corpus: stack at %s, fixture at %s, database %s for the aliases %s\n",
		s.URL(), s.FixtureURL(), corpus.CorpusDatabase, strings.Join(corpus.Aliases, ", "))
	outs := make([]corpus.Outcome, len(entries))
	sem := make(chan struct{}, max(*parallel, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, e := range entries {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			outs[i] = s.Run(ctx, e)
			if *dump != "" && outs[i].View != nil {
				name := filepath.Join(*dump, strings.NewReplacer("/", "__", ".yaml", ".json").Replace(e.File))
				if err := os.WriteFile(name, []byte(client.MarshalIndent(outs[i].View)), 0o644); err != nil {
					fmt.Fprintf(stderr, "noetl corpus: --dump: %v\n", err)
				}
			}
			mu.Lock()
			o := outs[i]
			fmt.Fprintf(stdout, "  ran %-90s %-9s %5.1fs\n", o.File, o.Status, o.Duration.Seconds())
			mu.Unlock()
		}()
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	fmt.Fprintln(stdout)
	sum := corpus.Report(stdout, outs)
	fmt.Fprintf(stdout, "noetl corpus: %s\n", time.Since(start).Round(time.Second))
	if len(sum.Regressions) > 0 {
		return exitFail
	}
	return exitOK
}

// selectEntries keeps the entries of a class ("ours", "needs", "all") whose file
// contains one of the comma-separated words of only.
func selectEntries(entries []corpus.Entry, class, only string) []corpus.Entry {
	var words []string
	for _, w := range strings.Split(only, ",") {
		if w = strings.TrimSpace(w); w != "" {
			words = append(words, w)
		}
	}
	var out []corpus.Entry
	for _, e := range entries {
		switch class {
		case "ours":
			if !e.Ours() {
				continue
			}
		case "needs":
			if e.Ours() {
				continue
			}
		}
		if len(words) > 0 && !slices.ContainsFunc(words, func(w string) bool { return strings.Contains(e.File, w) }) {
			continue
		}
		out = append(out, e)
	}
	return out
}
