package controlplane

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/resultstore"
)

// A command over engine.CommandInlineBytes has its largest values put in the
// result store as parts (engine/commandsize.go), each a noetl:// reference of
// its execution, which the worker that runs the command loads: what a command
// carries, and so every answer and event holding it, stays small. Only a
// service with a result store does this (in AWS, the ingest function); any
// other fails a command over engine.MaxCommandBytes.

// partRef names a part: NoETL's result reference, content-addressed, so a
// transaction run again puts the same object.
func partRef(executionID int64, name, id string) string {
	return resultstore.NoETLRef{ExecutionID: executionID, Name: name, ID: id}.String()
}

// storeParts puts an outcome's parts in the result store, before the commit
// that issues their commands (an object left by a transaction that did not
// commit is never read, and the store's retention removes it).
func (s *Service) storeParts(ctx context.Context, parts []engine.CommandPart) error {
	for _, p := range parts {
		ref, err := resultstore.ParseNoETLRef(p.URI)
		if err == nil {
			_, err = s.cfg.Results.Put(ctx, ref.Object(), p.Data)
		}
		if err != nil {
			return fmt.Errorf("store a part of a large command (%d bytes) at %s: %w", len(p.Data), p.URI, err)
		}
	}
	return nil
}
