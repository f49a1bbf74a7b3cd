package credscope

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		glob, s string
		want    bool
	}{
		{"finance/*", "finance/daily", true},
		{"finance/*", "finance/eu/daily", false},
		{"finance/**", "finance/eu/daily", true},
		{"**/daily", "finance/eu/daily", true},
		{"finance/d?ily", "finance/daily", true},
		{"finance/d?ily", "finance/d/ily", false},
		{"exact/path", "exact/path", true},
		{"exact/path", "exact/path2", false},
		{"*", "a/b", false},
		{"**", "a/b", true},
	} {
		if got := Match(c.glob, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.glob, c.s, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	s, err := Read(map[string]any{"playbooks": []any{"finance/**"}, "pools": []any{"secure"}, "hosts": []any{"api.github.com", "*.example.com", "db.internal:5432", "[fd00::1]:5432"}})
	if err != nil || len(s.Hosts) != 4 {
		t.Fatalf("Read: %+v %v", s, err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"hosts": []any{"https://api.github.com"}}, "scope.hosts[0]"},
		{map[string]any{"hosts": []any{"api.*.com"}}, "scope.hosts[0]"},
		{map[string]any{"hosts": []any{"a.b", "db:99999"}}, "scope.hosts[1]"},
		{map[string]any{"playbooks": []any{"/abs"}}, "scope.playbooks[0]"},
		{map[string]any{"pools": "secure"}, "scope.pools"},
		{map[string]any{"users": []any{}}, "scope.users"},
		{"x", "scope"},
	} {
		if _, err := Read(c.v); err == nil || !strings.HasPrefix(err.Error(), c.want+":") {
			t.Errorf("Read(%v): %v, want an error naming %s", c.v, err, c.want)
		}
	}
}

func TestRules(t *testing.T) {
	s := Scope{Playbooks: []string{"finance/**"}, Pools: []string{"secure"}, Hosts: []string{"api.github.com", "*.example.com", "db.internal:5432"}}
	if s.Playbook("finance/eu/daily") != nil || s.Pool("secure") != nil {
		t.Fatal("allowed uses refused")
	}
	if err := s.Playbook("tests/exfil"); err == nil || !strings.Contains(err.Error(), "scope.playbooks") || !strings.Contains(err.Error(), "tests/exfil") {
		t.Fatalf("a playbook outside the scope: %v", err)
	}
	if err := s.Pool("shared"); err == nil || !strings.Contains(err.Error(), "scope.pools") {
		t.Fatalf("a pool outside the scope: %v", err)
	}
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"api.github.com", 443, true}, {"API.GITHUB.COM.", 443, true}, {"x.example.com", 80, true}, {"a.b.example.com", 443, true},
		{"example.com", 443, false}, {"evilexample.com", 443, false}, {"db.internal", 5432, true}, {"db.internal", 5433, false},
		{"evil.example", 443, false},
	} {
		err := Host("gh", s.Hosts, c.host, c.port)
		if (err == nil) != c.want {
			t.Errorf("Host(%s:%d): %v, want allowed %v", c.host, c.port, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "scope.hosts") {
			t.Errorf("the refusal does not name the rule: %v", err)
		}
	}
	if Host("gh", nil, "anywhere", 1) != nil || (Scope{}).Playbook("x") != nil {
		t.Fatal("an empty scope refuses")
	}
}
