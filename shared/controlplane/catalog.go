package controlplane

import (
	"context"
	"errors"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/store"
)

// KindPlaybook is the only kind the catalog registers.
const KindPlaybook = "Playbook"

// KindCredential is the kind NoETL's catalog list names credentials by: the
// list shows the keychain's credentials (their metadata, never their data).
const KindCredential = "Credential"

// Registered is the outcome of a registration.
type Registered struct {
	Entry    store.CatalogEntry
	Warnings playbook.Diagnostics
	// Created is false when the content equals the latest version (idempotent).
	Created bool
}

// Register validates a playbook and stores it as the next version of its path.
// Invalid playbooks are rejected with every problem listed (NoETL accepts them and
// fails later).
func (s *Service) Register(ctx context.Context, content string) (*Registered, error) {
	pb, diags := parser.Parse([]byte(content))
	if pb == nil {
		var problems []string
		for _, d := range diags.Errors() {
			problems = append(problems, d.String())
		}
		return nil, &InvalidPlaybookError{Problems: problems}
	}
	entry, created, err := store.RegisterCatalog(ctx, s.st.Cluster(), pb.Metadata.Path, KindPlaybook, content)
	if err != nil {
		return nil, err
	}
	s.books.put(entry.CatalogID, pb)
	return &Registered{Entry: entry, Warnings: diags.Warnings(), Created: created}, nil
}

// Catalog returns one entry.
func (s *Service) Catalog(ctx context.Context, id int64) (store.CatalogEntry, error) {
	e, err := store.GetCatalog(ctx, s.st.Cluster(), id)
	if errors.Is(err, store.ErrNotFound) {
		return e, Errorf(ErrNotFound, "catalog entry %d not found", id)
	}
	return e, err
}

// CatalogByPath returns a path's given version, or its latest when version is 0.
func (s *Service) CatalogByPath(ctx context.Context, path string, version int) (store.CatalogEntry, error) {
	e, err := store.GetCatalogByPath(ctx, s.st.Cluster(), path, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return e, Errorf(ErrNotFound, "playbook %s version %d not found", path, version)
		}
		return e, Errorf(ErrNotFound, "playbook %s not found; register it first", path)
	}
	return e, err
}

// ListCatalog returns a page of entries (without content).
func (s *Service) ListCatalog(ctx context.Context, f store.CatalogFilter) ([]store.CatalogEntry, error) {
	return store.ListCatalog(ctx, s.st.Cluster(), f)
}

// ListCredentialEntries lists the keychain's credentials by name for the
// catalog list of kind Credential, up to limit: the rows hold the data only
// sealed, and callers take their metadata alone.
func (s *Service) ListCredentialEntries(ctx context.Context, query string, limit int) ([]store.Credential, error) {
	return store.ListCredentials(ctx, s.st.Cluster(), store.CredentialFilter{Query: query, Limit: limit})
}
