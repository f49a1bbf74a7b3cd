// Package credscope is a keychain credential's scope, the one owner of its
// rules (docs/security.md, "Credential scope"): the playbook paths and pools
// that may use a credential, which the keychain checks before it answers a
// credential's data, and the hosts it may be sent to, which the tools of our
// worker check where they send it. A credential without a scope may be used
// by any playbook and pool and sent anywhere a step names (NoETL's design),
// except that a postgres step never sends a credential to a host other than
// its own unless that host is listed (shared/tools).
//
// The package is pure: the keychain (shared/credentials), the API's shapes
// (shared/wire) and the worker's tools (shared/tools) all use it.
package credscope

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Scope lists where a credential may be used; an empty list allows
// anything.
type Scope struct {
	Playbooks []string `json:"playbooks,omitempty" doc:"globs of the playbook paths whose executions may read the data (* within a path segment, ** across segments, ? one character); empty: any"`
	Pools     []string `json:"pools,omitempty" doc:"the pools (globs) whose executions may read the data; empty: any"`
	Hosts     []string `json:"hosts,omitempty" doc:"where our worker's tools may send the credential: host, host:port or *.domain; empty: any, except that a postgres step may not move it off its own host"`
}

// MaxEntries bounds each list of a scope.
const MaxEntries = 100

// Empty reports whether the scope allows anything.
func (s Scope) Empty() bool { return len(s.Playbooks) == 0 && len(s.Pools) == 0 && len(s.Hosts) == 0 }

// FieldError is a scope entry that does not parse, naming it
// (scope.hosts[2]): jsonx's, which the API answers 422.
type FieldError = jsonx.FieldError

// ReadJSON reads a request's scope field (Read; its paths start at scope),
// for jsonx.Read.
func (s *Scope) ReadJSON(_ string, v any) error {
	r, err := Read(v)
	*s = r
	return err
}

// Read reads a scope from its JSON value ({playbooks, pools, hosts}, each a
// list of strings) and checks every entry.
func Read(v any) (Scope, error) {
	var s Scope
	m, ok := v.(map[string]any)
	if !ok {
		return s, jsonx.Refuse("scope", "expected an object {playbooks, pools, hosts}, got %T", v)
	}
	for k := range m {
		switch k {
		case "playbooks", "pools", "hosts":
		default:
			return s, jsonx.Refuse("scope."+k, "unknown; a scope lists playbooks, pools and hosts")
		}
	}
	for _, f := range []struct {
		key   string
		dst   *[]string
		check func(string) string
	}{{"playbooks", &s.Playbooks, checkGlob}, {"pools", &s.Pools, checkGlob}, {"hosts", &s.Hosts, checkHost}} {
		raw, ok := m[f.key]
		if !ok || raw == nil {
			continue
		}
		list, ok := raw.([]any)
		if !ok {
			return s, jsonx.Refuse("scope."+f.key, "expected a list of strings, got %T", raw)
		}
		if len(list) > MaxEntries {
			return s, jsonx.Refuse("scope."+f.key, "%d entries; at most %d (MaxEntries)", len(list), MaxEntries)
		}
		for i, e := range list {
			field := fmt.Sprintf("scope.%s[%d]", f.key, i)
			str, ok := e.(string)
			if !ok {
				return s, jsonx.Refuse(field, "expected a string, got %T", e)
			}
			str = strings.TrimSpace(str)
			if msg := f.check(str); msg != "" {
				return s, jsonx.Refuse(field, "%q: %s", str, msg)
			}
			*f.dst = append(*f.dst, str)
		}
	}
	return s, nil
}

func checkGlob(g string) string {
	switch {
	case g == "":
		return "empty"
	case len(g) > 200:
		return "longer than 200 characters"
	case strings.HasPrefix(g, "/"):
		return "a catalog path has no leading /"
	}
	return ""
}

func checkHost(h string) string {
	name, port, err := splitHost(h)
	switch {
	case err != nil:
		return err.Error()
	case port != "" && !validPort(port):
		return "the port is not a TCP port"
	case strings.Contains(name, "*") && (!strings.HasPrefix(name, "*.") || strings.Contains(name[1:], "*")):
		return "a wildcard may only start a name: *.example.com"
	}
	return ""
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}

// splitHost splits host[:port], an IPv6 address in brackets, into a lower
// case name and the port ("" when none).
func splitHost(h string) (string, string, error) {
	if h == "" {
		return "", "", fmt.Errorf("empty")
	}
	if strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@ ") {
		return "", "", fmt.Errorf("give a host name, host:port or *.domain, not a URL")
	}
	name, port := h, ""
	if n, p, err := net.SplitHostPort(h); err == nil {
		name, port = n, p
	} else if strings.Count(h, ":") > 1 { // an IPv6 address without a port
		if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err != nil {
			return "", "", fmt.Errorf("not a host")
		}
		name = strings.Trim(h, "[]")
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), port, nil
}

// Match reports whether glob matches s: * any run of characters within a
// /-separated segment, ** any run across segments, ? one character other
// than /.
func Match(glob, s string) bool {
	for len(glob) > 0 {
		switch {
		case strings.HasPrefix(glob, "**"):
			rest := strings.TrimLeft(glob, "*")
			for i := 0; i <= len(s); i++ {
				if Match(rest, s[i:]) {
					return true
				}
			}
			return false
		case glob[0] == '*':
			rest := glob[1:]
			for i := 0; i <= len(s); i++ {
				if Match(rest, s[i:]) {
					return true
				}
				if i < len(s) && s[i] == '/' {
					return false
				}
			}
			return false
		case glob[0] == '?':
			if s == "" || s[0] == '/' {
				return false
			}
		default:
			if s == "" || s[0] != glob[0] {
				return false
			}
		}
		glob, s = glob[1:], s[1:]
	}
	return s == ""
}

func anyMatch(globs []string, s string) bool {
	for _, g := range globs {
		if Match(g, s) {
			return true
		}
	}
	return false
}

// Playbook says why an execution of the playbook at path may not use the
// credential, or nil (the keychain names the credential).
func (s Scope) Playbook(path string) error {
	if len(s.Playbooks) == 0 || anyMatch(s.Playbooks, path) {
		return nil
	}
	return fmt.Errorf("may be used only by playbooks %s (its scope.playbooks); this execution runs %q",
		strings.Join(s.Playbooks, ", "), path)
}

// Pool says why an execution in pool may not use the credential, or nil.
func (s Scope) Pool(pool string) error {
	if len(s.Pools) == 0 || anyMatch(s.Pools, pool) {
		return nil
	}
	return fmt.Errorf("may be used only in pools %s (its scope.pools); this execution runs in pool %q",
		strings.Join(s.Pools, ", "), pool)
}

// AllowsHost reports whether one of hosts (scope.hosts entries) names
// host, with port ("" or 0: the scheme's default, matched by entries
// without a port only when they give none).
func AllowsHost(hosts []string, host string, port int) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	for _, e := range hosts {
		name, p, err := splitHost(e)
		if err != nil || p != "" && p != strconv.Itoa(port) {
			continue
		}
		if name == host || strings.HasPrefix(name, "*.") && strings.HasSuffix(host, name[1:]) {
			return true
		}
	}
	return false
}

// Host says why the credential may not be sent to host:port, or nil: a
// scope without hosts allows any.
func Host(alias string, hosts []string, host string, port int) error {
	if len(hosts) == 0 || AllowsHost(hosts, host, port) {
		return nil
	}
	return fmt.Errorf("credential %q may be sent only to %s (its scope.hosts); this step sends it to %s",
		alias, strings.Join(hosts, ", "), net.JoinHostPort(host, strconv.Itoa(port)))
}
