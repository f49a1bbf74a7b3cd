package api

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// Cursors are opaque to clients: base64url (no padding) of a tagged text, so
// a cursor of one list cannot be replayed against another and a server may
// change the inside without breaking the contract "pass next_cursor back".
//
//	executions: "e1:<started_at unix nanos>:<execution_id>"
//	catalog:    "c1:<version>:<path>"

const (
	executionCursorTag = "e1"
	catalogCursorTag   = "c1"
)

var cursorEncoding = base64.RawURLEncoding

func encodeExecutionCursor(c store.ExecutionCursor) string {
	return cursorEncoding.EncodeToString([]byte(executionCursorTag + ":" +
		strconv.FormatInt(c.StartedAt.UnixNano(), 10) + ":" + strconv.FormatInt(c.ExecutionID, 10)))
}

func decodeExecutionCursor(s string) (*store.ExecutionCursor, error) {
	parts, err := cursorParts(s, executionCursorTag, 3)
	if err != nil {
		return nil, err
	}
	nanos, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || id <= 0 {
		return nil, badCursor()
	}
	return &store.ExecutionCursor{StartedAt: time.Unix(0, nanos).UTC(), ExecutionID: id}, nil
}

func encodeCatalogCursor(c store.CatalogCursor) string {
	return cursorEncoding.EncodeToString([]byte(catalogCursorTag + ":" + strconv.Itoa(c.Version) + ":" + c.Path))
}

func decodeCatalogCursor(s string) (*store.CatalogCursor, error) {
	parts, err := cursorParts(s, catalogCursorTag, 3)
	if err != nil {
		return nil, err
	}
	v, err := strconv.Atoi(parts[1])
	if err != nil || v < 0 || parts[2] == "" {
		return nil, badCursor()
	}
	return &store.CatalogCursor{Version: v, Path: parts[2]}, nil
}

func cursorParts(s, tag string, n int) ([]string, error) {
	raw, err := cursorEncoding.DecodeString(s)
	if err != nil {
		return nil, badCursor()
	}
	parts := strings.SplitN(string(raw), ":", n)
	if len(parts) != n || parts[0] != tag {
		return nil, badCursor()
	}
	return parts, nil
}

func badCursor() *Error {
	return invalid("cursor", "not a cursor of this list; pass back the next_cursor of the previous page, or omit it for the first page")
}
