package toolkind

import (
	"slices"
	"testing"
)

// Within a kind (common keys included) a name or alias means one key only: the
// engine's unknown-key check and the tools' alias order both depend on it.
func TestTableNamesAreUnique(t *testing.T) {
	for _, kd := range kindTable() {
		seen := map[string]string{}
		for _, key := range append(Common(), kd.Keys...) {
			for _, n := range key.Names() {
				if other, dup := seen[n]; dup {
					t.Errorf("%s: %q names both %s and %s", kd.Name, n, other, key.Name)
				}
				seen[n] = key.Name
			}
		}
		if !slices.Contains(kd.Accepted(), "input") || !slices.Contains(kd.Accepted(), "args") {
			t.Errorf("%s: the pipeline's input (alias args) is not accepted", kd.Name)
		}
	}
}

func TestLookupAndNames(t *testing.T) {
	if got := SupportedNames(); !slices.Equal(got, []string{Python, HTTP, Postgres, Shell, Noop, Playbook, DuckDB, NATS, Artifact, Transfer}) {
		t.Errorf("SupportedNames = %v", got)
	}
	if _, ok := Lookup("snowflake"); ok || !NoETLOnly("snowflake") {
		t.Error("snowflake: want not supported and NoETL-only")
	}
	if NoETLOnly(HTTP) {
		t.Error("http is not NoETL-only")
	}
	if got := KeyNames(Postgres, "database"); !slices.Equal(got, []string{"database", "dbname", "db"}) {
		t.Errorf("postgres database names = %v", got)
	}
	if got := CommonNames("timeout"); !slices.Equal(got, []string{"timeout", "timeout_seconds"}) {
		t.Errorf("timeout names = %v", got)
	}
	// Only the knobs of the common keys may be written under spec.
	shell, _ := Lookup(Shell)
	in := shell.InSpec()
	for _, n := range []string{"command", "auth", "credential", "retry", "timeout", "timeout_seconds", "input"} {
		if !slices.Contains(in, n) {
			t.Errorf("shell InSpec lacks %q", n)
		}
	}
	for _, n := range []string{"kind", "name", "spec", "set", "desc"} {
		if slices.Contains(in, n) {
			t.Errorf("shell InSpec has %q", n)
		}
	}
	for _, f := range []func(){
		func() { KeyNames(HTTP, "data") },
		func() { KeyNames("snowflake", "url") },
		func() { CommonNames("url") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("want a panic for a key or kind outside the table")
				}
			}()
			f()
		}()
	}
}

// The table is built once and shared, so what Lookup and KeyNames hand out
// must be copies: a caller's change reaches neither the table nor the next
// caller.
func TestLookupHandsOutCopies(t *testing.T) {
	kd, _ := Lookup(Postgres)
	for i := range kd.Keys {
		if kd.Keys[i].Name == "database" {
			kd.Keys[i].Name = "changed"
			kd.Keys[i].Aliases[0] = "changed"
		}
	}
	kd.Keys[0] = Key{Name: "changed"}
	names := KeyNames(Postgres, "database")
	names[1] = "changed"
	if got := KeyNames(Postgres, "database"); !slices.Equal(got, []string{"database", "dbname", "db"}) {
		t.Errorf("after changing copies, postgres database names = %v", got)
	}
	if again, _ := Lookup(Postgres); again.Keys[0].Name != "query" {
		t.Errorf("after changing a copy, postgres's first key = %q, want query", again.Keys[0].Name)
	}
}

// A renamed alias is one of its key's aliases, and names one key per kind, so the
// engine's renaming and the tools' reading agree on what it stands for.
func TestRenamedAreAliases(t *testing.T) {
	for _, kd := range kindTable() {
		for _, key := range append(Common(), kd.Keys...) {
			for _, a := range key.Renamed {
				if !slices.Contains(key.Aliases, a) {
					t.Errorf("%s: %s renames %q, which is not one of its aliases", kd.Name, key.Name, a)
				}
				if got, ok := Renaming(kd.Name, a); !ok || got.Name != key.Name {
					t.Errorf("Renaming(%s, %s) = %s, %v; want %s", kd.Name, a, got.Name, ok, key.Name)
				}
			}
		}
	}
	for _, c := range []struct{ kind, name, want string }{
		{HTTP, "endpoint", "url"}, {Postgres, "connection_string", "connection"}, {Postgres, "credential", "auth"},
		{Python, "args", "input"}, {"duckdb", "credential", "auth"}, {"duckdb", "args", "input"},
	} {
		if got, ok := Renaming(c.kind, c.name); !ok || got.Name != c.want {
			t.Errorf("Renaming(%s, %s) = %q, %v; want %s", c.kind, c.name, got.Name, ok, c.want)
		}
	}
	for _, c := range []struct{ kind, name string }{{Postgres, "dsn"}, {Python, "endpoint"}, {HTTP, "url"}, {"duckdb", "connection_string"}} {
		if got, ok := Renaming(c.kind, c.name); ok {
			t.Errorf("Renaming(%s, %s) = %s; want no renaming", c.kind, c.name, got.Name)
		}
	}
}
