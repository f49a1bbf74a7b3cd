package controlplane

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/whatif"
	"github.com/noetl-go/noetl/shared/wire"
)

// WhatIfRequest is a what-if as the service takes it: the new version
// (registered, or content) and the recorded executions (ids, or a filter).
type WhatIfRequest struct {
	// Path and Version name a registered version (Version 0: the latest);
	// Content is one not registered, YAML.
	Path    string
	Version int
	Content string
	// IDs, or Select with Since/Until already resolved.
	IDs    []int64
	Select *store.ExecutionFilter
}

// WhatIf runs the new version over each recorded execution, answering every
// command from the recorded result of the same command (shared/whatif): no
// tool runs and nothing is written (it only reads). The executions must be
// of the new version's playbook path (422 naming both otherwise). Redrive
// takes the answer's WouldComplete.
func (s *Service) WhatIf(ctx context.Context, req WhatIfRequest) (*wire.WhatIf, error) {
	v, err := s.whatIfVersion(ctx, req)
	if err != nil {
		return nil, err
	}
	path := v.PB.Metadata.Path
	var rows []store.Execution
	if req.Select != nil {
		f := *req.Select
		if f.Path == "" {
			f.Path = path
		}
		if f.Path != path {
			return nil, Errorf(ErrInvalid, "select.path: the executions are of playbook %s, the new version is of %s; a what-if compares versions of one playbook", f.Path, path)
		}
		if f.Limit <= 0 {
			f.Limit = wire.DefaultWhatIf
		}
		if rows, err = s.ListExecutions(ctx, f); err != nil {
			return nil, err
		}
	} else {
		for i, id := range req.IDs {
			row, _, _, err := s.readExecution(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("executions[%d]: %w", i, err)
			}
			if row.Path != path {
				return nil, Errorf(ErrInvalid, "executions[%d]: execution %d is of playbook %s, the new version is of %s; a what-if compares versions of one playbook", i, id, row.Path, path)
			}
			rows = append(rows, row)
		}
	}
	for i, row := range rows {
		if row.LastSeq > MaxWhatIfEvents {
			return nil, Errorf(ErrInvalid, "executions[%d]: execution %d has %d events, over the most a what-if reads of one execution, %d (controlplane.MaxWhatIfEvents); leave it out of the what-if",
				i, row.ExecutionID, row.LastSeq, MaxWhatIfEvents)
		}
	}
	out := &wire.WhatIf{Path: path, Version: v.Version, Executions: make([]wire.WhatIfExecution, len(rows))}
	if err := s.whatIfRows(ctx, v, rows, out.Executions); err != nil {
		return nil, err
	}
	for _, e := range out.Executions {
		switch e.Outcome {
		case wire.OutcomeSame:
			out.Summary.Same++
		case wire.OutcomeWouldComplete:
			out.Summary.WouldComplete++
		case wire.OutcomeWouldFail:
			out.Summary.WouldFail++
		case wire.OutcomeNeedsLive:
			out.Summary.NeedsLive++
		}
	}
	return out, nil
}

// MaxWhatIfEvents and MaxWhatIfLogBytes bound one recorded execution a
// what-if reads: its events, and the bytes of their values (context, meta,
// result, error). It holds the whole log, and the new version's run may
// reach ten times as many events: a larger one is refused, naming it.
const (
	MaxWhatIfEvents   = 200_000
	MaxWhatIfLogBytes = 64 << 20
)

// whatIfChunk is how many recorded logs one read brings at most (one round
// trip per shard); whatIfChunkBytes bounds the bytes of their values a chunk
// holds: a read stops at the first log that starts past it (a chunk holds
// one log at least), the rest waiting for the next. Memory holds about two
// chunks of logs at a time.
const whatIfChunk = 50

var whatIfChunkBytes = 32 << 20 // a var for tests

// whatIfChunkRead, when set (tests), hears how many logs each chunk read
// handed on.
var whatIfChunkRead func(logs int)

// whatIfEventBytes is what holding an event costs besides its values (an
// engine.Event and its maps), counted against whatIfChunkBytes.
const whatIfEventBytes = 200

// whatIfRows runs the what-if of each row into out (same order): one
// goroutine reads the logs chunk by chunk while one per CPU runs the engine
// over the chunk before it.
func (s *Service) whatIfRows(ctx context.Context, v whatif.Version, rows []store.Execution, out []wire.WhatIfExecution) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type job struct {
		i   int
		rec whatif.Record
	}
	jobs := make(chan job, whatIfChunk)
	r := &whatif.Runner{Engine: s.eng, Load: s.recordedValues}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				e, err := r.Execution(ctx, v, j.rec)
				if err != nil {
					cancel(err)
					continue
				}
				out[j.i] = e
			}
		}()
	}
	err := s.readRecords(ctx, rows, func(i int, rec whatif.Record) error {
		select {
		case jobs <- job{i, rec}:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(jobs)
	wg.Wait()
	if err != nil {
		return err
	}
	return context.Cause(ctx)
}

// readRecords reads the rows' logs, a chunk at a time (one query per shard
// the chunk touches), leaving out events stored ignored, and hands each
// record on with its row's index.
func (s *Service) readRecords(ctx context.Context, rows []store.Execution, each func(int, whatif.Record) error) error {
	var waiting []int // rows a read left for the next
	for next := 0; next < len(rows) || len(waiting) > 0; {
		chunk := waiting
		for ; len(chunk) < whatIfChunk && next < len(rows); next++ {
			chunk = append(chunk, next)
		}
		var err error
		if waiting, err = s.readChunk(ctx, rows, chunk, each); err != nil {
			return err
		}
	}
	return nil
}

// errChunkFull stops a chunk's read at its byte budget.
var errChunkFull = errors.New("what-if: the chunk is full")

// readChunk reads the logs of rows[i] for i in chunk until their values
// pass whatIfChunkBytes, hands each log read whole on, and returns the rows
// left to read.
func (s *Service) readChunk(ctx context.Context, rows []store.Execution, chunk []int, each func(int, whatif.Record) error) ([]int, error) {
	recs := make(map[int64]*whatif.Record, len(chunk))
	index := make(map[int64]int, len(chunk))
	byShard := map[*store.Shard][]int64{}
	var shards []*store.Shard
	for _, i := range chunk {
		row := rows[i]
		sh, err := s.st.ShardFor(row.ExecutionID)
		if err != nil {
			return nil, err
		}
		recs[row.ExecutionID] = &whatif.Record{ExecutionID: row.ExecutionID, Path: row.Path, Version: row.Version, Status: row.Status}
		index[row.ExecutionID] = i
		if byShard[sh] == nil {
			shards = append(shards, sh)
		}
		byShard[sh] = append(byShard[sh], row.ExecutionID)
	}
	var (
		size, logSize int
		whole         int // logs read whole
		full          bool
	)
	for _, sh := range shards {
		ids := byShard[sh]
		if full || size > whatIfChunkBytes && whole > 0 {
			full = true
			for _, id := range ids {
				recs[id] = nil
			}
			continue
		}
		// A shard's logs come in execution id order: a log is whole once
		// the next one starts.
		var cur int64
		err := store.StreamLogs(ctx, sh.Pool(), ids, func(e *store.Event, n int) error {
			if e.ExecutionID != cur {
				if cur != 0 {
					whole++
				}
				cur, logSize = e.ExecutionID, 0
				if size > whatIfChunkBytes && whole > 0 {
					return errChunkFull // cur and the logs after it wait
				}
			}
			size += n + whatIfEventBytes
			if logSize += n; logSize > MaxWhatIfLogBytes {
				return Errorf(ErrInvalid, "executions[%d]: execution %d's log holds over %d bytes of values, the most a what-if reads of one execution (controlplane.MaxWhatIfLogBytes, 64 MiB); leave it out of the what-if",
					index[cur], cur, MaxWhatIfLogBytes)
			}
			if rec := recs[e.ExecutionID]; rec != nil && !e.Ignored {
				if rec.Events == nil {
					rec.Events = make([]engine.Event, 0, rows[index[e.ExecutionID]].LastSeq)
				}
				rec.Events = append(rec.Events, toEngine(*e))
			}
			return nil
		})
		switch {
		case errors.Is(err, errChunkFull):
			full = true
			for _, id := range ids {
				if id >= cur {
					recs[id] = nil
				}
			}
		case errors.Is(err, ErrInvalid):
			return nil, err
		case err != nil:
			return nil, fmt.Errorf("what-if: %w", err)
		default:
			if cur != 0 {
				whole++
			}
		}
	}
	var left []int
	for _, i := range chunk {
		rec := recs[rows[i].ExecutionID]
		if rec == nil {
			left = append(left, i)
			continue
		}
		if err := each(i, *rec); err != nil {
			return nil, err
		}
	}
	if whatIfChunkRead != nil {
		whatIfChunkRead(len(chunk) - len(left))
	}
	return left, nil
}

// whatIfVersion is the new version: registered (path, version) or content,
// parsed and validated as register does, never stored.
func (s *Service) whatIfVersion(ctx context.Context, req WhatIfRequest) (whatif.Version, error) {
	if req.Content != "" {
		pb, diags := parser.Parse([]byte(req.Content))
		if pb == nil {
			var problems []string
			for _, d := range diags.Errors() {
				problems = append(problems, d.String())
			}
			return whatif.Version{}, Errorf(ErrInvalid, "content: the new version is not a valid playbook: %s", strings.Join(problems, "; "))
		}
		return whatif.Version{PB: pb}, nil
	}
	entry, err := s.CatalogByPath(ctx, req.Path, req.Version)
	if err != nil {
		field := "path"
		if req.Version > 0 {
			field = "version"
		}
		return whatif.Version{}, fmt.Errorf("%s: %w", field, err)
	}
	pb, err := s.playbook(ctx, nil, nil, entry.CatalogID)
	if err != nil {
		return whatif.Version{}, err
	}
	return whatif.Version{PB: pb, CatalogID: entry.CatalogID, Version: entry.Version}, nil
}

// recordedValues reads what a recorded execution keeps outside its log:
// results stored by reference and large step results.
func (s *Service) recordedValues(ctx context.Context, executionID int64, keys []engine.ResultKey) (map[engine.ResultKey]any, error) {
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return nil, err
	}
	out := map[engine.ResultKey]any{}
	if err := s.loadResults(ctx, sh.Pool(), executionID, keys, out); err != nil {
		return nil, err
	}
	return out, nil
}
