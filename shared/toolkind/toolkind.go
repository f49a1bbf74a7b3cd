// Package toolkind is the one table of the tool kinds this project runs and the config
// keys each reads (worker.md §3). The engine validates a tool block against it when a
// playbook is registered (an unlisted key warns that it is ignored; a key written
// under tool.spec is hoisted to the tool), and every tool in shared/tools reads its
// config through it, so a key the tool reads is a key the engine accepts.
//
// Adding a tool key: add it (with its aliases) to the kind's list in kindTable, and
// read it in the tool with Kind.Names. Nothing else changes. An alias the engine
// should store under the key's own name goes in Key.Renamed too (see Renaming).
//
// The package is pure and at the bottom of the import graph: the engine may not import
// the tools (they do I/O), and the tools may not import the engine.
package toolkind

import (
	"fmt"
	"slices"
	"sync"
)

// The tool kinds this project runs.
const (
	Python   = "python"
	HTTP     = "http"
	Postgres = "postgres"
	Shell    = "shell"
	Noop     = "noop"
	Playbook = "playbook"
	DuckDB   = "duckdb"
	NATS     = "nats"
	Artifact = "artifact"
	Transfer = "transfer"
)

// TaskSequence is the kind a command of a pipeline carries (a list of tools,
// or a tool with spec.policy): NoETL's name, so its workers recognise it. It is
// no tool of its own, and not in the table.
const TaskSequence = "task_sequence"

// Key is one config key: its name and the aliases that may stand for it. When more
// than one is given, the first given in Names order wins.
type Key struct {
	Name    string
	Aliases []string
	// Renamed are the aliases (a subset of Aliases) the engine renames to Name when it
	// registers a playbook, so the stored tool carries one spelling of NoETL's
	// (R-N2, R-W7). The other aliases reach the tool as written, which reads them
	// through Names; renaming them too would change what stored commands hold.
	Renamed []string
	// Twice is the register-time error for a tool that gives Name and one of Renamed
	// both. Empty: both are taken and the one written later wins (what NoETL does).
	Twice string
	// InSpec: the key may also be written under tool.spec (NoETL's v10 form), where
	// the engine moves it up to the tool. Every kind's own key may; of the common
	// keys only the knobs (auth, retry, timeout) may.
	InSpec bool
}

// Names is the key's name followed by its aliases.
func (k Key) Names() []string { return append([]string{k.Name}, k.Aliases...) }

// Kind is a tool kind and the keys its tool reads besides the common ones.
type Kind struct {
	Name string
	Keys []Key
}

// input is read by the pipeline for every kind (the item's input, alias args).
func input() Key {
	return Key{Name: "input", Aliases: []string{"args"}, InSpec: true}.
		renames("give tool input once: both input and args are set (args is an alias of input)", "args")
}

// own builds a kind's key list: each key may be written under spec.
func own(keys ...Key) []Key {
	for i := range keys {
		keys[i].InSpec = true
	}
	return append(keys, input())
}

func k(name string, aliases ...string) Key { return Key{Name: name, Aliases: aliases} }

// renames marks aliases of k the engine renames to k.Name, refusing both with twice.
func (k Key) renames(twice string, aliases ...string) Key {
	k.Renamed, k.Twice = aliases, twice
	return k
}

// kindTable is the table. Read it through table: built once, and only ever
// handed out as copies (Lookup) or fresh slices (KeyNames), so no caller can
// change it. (Building it on each lookup cost a tool two tables a step.)
func kindTable() []Kind {
	return []Kind{
		{Python, own(k("code"), k("code_b64", "code_base64"), k("script"), k("libs"), k("env"))},
		{HTTP, own(k("url", "endpoint").renames("give the http url once: endpoint is NoETL's alias of url", "endpoint"), k("method"), k("headers"), k("params"), k("json"), k("form"), k("body"),
			k("follow_redirects"), k("response_type"), k("allow_status"), k("verify_ssl", "verify"))},
		{Postgres, own(k("query", "command", "sql"), k("script"), k("params"), k("connection", "connection_string", "dsn").renames("", "connection_string"),
			k("host"), k("port"), k("user", "username"), k("password"), k("database", "dbname", "db"))},
		{Shell, own(k("command"), k("shell"), k("cwd"), k("env"))},
		{Noop, own(k("message"), k("result"))},
		{Playbook, own(k("path", "playbook_path"), k("catalog_id"), k("version"), k("payload"), k("wait"),
			k("return_step"), k("execution_pool", "pool"))},
		{DuckDB, own(k("query", "command", "sql", "queries", "commands", "cmd", "cmds"), k("query_b64", "command_b64", "commands_b64"),
			k("script"), k("params"), k("database", "db_path", "database_path"))},
		{NATS, own(k("operation"), k("url", "server", "servers"), k("user"), k("password"), k("token"), k("bucket"), k("key"),
			k("value"), k("ttl"), k("pattern"), k("subject"), k("data"), k("headers"), k("stream"))},
		{Artifact, own(k("action"), k("result_ref"), k("uri"))},
		{Transfer, own(k("source"), k("target"), k("chunk_size", "batch_size"), k("mode"))},
	}
}

// Common are the keys every kind accepts: the tool's identity, the engine's retry
// and spec, the pipeline's set, and the knobs the tools read for any kind.
func Common() []Key {
	return []Key{
		k("kind"), k("name"), k("desc"), k("spec"), k("set"),
		Key{Name: "auth", Aliases: []string{"credential"}, InSpec: true}.
			renames("give either auth or credential (an alias, R-W7), not both", "credential"),
		{Name: "retry", InSpec: true},
		{Name: "timeout", Aliases: []string{"timeout_seconds"}, InSpec: true},
	}
}

// CommonNames is Key.Names of the common key name: what a tool reads for it.
func CommonNames(name string) []string {
	for _, key := range Common() {
		if key.Name == name {
			return key.Names()
		}
	}
	panic(fmt.Sprintf("toolkind: %q is not a common tool key", name))
}

// SupportedNames are the names of the kinds this project runs, in table order.
func SupportedNames() []string {
	var out []string
	for _, kd := range table() {
		out = append(out, kd.Name)
	}
	return out
}

// Renaming is the key a kind's tool stores name under when name is one of its
// Renamed aliases. A kind this project does not run (R-N1) renames the common
// keys' and input's aliases only: its own keys are not in the table.
func Renaming(kind, name string) (Key, bool) {
	keys := append(Common(), input())
	if kd, ok := Lookup(kind); ok {
		keys = append(Common(), kd.Keys...)
	}
	for _, key := range keys {
		if slices.Contains(key.Renamed, name) {
			return key, true
		}
	}
	return Key{}, false
}

// table is kindTable, built on first use.
var table = sync.OnceValue(kindTable)

// find returns the table's own kind called name: shared, so the caller
// must not change it.
func find(name string) (Kind, bool) {
	for _, kd := range table() {
		if kd.Name == name {
			return kd, true
		}
	}
	return Kind{}, false
}

// Lookup returns a supported kind: a copy the caller may change.
func Lookup(name string) (Kind, bool) {
	kd, ok := find(name)
	if !ok {
		return Kind{}, false
	}
	keys := make([]Key, len(kd.Keys))
	for i, key := range kd.Keys {
		key.Aliases, key.Renamed = slices.Clone(key.Aliases), slices.Clone(key.Renamed)
		keys[i] = key
	}
	return Kind{Name: kd.Name, Keys: keys}, true
}

// Accepted is every name and alias the kind accepts, common keys included.
func (kd Kind) Accepted() []string {
	var out []string
	for _, key := range append(Common(), kd.Keys...) {
		out = append(out, key.Names()...)
	}
	return out
}

// InSpec is every name and alias that may be written under the kind's tool.spec.
func (kd Kind) InSpec() []string {
	var out []string
	for _, key := range append(Common(), kd.Keys...) {
		if key.InSpec {
			out = append(out, key.Names()...)
		}
	}
	return out
}

// Names is what a tool reads for its key name: the name and its aliases. A tool asking
// for a key its kind does not list is a programming error (the engine would warn that
// the key is ignored), so it panics; the tools turn a panic into an error envelope and
// their tests read every key.
func (kd Kind) Names(name string) []string {
	for _, key := range kd.Keys {
		if key.Name == name {
			return key.Names()
		}
	}
	panic(fmt.Sprintf("toolkind: %s tool reads %q, which the table does not list", kd.Name, name))
}

// NoETLOnly reports a kind NoETL defines but this project does not run (R-N1): the
// engine registers it with a warning and the step fails when dispatched.
func NoETLOnly(name string) bool {
	return slices.Contains([]string{
		"snowflake", "ducklake", "container", "subscription",
		"script", "gcs", "secrets", "rhai", "wasm", "agent", "mcp", "mysql", "sqlite", "s3", "iterator",
		"sink", "save", "ai",
	}, name)
}

// KeyNames is Kind.Names of a kind the caller knows is in the table: what a
// tool reads for its key name, on every run, so it copies nothing but the
// names.
func KeyNames(kind, name string) []string {
	kd, ok := find(kind)
	if !ok {
		panic(fmt.Sprintf("toolkind: %q is not a supported tool kind", kind))
	}
	return kd.Names(name)
}
