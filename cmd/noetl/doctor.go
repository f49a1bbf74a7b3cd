package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// noetl doctor: the executions that break the liveness invariant
// (GET /api/doctor). It exits 1 when it names any, so scripts can alarm.
func runDoctor(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Lookup("json").Usage = "print the answer of GET /api/doctor"
	limit := fs.Int("limit", 100, "how many executions to list, at most 1000")
	if code, ok := flagsOnly(fs, args, "doctor [flags]", "Checks that every running execution has something that will move it: a command pending\n"+
		"(announced, and announced again until claimed), a command held under a lease that ends, a\n"+
		"retry waiting for its time, a running child, or a cancel in progress. Lists the executions\n"+
		"that have none, or whose commands have waited on the scheduled drain too long, each with\n"+
		"why; exits 1 when it lists any.", stderr); !ok {
		return code
	}
	d, err := c.client().Doctor(ctx, *limit)
	if err != nil {
		return fail(stderr, "doctor", err)
	}
	if c.asJSON {
		printJSON(stdout, d)
	} else if len(d.Stalled) == 0 {
		fmt.Fprintln(stdout, "every running execution has something that will move it")
	} else {
		for _, s := range d.Stalled {
			fmt.Fprintf(stdout, "%d  %s  %s  (last change %s)\n    %s\n", int64(s.ExecutionID), s.Path, s.Status,
				s.UpdatedAt.UTC().Format(time.RFC3339), s.Reason)
		}
		fmt.Fprintf(stdout, "%d execution(s) stalled\n", len(d.Stalled))
	}
	if len(d.Stalled) > 0 {
		return exitFail
	}
	return exitOK
}
