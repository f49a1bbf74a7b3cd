package store

import (
	"fmt"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Conversions between Go zero values and SQL NULL, and JSON columns.

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt64(i int64) *int64 {
	if i == 0 {
		return nil
	}
	return &i
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefTime(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

// objectJSON encodes a JSON object column; nil is NULL. Bind it as a string (or use
// objectJSONText): pgx sends []byte as bytea in the exec and simple-protocol modes.
func objectJSON(m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return jsonx.Marshal(m)
}

// objectJSONText is objectJSON for array parameters (text[] cast to jsonb per row).
func objectJSONText(m map[string]any) (*string, error) {
	b, err := objectJSON(m)
	if err != nil || b == nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// decodeObject decodes a JSON object column; NULL is a nil map.
func decodeObject(b []byte, column string) (map[string]any, error) {
	if b == nil {
		return nil, nil
	}
	m, err := jsonx.DecodeObject(b)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", column, err)
	}
	return m, nil
}
