package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// `noetl schedules <subcommand>`: the schedule routes from the shell.

func runSchedules(ctx context.Context, _ *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return subcommandGroup{name: "schedules", doc: "Start playbooks on a cron or an interval, once per due time (docs/schedules.md).",
		cmds: []subcommand{
			{"create", command{summary: "create a schedule from flags or a YAML file (flags win)", client: runScheduleCreate}},
			{"list", command{summary: "list schedules with their next and last runs", client: runScheduleList}},
			{"get", command{summary: "show one schedule", client: runScheduleGet}},
			{"pause", command{summary: "pause a schedule (its due times do not run)", client: runSchedulePause}},
			{"resume", command{summary: "resume a schedule from its next due time (no burst of the paused ones)", client: runScheduleResume}},
			{"trigger", command{summary: "run a schedule now, under its overlap policy", client: runScheduleTrigger}},
			{"backfill", command{summary: "run every due time of a past range once, in order", client: runScheduleBackfill}},
			{"delete", command{summary: "delete a schedule (its runs go on)", client: runScheduleDelete}},
			{"runs", command{summary: "list a schedule's runs and skipped due times, newest first", client: runScheduleRuns}},
		}}.run(ctx, args, stdout, stderr)
}

// scheduleIDArg reads the one positional schedule id.
func scheduleIDArg(fs *flag.FlagSet, stderr io.Writer) (int64, bool) {
	return idArg(fs, stderr, "a", "schedule")
}

// given is v's address, or nil for the zero value: a flag left at its zero
// sends no field.
func given[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func wholeSeconds(flagName string, d time.Duration) (int64, error) {
	if d%time.Second != 0 || d < 0 {
		return 0, fmt.Errorf("--%s %s: give whole seconds (e.g. 30s, 5m, 1h)", flagName, d)
	}
	return int64(d / time.Second), nil
}

func runScheduleCreate(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	file := fs.String("f", "", "YAML (or JSON) file with the schedule, - for stdin (the API's fields: playbook_path, cron, interval_seconds, …)")
	path := fs.String("path", "", "the playbook's catalog path (playbook_path)")
	version := fs.Int("version", 0, "playbook version (default: the latest when each run starts)")
	cron := fs.String("cron", "", `cron expression: 5 fields, or 6 with seconds first, or @daily etc. (e.g. "*/5 * * * *")`)
	every := fs.Duration("every", 0, "interval instead of a cron (whole seconds: 30s, 5m, 1h)")
	tz := fs.String("timezone", "", "IANA time zone the cron is read in (default UTC)")
	overlap := fs.String("overlap", "", "while the previous run is going: skip (default), buffer_one or allow")
	catchup := fs.Duration("catchup", 0, "after an outage, skip due times older than this (default 60s)")
	jitter := fs.Duration("jitter", 0, "delay each run by up to this (default 0)")
	paused := fs.Bool("paused", false, "create it paused")
	sets := setFlags{}
	fs.Var(sets, "set", "input_payload value key=value (repeatable; JSON values allowed)")
	if code, ok := flagsOnly(fs, args, "schedules create [flags]", "Creates a schedule. -f reads a YAML file with the API's fields; flags given override it.", stderr); !ok {
		return code
	}
	var r wire.ScheduleRequest
	if *file != "" {
		if err := readRequest(*file, os.Stdin, &r, "playbook_path, playbook_version, cron, interval_seconds, timezone, enabled, input_payload, overlap, catchup_seconds, jitter_seconds, meta"); err != nil {
			return fail(stderr, "schedules create", err)
		}
	}
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "path":
			r.PlaybookPath = given(*path)
		case "version":
			r.PlaybookVersion = given(*version)
		case "cron":
			r.Cron, r.IntervalSeconds = given(*cron), nil
		case "every":
			n, err := wholeSeconds("every", *every)
			errs = append(errs, err)
			r.IntervalSeconds, r.Cron = given(n), nil
		case "timezone":
			r.Timezone = given(*tz)
		case "overlap":
			r.Overlap = given(*overlap)
		case "catchup":
			n, err := wholeSeconds("catchup", *catchup)
			errs = append(errs, err)
			r.CatchupSeconds = given(n)
		case "jitter":
			n, err := wholeSeconds("jitter", *jitter)
			errs = append(errs, err)
			r.JitterSeconds = &n
		case "paused":
			r.Enabled = new(!*paused)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fail(stderr, "schedules create", err)
	}
	if len(sets) > 0 && r.InputPayload == nil {
		r.InputPayload = map[string]any{}
	}
	for k, v := range sets {
		r.InputPayload[k] = v
	}
	if r.PlaybookPath == nil {
		fmt.Fprintln(stderr, "noetl schedules create: give the playbook with --path (or playbook_path in -f FILE)")
		return exitUsage
	}
	s, err := c.client().CreateSchedule(ctx, r)
	return c.reply(stdout, stderr, "schedules create", s, err, func() int {
		fmt.Fprintf(stdout, "created schedule %d: %s %s, next run %s\n", s.ScheduleID, s.PlaybookPath, when(*s), at(s.NextRunAt))
		return exitOK
	})
}

// when says when a schedule is due.
func when(s wire.Schedule) string {
	if s.IntervalSeconds != nil {
		return "every " + (time.Duration(*s.IntervalSeconds) * time.Second).String()
	}
	return fmt.Sprintf("cron %q (%s)", string(s.Cron), s.Timezone)
}

func at(t wire.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

func runScheduleList(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := flagsOnly(fs, args, "schedules list [flags]", "Lists every schedule with its next and last run.", stderr); !ok {
		return code
	}
	var all []wire.Schedule
	cursor := ""
	for {
		page, err := c.client().Schedules(ctx, cursor, 1000)
		if err != nil {
			return fail(stderr, "schedules list", err)
		}
		all = append(all, page.Schedules...)
		if page.NextCursor == "" {
			break
		}
		cursor = string(page.NextCursor)
	}
	return c.reply(stdout, stderr, "schedules list", all, nil, func() int { return printSchedules(stdout, all) })
}

// printSchedules is the schedules as a table.
func printSchedules(stdout io.Writer, all []wire.Schedule) int {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPLAYBOOK\tWHEN\tSTATE\tNEXT RUN\tLAST RUN\tLAST EXECUTION\tLAST STATUS")
	for _, s := range all {
		state := "enabled"
		if !s.Enabled {
			state = "paused"
		}
		last := "-"
		if s.LastExecutionID != 0 {
			last = strconv.FormatInt(int64(s.LastExecutionID), 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ScheduleID, s.PlaybookPath, when(s), state, at(s.NextRunAt),
			at(s.LastScheduledAt), last, orDash(string(s.LastStatus)))
	}
	tw.Flush()
	if len(all) == 0 {
		fmt.Fprintln(stdout, "no schedules (create one: noetl schedules create --path PATH --every 1h)")
	}
	return exitOK
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runScheduleGet(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "schedules get [flags] SCHEDULE_ID", "Shows one schedule.", scheduleIDArg,
		func(cl *client.Client, id int64) (*wire.Schedule, error) { return cl.Schedule(ctx, id) },
		func(_ int64, s *wire.Schedule) int {
			printSchedule(stdout, *s)
			return exitOK
		})
}

func printSchedule(w io.Writer, s wire.Schedule) {
	state := "enabled"
	if !s.Enabled {
		state = "paused"
	}
	fmt.Fprintf(w, "schedule %d: %s %s, %s\n", s.ScheduleID, s.PlaybookPath, when(s), state)
	fmt.Fprintf(w, "  overlap %s, catch-up %ds, jitter %ds\n", s.Overlap, s.CatchupSeconds, s.JitterSeconds)
	fmt.Fprintf(w, "  next run %s\n", at(s.NextRunAt))
	if s.LastExecutionID != 0 {
		fmt.Fprintf(w, "  last run for %s: execution %d %s\n", at(s.LastScheduledAt), s.LastExecutionID, orDash(string(s.LastStatus)))
	}
	if s.Backfill != nil {
		fmt.Fprintf(w, "  backfilling: next %s, through %s\n", at(s.Backfill.Next), at(s.Backfill.To))
	}
	if len(s.InputPayload) > 0 {
		b, _ := jsonx.Marshal(s.InputPayload)
		fmt.Fprintf(w, "  input_payload %s\n", b)
	}
}

func runSchedulePause(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return setEnabled(ctx, c, fs, args, stdout, stderr, false)
}

func runScheduleResume(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return setEnabled(ctx, c, fs, args, stdout, stderr, true)
}

func setEnabled(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer, enabled bool) int {
	verb := map[bool]string{true: "resume", false: "pause"}[enabled]
	return onOne(c, fs, args, stdout, stderr, "schedules "+verb+" [flags] SCHEDULE_ID", "Sets the schedule's enabled flag.", scheduleIDArg,
		func(cl *client.Client, id int64) (*wire.Schedule, error) {
			return cl.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &enabled})
		},
		func(id int64, s *wire.Schedule) int {
			if enabled {
				fmt.Fprintf(stdout, "schedule %d resumed, next run %s\n", id, at(s.NextRunAt))
			} else {
				fmt.Fprintf(stdout, "schedule %d paused\n", id)
			}
			return exitOK
		})
}

func runScheduleTrigger(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "schedules trigger [flags] SCHEDULE_ID", "Runs the schedule now under its overlap policy (skip: not while a run is going).", scheduleIDArg,
		func(cl *client.Client, id int64) (*wire.Triggered, error) { return cl.TriggerSchedule(ctx, id) },
		func(id int64, r *wire.Triggered) int {
			switch r.Outcome {
			case "started":
				fmt.Fprintf(stdout, "schedule %d: started execution %d (watch it: noetl watch %d)\n", id, r.ExecutionID, r.ExecutionID)
			case "buffered":
				fmt.Fprintf(stdout, "schedule %d: the run waits for the one going (overlap buffer_one)\n", id)
			default:
				fmt.Fprintf(stdout, "schedule %d: %s: %s\n", id, r.Outcome, r.Reason)
				return exitFail
			}
			return exitOK
		})
}

func runScheduleBackfill(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	from := fs.String("from", "", "the range's start, RFC 3339 (e.g. 2024-05-01T00:00:00Z)")
	to := fs.String("to", "", "the range's end, RFC 3339, not in the future")
	id, code, ok := oneArg(fs, args, stderr, "schedules backfill [flags] --from TIME --to TIME SCHEDULE_ID",
		"Runs every due time of [from, to] once, in order, under the overlap policy (skip and buffer_one: one after the other).", scheduleIDArg)
	if !ok {
		return code
	}
	parse := func(name, v string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return t, fmt.Errorf("--%s %q: want an RFC 3339 time such as 2024-05-01T00:00:00Z", name, v)
		}
		return t, nil
	}
	f, err1 := parse("from", *from)
	t, err2 := parse("to", *to)
	if err := errors.Join(err1, err2); err != nil {
		return fail(stderr, "schedules backfill", err)
	}
	r, err := c.client().BackfillSchedule(ctx, id, f, t)
	return c.reply(stdout, stderr, "schedules backfill", r, err, func() int {
		fmt.Fprintf(stdout, "schedule %d: backfilling %d due times, %s to %s (noetl schedules runs %d)\n", id, r.DueTimes, at(r.From), at(r.To), id)
		return exitOK
	})
}

func runScheduleDelete(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	return onOne(c, fs, args, stdout, stderr, "schedules delete [flags] SCHEDULE_ID", "Deletes a schedule and its log; the runs it started go on.", scheduleIDArg,
		func(cl *client.Client, id int64) (map[string]any, error) {
			return map[string]any{"schedule_id": strconv.FormatInt(id, 10), "deleted": true}, cl.DeleteSchedule(ctx, id)
		},
		func(id int64, _ map[string]any) int {
			fmt.Fprintf(stdout, "schedule %d deleted\n", id)
			return exitOK
		})
}

func runScheduleRuns(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	limit := fs.Int("limit", 50, "rows to show (newest first)")
	return onOne(c, fs, args, stdout, stderr, "schedules runs [flags] SCHEDULE_ID", "Lists the schedule's runs and the due times it skipped, newest first.", scheduleIDArg,
		func(cl *client.Client, id int64) (*wire.ScheduleRunPage, error) {
			return cl.ScheduleRuns(ctx, id, "", *limit)
		},
		func(_ int64, page *wire.ScheduleRunPage) int { return printRuns(stdout, page.Runs) })
}

// printRuns is a schedule's log as a table.
func printRuns(stdout io.Writer, runs []wire.ScheduleRun) int {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DUE\tOUTCOME\tORIGIN\tEXECUTION\tSTATUS\tNOTE")
	for _, r := range runs {
		exec, note := "-", ""
		if r.ExecutionID != 0 {
			exec = strconv.FormatInt(int64(r.ExecutionID), 10)
		}
		if r.Count > 1 {
			note = fmt.Sprintf("%d due times through %s; ", r.Count, at(r.Through))
		}
		note = strings.TrimSuffix(note+string(r.Reason), "; ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", at(r.ScheduledAt), r.Outcome, r.Origin, exec, orDash(string(r.Status)), note)
	}
	tw.Flush()
	return exitOK
}
