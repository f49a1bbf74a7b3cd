package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/noetl-go/noetl/shared/wire"
)

// runWhatIf is `noetl whatif NEW.yaml --path P --status FAILED --since 24h`:
// what the new version would have done on recorded executions (POST
// /api/whatif), a table and the summary.
func runWhatIf(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	path := fs.String("path", "", "the recorded executions' playbook path (default: the new version's)")
	version := fs.Int("version", 0, "a registered version of --path as the new version, instead of a file")
	status := fs.String("status", "", "only recorded executions with this status (RUNNING, COMPLETED, FAILED, CANCELLED)")
	since := fs.String("since", "", "only executions started since: a duration before now (24h) or an RFC 3339 time")
	until := fs.String("until", "", "only executions started before: a duration before now or an RFC 3339 time")
	limit := fs.Int("limit", 0, fmt.Sprintf("at most this many, newest first (default %d, at most %d)", wire.DefaultWhatIf, wire.MaxWhatIf))
	executions := fs.String("executions", "", "these executions (ids, comma-separated) instead of a selection")
	if code, ok := parseFlags(fs, args, "whatif [flags] [NEW.yaml]",
		"Runs a new playbook version over recorded executions, answering every command from the recorded\n"+
			"result of the same command: no tool runs and nothing is written. Prints per execution whether it\n"+
			"would end the same, now complete, now fail, or needs a live run, and the step where it diverges.\n"+
			"The new version is a file (not registered), or --path with --version."); !ok {
		return code
	}
	var req wire.WhatIfRequest
	switch {
	case fs.NArg() == 1 && *version == 0:
		src, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return fail(stderr, "whatif", err)
		}
		req.Content = string(src)
	case fs.NArg() == 0 && *version > 0 && *path != "":
		req.Path, req.Version = *path, wire.Version(*version)
	default:
		fmt.Fprintln(stderr, "give the new version as one playbook file, or as --path with --version")
		fs.Usage()
		return exitUsage
	}
	if *executions != "" {
		for _, s := range strings.Split(*executions, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || id <= 0 {
				fmt.Fprintf(stderr, "--executions: %q is not an execution id\n", s)
				return exitUsage
			}
			req.Executions = append(req.Executions, wire.ID(id))
		}
	} else {
		req.Select = &wire.WhatIfSelect{Path: *path, Status: *status, Since: *since, Until: *until, Limit: *limit}
	}
	answer, err := c.client().WhatIf(ctx, req)
	return c.reply(stdout, stderr, "whatif", answer, err, func() int {
		printWhatIf(stdout, answer)
		return exitOK
	})
}

// printWhatIf writes the what-if as a table, one execution a row, then the
// summary.
func printWhatIf(w io.Writer, r *wire.WhatIf) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tRECORDED\tOUTCOME\tDIVERGES AT\tWHY")
	for _, e := range r.Executions {
		fmt.Fprintf(tw, "%d\t%s v%d\t%s\t%s\t%s\n", e.ExecutionID, e.RecordedStatus, e.RecordedVersion, e.Outcome,
			orDash(string(e.DivergesAt)), whatIfWhy(e))
	}
	tw.Flush()
	s := r.Summary
	noun := "executions"
	if len(r.Executions) == 1 {
		noun = "execution"
	}
	fmt.Fprintf(w, "\n%d %s: %d same, %d would complete, %d would fail, %d need a live run\n",
		len(r.Executions), noun, s.Same, s.WouldComplete, s.WouldFail, s.NeedsLive)
}

// whatIfWhy is the row's detail: the diff at the diverging step, or the
// error.
func whatIfWhy(e wire.WhatIfExecution) string {
	why := e.Error
	for _, st := range e.Steps {
		if st.Step == string(e.DivergesAt) && st.Diff != "" {
			why = st.Diff
			break
		}
	}
	if len(why) > 100 {
		why = why[:97] + "..."
	}
	return orDash(why)
}
