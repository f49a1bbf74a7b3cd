package main

import (
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/replay"
)

// replayFile folds a log file offline: rows shaped like the parity data set,
// streamed (never read whole). With --diff-from the file is streamed a second
// time up to that cutoff, as the server folds the log twice.
func replayFile(path string, q url.Values, stdout, stderr io.Writer) int {
	query, err := replay.ParseQuery(q)
	if err != nil {
		fmt.Fprintf(stderr, "noetl replay: %v\n", err)
		return exitUsage
	}
	if query.Verify {
		fmt.Fprintln(stderr, "noetl replay: --verify compares the fold with a live execution's snapshot; a log file has none (give an execution id instead of --events)")
		return exitUsage
	}
	st, err := foldFile(path, query, query.Cutoff)
	if err != nil {
		return fail(stderr, "replay", err)
	}
	doc := st.Document()
	if query.DiffFrom.Kind != replay.CutoffNone {
		from, err := foldFile(path, query, query.DiffFrom)
		if err != nil {
			return fail(stderr, "replay", err)
		}
		changes := replay.Diff(from, st)
		diff := make([]any, len(changes))
		for i, c := range changes {
			diff[i] = c
		}
		doc["diff"] = diff
	}
	fmt.Fprintln(stdout, client.MarshalIndent(doc))
	return exitOK
}

func foldFile(path string, q replay.Query, cut replay.Cutoff) (*replay.State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	folder := replay.NewFolder(replay.Options{Projection: q.Projection, Cutoff: cut, Limit: q.Limit, Steps: replay.NewEngineSteps()})
	if err := replay.ReadRows(f, folder.Add); err != nil && !replay.IsStop(err) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := folder.State()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}
