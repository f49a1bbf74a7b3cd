package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/noetl-go/noetl/shared/api"
)

// runRoutes prints routes.json (generated from api.Routes, the single source of
// truth), or with --write DIR regenerates every file derived from api.Routes
// in DIR (the repository root): routes.json, openapi.json and the HttpApi
// events of template.yaml. `make generate` runs `noetl routes --write .`.
func runRoutes(_ context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	dir := fs.String("write", "", "regenerate routes.json, openapi.json and template.yaml's route events in this `dir` (the repository root)")
	if code, ok := parseFlags(fs, args, "routes > routes.json\n       noetl routes --write DIR",
		"Prints every API route with its Lambda function, in routes.json's format;\n"+
			"with --write, rewrites the files derived from the routes in DIR (make generate)."); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	if *dir != "" {
		if err := writeDerived(*dir, stdout); err != nil {
			fmt.Fprintf(stderr, "noetl routes: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	if _, err := stdout.Write(api.RoutesJSON()); err != nil {
		fmt.Fprintf(stderr, "noetl routes: %v\n", err)
		return exitFail
	}
	return exitOK
}

// writeDerived regenerates the files derived from api.Routes in dir, writing
// only those that change, and says which. template.yaml must already exist
// (only its marked route regions are generated); it is checked before any
// file is written, so a bad template leaves every file as it was.
func writeDerived(dir string, stdout io.Writer) error {
	tplPath := filepath.Join(dir, "template.yaml")
	tpl, err := os.ReadFile(tplPath)
	if err != nil {
		return fmt.Errorf("reading the SAM template: %w (--write wants the repository root)", err)
	}
	newTpl, err := api.SAMTemplate(tpl)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"routes.json", api.RoutesJSON()},
		{"openapi.json", api.OpenAPI()},
		{"template.yaml", newTpl},
	} {
		path := filepath.Join(dir, f.name)
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if bytes.Equal(old, f.data) {
			fmt.Fprintf(stdout, "%s: up to date\n", path)
			continue
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		fmt.Fprintf(stdout, "%s: written\n", path)
	}
	return nil
}
