// Package resultstore keeps tool results too large to post inline (worker.md
// §1): the worker puts the bytes and posts the event with result_kind "ref" and
// the object's URI; the server reads them back when the engine needs the step's
// result. Two stores exist: a local directory (file:///dir, for one machine)
// and S3 (s3://bucket/prefix, in AWS). A worker with neither reaches its
// server's store through the API (shared/worker's serverResults, a Resolver).
//
// The server reads only URIs inside its own configured store (Owns): a worker
// must not be able to make it read an arbitrary file or bucket. An object
// belongs to one execution (its name begins with the execution's id), and a
// reference read for an execution reads only that execution's objects
// (Resolve): a step must not be able to name another execution's result.
package resultstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// DefaultMaxBytes bounds one Get: the value is decoded in memory inside an
// ingest transaction.
const DefaultMaxBytes = 64 << 20

// ErrTooLarge is returned by Get for an object over the store's limit.
var ErrTooLarge = errors.New("resultstore: the stored result is larger than the limit")

// ErrOtherExecution is wrapped by CheckExecution's refusals: the reference
// names a result that is not the reading execution's. It never passes on a
// retry: a result_uri recorded before the check existed, or a worker whose
// store URL differs from its server's (server s3://bucket, worker
// s3://bucket/results: the server reads the name results/<id>/…, not
// <id>/…), is refused every time.
var ErrOtherExecution = errors.New("the reference names a result of another execution")

// Store is where large results live.
type Store interface {
	// Put stores data under name (a relative slash-separated path that
	// begins with the execution's id, <execution_id>/…: a result belongs to
	// one execution) and returns the object's URI.
	Put(ctx context.Context, name string, data []byte) (string, error)
	// Get reads the object a URI of this store names.
	Get(ctx context.Context, uri string) ([]byte, error)
	// Name is the name (as Put was given it) of the object uri names, ok
	// false when uri names nothing inside this store.
	Name(uri string) (name string, ok bool)
	// URL is the store's own URL.
	URL() string
}

// Resolver is a store that reads every reference itself, noetl:// ones
// included, rather than through Get of an object URI: the server's store
// reached through its API, which checks what it owns.
type Resolver interface {
	ResolveRef(ctx context.Context, uri string) ([]byte, error)
}

// Options configure Open.
type Options struct {
	// MaxBytes bounds one Get; default DefaultMaxBytes.
	MaxBytes int64
	// AWS configures the S3 client of s3:// stores; nil loads the SDK's
	// default chain (AWS_REGION, AWS_ENDPOINT_URL, credentials).
	AWS *aws.Config
}

// Open returns the store a URL names: file:///abs/dir or s3://bucket/prefix.
func Open(ctx context.Context, raw string, opt Options) (Store, error) {
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("result store %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		return openDir(u, opt)
	case "s3":
		return openS3(ctx, u, opt)
	}
	return nil, fmt.Errorf("result store %q: expected file:///absolute/dir or s3://bucket/prefix", raw)
}

// cleanName checks a relative object name: no empty, absolute or ".." parts.
func cleanName(name string) (string, error) {
	c := path.Clean(name)
	if name == "" || path.IsAbs(name) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("resultstore: object name %q must be a relative path inside the store", name)
	}
	return c, nil
}

// Owns reports whether uri names an object inside st.
func Owns(st Store, uri string) bool {
	_, ok := st.Name(uri)
	return ok
}

// locate is how every store's Get begins: the name a URI has inside st, or
// the refusal of a URI outside it.
func locate(st Store, uri string) (string, error) {
	name, ok := st.Name(uri)
	if !ok {
		return "", fmt.Errorf("resultstore: %s is not inside the result store %s", uri, st.URL())
	}
	return name, nil
}

// executionOf is the execution an object belongs to, read from its name: a
// worker's result is <execution_id>/… (Worker.offload), a result staged
// through the API or a part of a large command noetl/<execution_id>/…
// (NoETLRef.Object).
func executionOf(name string) (int64, bool) {
	first, rest, _ := strings.Cut(strings.TrimPrefix(name, "noetl/"), "/")
	id, err := strconv.ParseInt(first, 10, 64)
	return id, err == nil && id > 0 && rest != "" && strconv.FormatInt(id, 10) == first
}

// CheckExecution refuses a reference read for executionID that names
// another execution's result: a noetl:// reference of another execution, or
// an object of st whose name is not under the execution's id. A URI outside
// st passes: reading it fails on its own. Refusals wrap ErrOtherExecution.
func CheckExecution(st Store, uri string, executionID int64) error {
	if IsNoETLRef(uri) {
		ref, err := ParseNoETLRef(uri)
		if err != nil {
			return err
		}
		if ref.ExecutionID != executionID {
			return &otherExecution{fmt.Sprintf("%s is a result of execution %d, not of execution %d", cutText(uri, 200), ref.ExecutionID, executionID)}
		}
		return nil
	}
	name, ok := st.Name(uri)
	if !ok {
		return nil
	}
	if id, ok := executionOf(name); !ok || id != executionID {
		return &otherExecution{fmt.Sprintf("%s is not a result of execution %d: its results are under %d/ in the result store %s, "+
			"where a worker's results land only when the server and its workers use the same result store URL (NOETL_RESULT_STORE, noetl worker --result-store)",
			cutText(uri, 200), executionID, executionID, st.URL())}
	}
	return nil
}

// otherExecution is a refusal of CheckExecution: its own text (which says
// the fix), an ErrOtherExecution.
type otherExecution struct{ msg string }

func (e *otherExecution) Error() string        { return e.msg }
func (e *otherExecution) Is(target error) bool { return target == ErrOtherExecution }
