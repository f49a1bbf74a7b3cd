package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

func runWorkers(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Lookup("json").Usage = "print the registry as GET /api/worker/pools answers it (NoETL's {items, count} with our fields)"
	query := queryFlags(fs,
		queryFlag{"status", "only workers in this state: alive (every live one), ready, expired, offline"},
		queryFlag{"pool", "only workers of this pool"},
		queryFlag{"runtime", "only workers of this runtime (go, python, rust)"})
	if code, ok := flagsOnly(fs, args, "workers [flags]", "Lists the workers registered with the server, ours and NoETL's: who is alive and how busy.\n"+
		"BUSY is the commands a worker holds under a live lease over the capacity it declared; a worker\n"+
		"expires when it has not registered or beaten for a while (45 s by default), and is offline once\nit deregistered.", stderr); !ok {
		return code
	}
	ws, err := c.client().Workers(ctx, query())
	return c.reply(stdout, stderr, "workers", ws, err, func() int {
		renderWorkers(stdout, ws.Items, time.Now())
		return exitOK
	})
}

// renderWorkers prints the live workers first, then the others, each by name,
// and a line of totals.
func renderWorkers(w io.Writer, items []wire.WorkerPool, now time.Time) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no workers registered")
		return
	}
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b wire.WorkerPool) int {
		if a.Alive != b.Alive {
			if a.Alive {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tPOOL\tRUNTIME\tSTATE\tBUSY\tLAST SEEN\tHOST")
	alive, busy, slots := 0, 0, 0
	for _, it := range items {
		capacity := "?"
		if it.Capacity != nil {
			capacity = strconv.Itoa(*it.Capacity)
		}
		if it.Alive {
			alive++
			busy += it.InFlight
			if it.Capacity != nil {
				slots += *it.Capacity
			}
		}
		runtime, _ := it.Runtime["type"].(string)
		host := string(it.Hostname)
		if it.PID != nil {
			host += ":" + strconv.FormatInt(*it.PID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%s\t%s\t%s\n", it.Name, it.Pool, orDash(runtime), it.Status, it.InFlight, capacity,
			ago(now, it.Heartbeat.Time), orDash(host))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d workers alive; %d in flight on %d declared slots\n", alive, len(items), busy, slots)
}

// ago says how long before now t was, to the second.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0).Round(time.Second)
	return d.String() + " ago"
}
