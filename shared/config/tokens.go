package config

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Scope is a set of token scopes (R-A3).
type Scope uint8

const (
	// ScopeAPI is for users: catalog, execute, executions, replay.
	ScopeAPI Scope = 1 << iota
	// ScopeWorker is for workers: claim, heartbeat, events.
	ScopeWorker
	// ScopeInternal is for /api/internal/*. A token of this scope also holds
	// ScopeWorker (Tokens.Scopes).
	ScopeInternal
	// ScopeAdmin is for the operator's database routes (POST /api/db/init,
	// POST /api/postgres/execute; docs/security.md): granted only by an admin
	// token (NOETL_ADMIN_TOKEN), never by running open, never to a worker. A
	// token of this scope also holds ScopeAPI, so NoETL's CLI, which sends one
	// token, reaches every user route with it.
	ScopeAdmin
)

// Has reports whether s includes every scope in want (and want is not empty).
func (s Scope) Has(want Scope) bool { return want != 0 && s&want == want }

// Tokens are the accepted bearer tokens per scope. Several per scope allow
// rotation without downtime.
type Tokens struct {
	API      []string
	Worker   []string
	Internal []string
	Admin    []string
}

// Empty reports whether no token is configured at all.
func (t Tokens) Empty() bool { return len(t.API)+len(t.Worker)+len(t.Internal)+len(t.Admin) == 0 }

// Scopes returns the scopes the presented token grants (0 for an unknown
// token). An internal token also holds the worker scope: NoETL gives its
// workers NOETL_INTERNAL_API_TOKEN (its Rust worker sends it on every call,
// claims and events included) and NoETL's servers gate only /api/internal/*
// with it, so a deployment's internal token is a worker's token too; it
// never holds the user scope. It compares fixed-length digests in constant time against every
// configured token, so timing reveals neither a token's length nor which
// token was close.
func (t Tokens) Scopes(presented string) Scope {
	if presented == "" {
		return 0
	}
	got := sha256.Sum256([]byte(presented))
	var s Scope
	for _, set := range []struct {
		scope  Scope
		tokens []string
	}{{ScopeAPI, t.API}, {ScopeWorker, t.Worker}, {ScopeInternal, t.Internal}, {ScopeAdmin, t.Admin}} {
		for _, tok := range set.tokens {
			want := sha256.Sum256([]byte(tok))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				s |= set.scope
			}
		}
	}
	if s&ScopeInternal != 0 {
		s |= ScopeWorker
	}
	if s&ScopeAdmin != 0 {
		s |= ScopeAPI
	}
	return s
}
