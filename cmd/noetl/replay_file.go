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
// streamed (never read whole).
func replayFile(path string, q url.Values, stdout, stderr io.Writer) int {
	query, err := replay.ParseQuery(q)
	if err != nil {
		fmt.Fprintf(stderr, "noetl replay: %v\n", err)
		return exitUsage
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(stderr, "replay", err)
	}
	defer f.Close()
	folder := replay.NewFolder(replay.Options{Projection: query.Projection, Cutoff: query.Cutoff, Limit: query.Limit, Steps: replay.NewEngineSteps()})
	err = replay.ReadRows(f, folder.Add)
	if err != nil && !replay.IsStop(err) {
		return fail(stderr, "replay", fmt.Errorf("%s: %w", path, err))
	}
	st, err := folder.State()
	if err != nil {
		return fail(stderr, "replay", err)
	}
	fmt.Fprintln(stdout, client.MarshalIndent(st.Document()))
	return exitOK
}
