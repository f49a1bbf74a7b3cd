package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// runRedrive continues FAILED or CANCELLED executions in place
// (docs/redrive.md): one id through the single route, several
// through the bulk one (at most 100), each redriven once.
func runRedrive(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Lookup("json").Usage = "print the API's answer as JSON (one id: the redrive; several: the batch)"
	version := fs.Int("version", 0, "continue under this version of the playbook (default: each execution's own); a newer version is the fix")
	wait := fs.Bool("wait", false, "wait until each redriven execution ends; exit 1 unless all COMPLETED")
	timeout := fs.Duration("timeout", 30*time.Minute, "with --wait, how long to wait")
	if code, ok := parseFlags(fs, args, "redrive [flags] EXECUTION_ID...", "Continues FAILED or CANCELLED executions in place: steps that completed keep their results and\n"+
		"do not run again, routing is decided afresh from them, failed and unreached steps run, loops resume\n"+
		"with their completed iterations kept. A RUNNING or COMPLETED execution is refused (exit 1)."); !ok {
		return code
	}
	if fs.NArg() == 0 || *version < 0 {
		fmt.Fprintln(stderr, "give one or more execution ids (and --version N >= 1 when given)")
		fs.Usage()
		return exitUsage
	}
	ids := make([]int64, fs.NArg())
	for i, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			fmt.Fprintf(stderr, "%q is not an execution id (a positive integer)\n", a)
			return exitUsage
		}
		ids[i] = id
	}
	cl := c.client()
	var redriven []wire.Redriven
	code := exitOK
	if len(ids) == 1 {
		r, err := cl.Redrive(ctx, ids[0], *version)
		if rc := c.reply(stdout, stderr, "redrive", r, err, func() int { printRedriven(stdout, *r); return exitOK }); rc != exitOK || err != nil {
			return rc
		}
		redriven = append(redriven, *r)
	} else {
		b, err := cl.RedriveMany(ctx, ids, *version)
		rc := c.reply(stdout, stderr, "redrive", b, err, func() int {
			for _, it := range b.Executions {
				if it.Redriven != nil {
					printRedriven(stdout, *it.Redriven)
				} else {
					fmt.Fprintf(stdout, "execution %d refused (%d): %s\n", int64(it.ExecutionID), it.Code, it.Error)
				}
			}
			fmt.Fprintf(stdout, "%d redriven, %d refused\n", b.Redriven, b.Refused)
			return exitOK
		})
		if err != nil {
			return rc
		}
		for _, it := range b.Executions {
			if it.Redriven != nil {
				redriven = append(redriven, *it.Redriven)
			}
		}
		if b.Refused > 0 {
			code = exitFail
		}
	}
	if !*wait {
		return code
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for _, r := range redriven {
		view, err := cl.WaitSummary(wctx, int64(r.ExecutionID), 250*time.Millisecond)
		if err != nil {
			return fail(stderr, "redrive", fmt.Errorf("execution %d: %w", int64(r.ExecutionID), err))
		}
		if !c.asJSON {
			fmt.Fprintf(stdout, "execution %d: %s\n", int64(r.ExecutionID), view.Status)
			if view.Error != "" {
				fmt.Fprintf(stdout, "error: %s\n", view.Error)
			}
		}
		if view.Status != "COMPLETED" {
			code = exitFail
		}
	}
	return code
}

func printRedriven(w io.Writer, r wire.Redriven) {
	fmt.Fprintf(w, "execution %d redriven: %s version %d (was %s under version %d), %d command(s) issued",
		int64(r.ExecutionID), r.Path, r.Version, r.PreviousStatus, r.PreviousVersion, r.Commands)
	for _, step := range slices.Sorted(maps.Keys(r.KeptIterations)) {
		fmt.Fprintf(w, ", %s: %d iteration(s) kept", step, r.KeptIterations[step])
	}
	fmt.Fprintln(w)
}
