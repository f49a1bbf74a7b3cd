package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CatalogEntry is one version of a registered resource (cluster database).
type CatalogEntry struct {
	CatalogID   int64
	Path        string
	Version     int
	Kind        string
	Content     string
	ContentHash string // hex sha256 of Content
	CreatedAt   time.Time
}

// ContentHash is the hash RegisterCatalog compares to detect a re-registration.
func ContentHash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

const catalogColumns = `catalog_id, path, version, kind, content, content_hash, created_at`

func scanCatalog(row pgx.Row) (CatalogEntry, error) {
	var e CatalogEntry
	err := row.Scan(&e.CatalogID, &e.Path, &e.Version, &e.Kind, &e.Content, &e.ContentHash, &e.CreatedAt)
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

// maxRegisterAttempts bounds the retries of RegisterCatalog under contention; each
// lost race means another registration of the same path committed.
const maxRegisterAttempts = 20

// RegisterCatalog stores content as the next version of path. Registering the same
// content as the latest version returns that row (created false). Concurrent
// registrations of one path are safe: a version number lost to a racing insert is
// re-read and retried. q must be in READ COMMITTED (the default) so a retry sees the
// winner.
func RegisterCatalog(ctx context.Context, q Querier, path, kind, content string) (CatalogEntry, bool, error) {
	hash := ContentHash(content)
	for attempt := 0; attempt < maxRegisterAttempts; attempt++ {
		next := 1
		latest, err := GetCatalogByPath(ctx, q, path, 0)
		switch {
		case err == nil:
			if latest.ContentHash == hash {
				return latest, false, nil
			}
			next = latest.Version + 1
		case !errors.Is(err, ErrNotFound):
			return CatalogEntry{}, false, fmt.Errorf("store: register %s: %w", path, err)
		}
		// DO NOTHING waits for a racing insert of the same version to commit and then
		// yields no row; the loop then reads that winner.
		e, err := scanCatalog(q.QueryRow(ctx, `
			INSERT INTO catalog (path, version, kind, content, content_hash)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (path, version) DO NOTHING
			RETURNING `+catalogColumns, path, next, kind, content, hash))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return CatalogEntry{}, false, fmt.Errorf("store: register %s version %d: %w", path, next, err)
		}
		return e, true, nil
	}
	return CatalogEntry{}, false, fmt.Errorf("store: register %s: %w: version still contended after %d attempts", path, ErrConflict, maxRegisterAttempts)
}

// GetCatalog returns the entry with catalog_id id.
func GetCatalog(ctx context.Context, q Querier, id int64) (CatalogEntry, error) {
	e, err := scanCatalog(q.QueryRow(ctx, `SELECT `+catalogColumns+` FROM catalog WHERE catalog_id = $1`, id))
	return found(e, err, "catalog %d", id)
}

// GetCatalogByPath returns the given version of path, or its latest when version is 0.
func GetCatalogByPath(ctx context.Context, q Querier, path string, version int) (CatalogEntry, error) {
	var row pgx.Row
	if version == 0 {
		row = q.QueryRow(ctx, `SELECT `+catalogColumns+` FROM catalog WHERE path = $1 ORDER BY version DESC LIMIT 1`, path)
	} else {
		row = q.QueryRow(ctx, `SELECT `+catalogColumns+` FROM catalog WHERE path = $1 AND version = $2`, path, version)
	}
	e, err := scanCatalog(row)
	return found(e, err, "catalog %s version %d", path, version)
}

// CatalogCursor is the position after the last entry of a page.
type CatalogCursor struct {
	Path    string
	Version int
}

// CatalogFilter selects a page of ListCatalog. Entries are ordered by path, then
// version newest first.
type CatalogFilter struct {
	Path       string         // only this path's versions
	LatestOnly bool           // one entry per path: its latest version
	After      *CatalogCursor // keyset: entries after this one
	Limit      int            // 1..1000; 0 means 100
	// MaxContentBytes, when positive, ends the page early at the first entry
	// that takes its content past this many bytes (a page holds at least one
	// entry): a list carrying each entry's parsed playbook stays within what
	// one answer may hold (6 MB through Lambda).
	MaxContentBytes int
}

// ListCatalog returns a page of entries with their content.
func ListCatalog(ctx context.Context, q Querier, f CatalogFilter) ([]CatalogEntry, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list catalog: %w", err)
	}
	var w conds
	if f.Path != "" {
		w.add("path = " + w.arg(f.Path))
	}
	if f.After != nil {
		p := w.arg(f.After.Path)
		if f.LatestOnly {
			w.add("path > " + p)
		} else {
			// path >= p bounds the index scan; the rest skips p's versions already seen.
			w.add(fmt.Sprintf("path >= %s AND (path > %s OR version < %s)", p, p, w.arg(f.After.Version)))
		}
	}
	var sql string
	if f.LatestOnly {
		sql = `SELECT DISTINCT ON (path) ` + catalogColumns + ` FROM catalog` + w.sql() + ` ORDER BY path, version DESC LIMIT ` + w.arg(limit)
	} else {
		sql = `SELECT ` + catalogColumns + ` FROM catalog` + w.sql() + ` ORDER BY path, version DESC LIMIT ` + w.arg(limit)
	}
	if f.MaxContentBytes > 0 {
		// octet_length reads a stored value's size without decompressing it;
		// the content of entries past the budget is never read.
		sql = `SELECT ` + catalogColumns + ` FROM (SELECT page.*, sum(octet_length(content)) OVER (ORDER BY path, version DESC) - octet_length(content) AS before
			FROM (` + sql + `) page) sized WHERE before < ` + w.arg(f.MaxContentBytes) + ` ORDER BY path, version DESC`
	}
	return queryRows(ctx, q, "list catalog", scanCatalog, sql, w.args...)
}

// pageLimit applies the list limit rule of api.md: 1..1000, default 100.
func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return 100, nil
	case n < 0 || n > 1000:
		return 0, fmt.Errorf("limit %d outside 1..1000", n)
	}
	return n, nil
}
