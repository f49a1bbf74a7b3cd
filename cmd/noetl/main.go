// Command noetl is the control plane's CLI: the local stack (dev, serve), a
// worker, migrations, playbook validation, and the client commands that drive a
// running control plane (register, exec, status, watch, events, cancel, replay, workers).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/noetl-go/noetl/shared/config"
)

// command is one command, or one subcommand of a group (subcommandGroup).
// Every command is handed its flag set, named after the command; a client
// command's (client set instead of run) carries the client flags too
// (clientFlags). A group ignores its own: each subcommand is handed one.
type command struct {
	summary string
	run     func(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int
	client  func(ctx context.Context, c *conn, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int
}

// start runs cmd, called name ("doctor", "schedules get"), on its arguments.
func (cmd command) start(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	if cmd.client == nil {
		return cmd.run(ctx, newFlags(name, stderr), args, stdout, stderr)
	}
	c, fs := clientFlags(name, stderr)
	return cmd.client(ctx, c, fs, args, stdout, stderr)
}

// Exit codes: 0 success, 1 the work failed (invalid playbook, failed run), 2 usage.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func commands() map[string]command {
	return map[string]command{
		"corpus":      {summary: "run NoETL's offline playbook corpus end to end and report each playbook's outcome and checks", run: runCorpus},
		"bench":       {summary: "measure the step path: steps/s, step cycle, commits, HTTP requests and event rows per step", run: runBench},
		"dev":         {summary: "the whole stack in one process: database, NATS, API, workers, examples and a demo", run: runDev},
		"serve":       {summary: "serve the API on one port through the Lambda handlers (throwaway Postgres and NATS unless given)", run: runServe},
		"worker":      {summary: "run a worker: pull commands from NATS, claim and run them", run: runWorker},
		"migrate":     {summary: "apply the database migrations and create the NATS stream", run: runMigrate},
		"validate":    {summary: "parse and validate playbooks, printing every error and warning with its YAML path", run: runValidate},
		"register":    {summary: "register playbooks in the catalog", client: runRegister},
		"exec":        {summary: "start an execution (of a catalog path, or of a playbook file after registering it)", client: runExec},
		"status":      {summary: "show an execution's status and progress", client: runStatus},
		"watch":       {summary: "follow an execution: live step table and progress bar until it ends", client: runWatch},
		"events":      {summary: "list an execution's events", client: runEvents},
		"cancel":      {summary: "cancel an execution and its children", client: runCancel},
		"redrive":     {summary: "continue FAILED or CANCELLED executions in place (under a newer version: the fix); completed steps do not run again", client: runRedrive},
		"credentials": {summary: "manage the keychain: set, list, get, delete credentials, their read log, key rotation", run: runCredentials},
		"replay":      {summary: "fold an execution's event log (or a log file with --events) into its projections", client: runReplay},
		"whatif":      {summary: "what a new playbook version would have done on recorded executions, without running a tool", client: runWhatIf},
		"schedules":   {summary: "create, list, pause, resume, trigger, backfill and delete schedules (cron or interval runs)", run: runSchedules},
		"workers":     {summary: "list the workers registered with the server (ours and NoETL's): who is alive, how busy", client: runWorkers},
		"doctor":      {summary: "list the running executions that nothing will move (the liveness invariant), each with why", client: runDoctor},
		"routes":      {summary: "print routes.json (every API route and its Lambda function); --write: regenerate the files derived from the routes", run: runRoutes},
	}
}

func main() {
	// SIGTERM too: process managers stop workers with it, and a worker must get
	// its grace period.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	config.ApplyGCDefaults(os.Getenv) // serve, dev and worker live long; the rest do not mind
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		if len(args) > 1 {
			if c, ok := cmds[args[1]]; ok {
				return c.start(ctx, args[1], []string{"-h"}, stdout, stderr)
			}
		}
		usage(stdout, cmds)
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "noetl: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return exitUsage
	}
	return c.start(ctx, args[0], args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: noetl <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'noetl help <command>' or 'noetl <command> -h' for a command's flags.")
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
