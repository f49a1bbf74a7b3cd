package resultstore

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// NoETL's result references, noetl://execution/<execution_id>/result/<name>/<id>:
// what PUT /api/result/{execution_id} answers (NoETL's Rust worker stages its
// large results there) and GET /api/result/resolve reads back. Each names one
// object of this store under noetl/<execution_id>/, so a reference is scoped
// to its execution and resolves through the same store as the worker's own
// file:// and s3:// references.

// NoETLRef is a parsed noetl:// result reference.
type NoETLRef struct {
	ExecutionID int64
	Name        string // the result's name (a step's name), as given
	ID          string // lower-case hex
}

const noetlRefPrefix = "noetl://execution/"

var refIDRE = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// IsNoETLRef reports whether uri is in the noetl:// form.
func IsNoETLRef(uri string) bool { return strings.HasPrefix(uri, "noetl://") }

// ParseNoETLRef reads noetl://execution/<execution_id>/result/<name>/<id>;
// the name is path-escaped in the URI and may itself hold slashes (read
// from the right).
func ParseNoETLRef(uri string) (NoETLRef, error) {
	bad := func(why string) (NoETLRef, error) {
		return NoETLRef{}, fmt.Errorf("%q is not a result reference noetl://execution/<execution_id>/result/<name>/<id>: %s", cutText(uri, 120), why)
	}
	rest, ok := strings.CutPrefix(uri, noetlRefPrefix)
	if !ok {
		return bad("it does not start with " + noetlRefPrefix)
	}
	eid, rest, ok := strings.Cut(rest, "/result/")
	if !ok {
		return bad("no /result/ after the execution id")
	}
	id, err := strconv.ParseInt(eid, 10, 64)
	if err != nil || id <= 0 {
		return bad("the execution id is not a positive integer")
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return bad("no name and id")
	}
	name, err := url.PathUnescape(rest[:i])
	if err != nil || name == "" {
		return bad("the name is not path-escaped text")
	}
	if !refIDRE.MatchString(rest[i+1:]) {
		return bad("the id is not hex")
	}
	return NoETLRef{ExecutionID: id, Name: name, ID: rest[i+1:]}, nil
}

// String is the reference's URI.
func (r NoETLRef) String() string {
	return noetlRefPrefix + strconv.FormatInt(r.ExecutionID, 10) + "/result/" + url.PathEscape(r.Name) + "/" + r.ID
}

// Object is the name of the reference's object in the store.
func (r NoETLRef) Object() string {
	safe := strings.Map(func(c rune) rune {
		if c < 128 && (c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return c
		}
		return '_'
	}, r.Name)
	if len(safe) > 100 {
		safe = safe[:100]
	}
	return "noetl/" + strconv.FormatInt(r.ExecutionID, 10) + "/" + strings.Trim(safe, ".") + "-" + r.ID + ".json"
}

// ObjectURI is the URI of the object named name in st.
func ObjectURI(st Store, name string) string { return strings.TrimRight(st.URL(), "/") + "/" + name }

// Resolve reads what a result reference names: a noetl:// reference or a URI
// inside st, of executionID (CheckExecution) unless that is 0; a Resolver
// reads either itself.
func Resolve(ctx context.Context, st Store, uri string, executionID int64) ([]byte, error) {
	if !IsNoETLRef(uri) && hasDotSegment(uri) {
		return nil, fmt.Errorf("%s: a result reference may not hold . or .. segments", cutText(uri, 200))
	}
	if executionID != 0 {
		if err := CheckExecution(st, uri, executionID); err != nil {
			return nil, err
		}
	}
	if r, ok := st.(Resolver); ok {
		return fetched(r.ResolveRef(ctx, uri)) // it checks the URI is inside its store
	}
	if IsNoETLRef(uri) {
		ref, err := ParseNoETLRef(uri)
		if err != nil {
			return nil, err
		}
		return fetched(st.Get(ctx, ObjectURI(st, ref.Object())))
	}
	if !Owns(st, uri) {
		return nil, fmt.Errorf("%s is not inside the result store %s", cutText(uri, 200), st.URL())
	}
	return fetched(st.Get(ctx, uri))
}

// hasDotSegment reports whether a URI's path (percent-decoded) has a . or ..
// segment: such a path names another object than it spells.
func hasDotSegment(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false // not a store's URI either: Owns refuses it
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
