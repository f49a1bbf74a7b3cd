package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// fileReport is validate's machine output for one file.
type fileReport struct {
	File     string                `json:"file"`
	Valid    bool                  `json:"valid"`
	Name     string                `json:"name,omitempty"`
	Path     string                `json:"path,omitempty"`
	Errors   []playbook.Diagnostic `json:"errors"`
	Warnings []playbook.Diagnostic `json:"warnings"`
}

func runValidate(_ context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	asJSON := fs.Bool("json", false, "print a JSON array of {file, valid, errors, warnings}")
	if code, ok := parseFlags(fs, args, "validate [--json] FILE...",
		"Parses and validates NoETL noetl.io/v2 playbooks and prints every error and\n"+
			"warning with its YAML path. Exits 1 when any file has errors, 0 otherwise."); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "noetl validate: name at least one playbook file")
		fs.Usage()
		return exitUsage
	}
	var reports []fileReport
	failed := false
	for _, f := range fs.Args() {
		r := fileReport{File: f, Errors: []playbook.Diagnostic{}, Warnings: []playbook.Diagnostic{}}
		src, err := os.ReadFile(f)
		if err != nil {
			r.Errors = append(r.Errors, playbook.Diagnostic{Severity: playbook.SeverityError, Message: fmt.Sprintf("cannot read the file: %v", err)})
		} else {
			pb, diags := parser.Parse(src)
			r.Errors = append(r.Errors, diags.Errors()...)
			r.Warnings = append(r.Warnings, diags.Warnings()...)
			if pb != nil {
				r.Name, r.Path = pb.Metadata.Name, pb.Metadata.Path
			}
		}
		r.Valid = len(r.Errors) == 0
		failed = failed || !r.Valid
		reports = append(reports, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintf(stderr, "noetl validate: %v\n", err)
			return exitFail
		}
	} else {
		for _, r := range reports {
			printReport(stdout, r)
		}
	}
	if failed {
		return exitFail
	}
	return exitOK
}

func printReport(w io.Writer, r fileReport) {
	switch {
	case r.Valid && len(r.Warnings) == 0:
		fmt.Fprintf(w, "%s: ok (%s)\n", r.File, r.Path)
	case r.Valid:
		fmt.Fprintf(w, "%s: ok (%s), %d warning(s)\n", r.File, r.Path, len(r.Warnings))
	default:
		fmt.Fprintf(w, "%s: invalid, %d error(s), %d warning(s)\n", r.File, len(r.Errors), len(r.Warnings))
	}
	for _, d := range r.Errors {
		fmt.Fprintln(w, indent("error   "+d.String(), "  "))
	}
	for _, d := range r.Warnings {
		fmt.Fprintln(w, indent("warning "+d.String(), "  "))
	}
}
