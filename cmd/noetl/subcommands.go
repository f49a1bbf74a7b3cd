package main

import (
	"context"
	"fmt"
	"io"
)

// subcommandGroup is `noetl <name> <subcommand>`.
type subcommandGroup struct {
	name  string
	doc   string
	order []string // the subcommands in the order usage lists them
	cmds  map[string]command
}

func (g subcommandGroup) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: noetl %s <subcommand> [flags] [args]\n", g.name)
		fmt.Fprintf(w, "\n%s\n", g.doc)
		fmt.Fprintln(w, "\nsubcommands:")
		for _, n := range g.order {
			fmt.Fprintf(w, "  %-9s %s\n", n, g.cmds[n].summary)
		}
		fmt.Fprintf(w, "\nRun 'noetl %s <subcommand> -h' for its flags.\n", g.name)
	}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	sc, ok := g.cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "noetl %s: unknown subcommand %q\n\n", g.name, args[0])
		usage(stderr)
		return exitUsage
	}
	return sc.start(ctx, g.name+" "+args[0], args[1:], stdout, stderr)
}
