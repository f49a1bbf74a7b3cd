package worker

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/wire"
)

// serverResults is the server's result store reached through its API, the
// store of a worker given none of its own (`noetl worker` without
// --result-store): a result over the inline limit is staged with PUT
// /api/result/{execution_id} (NoETL's route, wire.MaxStagedResultBytes of
// body at most) and posted by the noetl:// reference the server answers;
// the noetl:// references a command names (the worker's own, the server's
// command parts) are read with GET /api/result/resolve. Requests
// wait out an unavailable server as reports do (one outage, one backoff:
// the worker's view of the server); what the server refuses, the step
// fails with.
type serverResults struct {
	c *client.Client
	// server is the worker's view of the server's availability; nil until
	// New binds it (the tools get the store before the worker exists).
	server *outage
}

// ServerResults returns the store of a worker without one of its own: the
// server's, through its API (see serverResults).
func ServerResults(c *client.Client) resultstore.Store { return &serverResults{c: c} }

func (s *serverResults) URL() string { return s.c.BaseURL() + "/api/result" }

// Name holds for noetl:// references only (their object in the server's
// store): which other URIs lie inside that store only the server knows (it
// checks them at resolve).
func (s *serverResults) Name(uri string) (string, bool) {
	ref, err := resultstore.ParseNoETLRef(uri)
	if err != nil {
		return "", false
	}
	return ref.Object(), true
}

func (s *serverResults) Get(ctx context.Context, uri string) ([]byte, error) {
	return s.ResolveRef(ctx, uri)
}

// ResolveRef reads what a noetl:// reference names through the server
// (resultstore.Resolver; resultstore.Resolve has checked it is of the
// step's execution). A URI into a store (file://, s3://, another worker's)
// is refused: whose execution it is only that store's root tells, and a
// step must not read another execution's results (docs/security.md).
func (s *serverResults) ResolveRef(ctx context.Context, uri string) ([]byte, error) {
	if !resultstore.IsNoETLRef(uri) {
		return nil, fmt.Errorf("%s is in a result store this worker was not given; give it that store (noetl worker --result-store, or NOETL_RESULT_STORE)", uri)
	}
	var b []byte
	err := s.call(ctx, "read a result through the server", func() (err error) {
		b, err = s.c.ResolveResult(ctx, uri)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s through the server (GET /api/result/resolve): %w", uri, err)
	}
	return b, nil
}

// Put stages data (JSON) with the server under the execution its name
// begins with, and returns the reference. A result whose request would be
// over the route's limit is not sent: the error names its size, the limit
// and the setting that lifts it.
func (s *serverResults) Put(ctx context.Context, name string, data []byte) (string, error) {
	eid, rest, _ := strings.Cut(name, "/")
	id, err := strconv.ParseInt(eid, 10, 64)
	if err != nil || id <= 0 || rest == "" {
		return "", fmt.Errorf("resultstore: object name %q must begin with its execution's id (<execution_id>/…)", name)
	}
	r := wire.StageRequest{Name: rest, Data: data}
	if body := stagedBodyBytes(r); body > wire.MaxStagedResultBytes {
		return "", tooLargeToStage(body)
	}
	var st *wire.StagedResult
	err = s.call(ctx, "stage a result with the server", func() (err error) {
		st, err = s.c.StageResult(ctx, id, r)
		return err
	})
	if client.StatusOf(err) == http.StatusRequestEntityTooLarge {
		return "", tooLargeToStage(stagedBodyBytes(r))
	}
	if err != nil {
		return "", fmt.Errorf("this worker has no result store, and handing the result to the server (PUT /api/result) failed: %w; %s", err, giveStore)
	}
	return st.Ref, nil
}

// stagedBodyBytes is the size of the request that stages r.
func stagedBodyBytes(r wire.StageRequest) int {
	return len(`{"data":,"name":}`) + len(r.Data) + len(jsonx.AppendString(nil, r.Name))
}

// giveStore is the fix for a result the server cannot take.
const giveStore = "give the worker the server's result store (noetl worker --result-store, or NOETL_RESULT_STORE: the URL noetl serve prints, or s3://bucket/prefix)"

func tooLargeToStage(body int) error {
	return fmt.Errorf("this worker has no result store, and the server takes at most %d bytes (%d MiB, wire.MaxStagedResultBytes) of request through its API (PUT /api/result), this one would be %d; %s",
		wire.MaxStagedResultBytes, wire.MaxStagedResultBytes>>20, body, giveStore)
}

// call sends one request, again after each failure that says the server is
// unavailable (no answer, 502, 503, 504), within the worker's one backoff
// for the outage; any other answer ends it.
func (s *serverResults) call(ctx context.Context, what string, send func() error) error {
	if s.server == nil {
		return send()
	}
	for {
		tk, ok := s.server.await(ctx)
		if !ok {
			return ctx.Err()
		}
		err := send()
		switch {
		case ctx.Err() != nil:
			s.server.abandoned(tk)
			return err
		case !client.Unavailable(err):
			s.server.succeeded(tk)
			return err
		}
		s.server.failed(tk, fmt.Errorf("%s: %w", what, err), client.RetryAfterOf(err))
	}
}
