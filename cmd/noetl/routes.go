package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/noetl-go/noetl/shared/api"
)

// runRoutes prints routes.json (generated from api.Routes, the single source of
// truth): `go run ./cmd/noetl routes > routes.json`.
func runRoutes(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("routes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: noetl routes > routes.json")
		fmt.Fprintln(fs.Output(), "\nPrints every API route with its Lambda function, in routes.json's format.")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	if _, err := stdout.Write(api.RoutesJSON()); err != nil {
		fmt.Fprintf(stderr, "noetl routes: %v\n", err)
		return exitFail
	}
	return exitOK
}
