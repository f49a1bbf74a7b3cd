package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/resultstore"
)

// Staged results (NoETL's /api/result): a worker hands the server a result
// too large for its events, the server keeps it in the result store under a
// noetl:// reference of the execution, and the reference is read back where
// any result reference is (readReference) or through GET /api/result/resolve.

// Staged is a result kept by StageResult.
type Staged struct {
	Ref    string
	Store  string // the store's kind: file or s3
	Scope  string
	Bytes  int64
	Sha256 string
}

func (s *Service) results() (resultstore.Store, error) {
	if s.cfg.Results == nil {
		return nil, Errorf(ErrNotConfigured, "this server has no result store: set NOETL_RESULT_STORE (file:///dir, or s3://bucket/prefix in AWS)")
	}
	return s.cfg.Results, nil
}

// StageResult keeps a result of an execution and returns its reference. The
// execution must exist; the data's secret-named keys are masked before it is
// stored, as every worker result is (events.md §7).
func (s *Service) StageResult(ctx context.Context, executionID int64, r noetlwire.StagedResult) (Staged, error) {
	st, err := s.results()
	if err != nil {
		return Staged{}, err
	}
	if _, _, _, err := s.readExecution(ctx, executionID); err != nil {
		return Staged{}, err
	}
	b, err := jsonx.Marshal(redact.Value(r.Data))
	if err != nil {
		return Staged{}, err
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	ref := resultstore.NoETLRef{ExecutionID: executionID, Name: r.Name, ID: hex.EncodeToString(id[:])}
	if _, err := st.Put(ctx, ref.Object(), b); err != nil {
		return Staged{}, err
	}
	sum := sha256.Sum256(b)
	kind, _, _ := strings.Cut(st.URL(), ":")
	s.log.InfoContext(ctx, "result staged", "execution_id", executionID, "name", r.Name, "bytes", len(b), "ref", ref.String())
	return Staged{Ref: ref.String(), Store: kind, Scope: r.Scope, Bytes: int64(len(b)), Sha256: hex.EncodeToString(sum[:])}, nil
}

// ResolveResult reads what a result reference names (a noetl:// reference,
// or a URI inside the store); one that names nothing is ErrNotFound.
func (s *Service) ResolveResult(ctx context.Context, uri string) (any, error) {
	st, err := s.results()
	if err != nil {
		return nil, err
	}
	if resultstore.IsNoETLRef(uri) {
		// A reference in NoETL's namespace that names nothing we keep
		// (another shape, a manifest) is unknown, as NoETL answers it: 404.
		if _, err := resultstore.ParseNoETLRef(uri); err != nil {
			return nil, Errorf(ErrNotFound, "no result is stored at this reference: %v", err)
		}
	} else if !resultstore.Owns(st, uri) {
		return nil, Errorf(ErrInvalid, "ref: %s is neither a noetl://execution/… reference nor inside this server's result store", uri)
	}
	b, err := resultstore.Resolve(ctx, st, uri, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Errorf(ErrNotFound, "no result is stored at %s (results expire with the store's retention)", uri)
	}
	if err != nil {
		return nil, err
	}
	v, err := resultstore.DecodeJSON(uri, b)
	if err != nil {
		return nil, Errorf(ErrInvalid, "%v", err)
	}
	return v, nil
}
