// Package resultstore keeps tool results too large to post inline (worker.md
// §1): the worker puts the bytes and posts the event with result_kind "ref" and
// the object's URI; the server reads them back when the engine needs the step's
// result. Two stores exist: a local directory (file:///dir, for one machine)
// and S3 (s3://bucket/prefix, in AWS). A worker with neither reaches its
// server's store through the API (shared/worker's serverResults, a Resolver).
//
// The server reads only URIs inside its own configured store (Owns): a worker
// must not be able to make it read an arbitrary file or bucket.
package resultstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// DefaultMaxBytes bounds one Get: the value is decoded in memory inside an
// ingest transaction.
const DefaultMaxBytes = 64 << 20

// ErrTooLarge is returned by Get for an object over the store's limit.
var ErrTooLarge = errors.New("resultstore: the stored result is larger than the limit")

// Store is where large results live.
type Store interface {
	// Put stores data under name (a relative slash-separated path that
	// begins with the execution's id, <execution_id>/…: a result belongs to
	// one execution) and returns the object's URI.
	Put(ctx context.Context, name string, data []byte) (string, error)
	// Get reads the object a URI of this store names.
	Get(ctx context.Context, uri string) ([]byte, error)
	// Owns reports whether uri names an object inside this store.
	Owns(uri string) bool
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

// locate is how every store's Get begins: the name a URI has inside st (a
// path under the directory, an object key), found by the store's own rule,
// or the refusal of a URI outside it.
func locate(st Store, uri string, rule func(uri string) (string, bool)) (string, error) {
	name, ok := rule(uri)
	if !ok {
		return "", fmt.Errorf("resultstore: %s is not inside the result store %s", uri, st.URL())
	}
	return name, nil
}
