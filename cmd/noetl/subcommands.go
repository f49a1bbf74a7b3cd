package main

import (
	"context"
	"fmt"
	"io"
	"slices"
)

// subcommandGroup is `noetl <name> <subcommand>`.
type subcommandGroup struct {
	name string
	doc  string
	cmds []subcommand // in the order usage lists them
}

// subcommand is a group's command under its name.
type subcommand struct {
	name string
	command
}

func (g subcommandGroup) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: noetl %s <subcommand> [flags] [args]\n", g.name)
		fmt.Fprintf(w, "\n%s\n", g.doc)
		fmt.Fprintln(w, "\nsubcommands:")
		for _, sc := range g.cmds {
			fmt.Fprintf(w, "  %-9s %s\n", sc.name, sc.summary)
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
	i := slices.IndexFunc(g.cmds, func(sc subcommand) bool { return sc.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "noetl %s: unknown subcommand %q\n\n", g.name, args[0])
		usage(stderr)
		return exitUsage
	}
	return g.cmds[i].start(ctx, g.name+" "+args[0], args[1:], stdout, stderr)
}
