package tools

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LinkLocalEnv is the worker setting (true/false) that lets the http,
// transfer and script-source tools reach link-local and cloud metadata
// addresses (`noetl worker --allow-link-local`).
const LinkLocalEnv = "NOETL_ALLOW_LINK_LOCAL"

// AllowLinkLocalFromEnv reads LinkLocalEnv (strconv.ParseBool; anything
// else, or unset, is false).
func AllowLinkLocalFromEnv() bool {
	ok, _ := strconv.ParseBool(os.Getenv(LinkLocalEnv))
	return ok
}

// guardedPrefixes are the addresses a playbook's URL may not reach unless the
// worker allows it: link-local networks, where every cloud serves its
// instance metadata and the role credentials with it (AWS, GCP, Azure and
// OpenStack at 169.254.169.254, ECS task credentials at 169.254.170.2), AWS's
// IPv6 metadata address and Alibaba Cloud's.
var guardedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// guardedNames are the metadata services' host names.
var guardedNames = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}

// addressGuardError is a request refused by the address guard: a tool
// error naming the address and the setting, never retried.
type addressGuardError struct{ addr string }

func (e *addressGuardError) Error() string {
	return fmt.Sprintf("%s is a link-local or cloud metadata address, which tools do not reach by default "+
		"(it serves the machine's cloud credentials); set %s=true on the worker (noetl worker --allow-link-local) to allow it",
		e.addr, LinkLocalEnv)
}

func guardedIP(a netip.Addr) bool {
	a = a.Unmap().WithZone("") // a zoned address matches no prefix
	for _, p := range guardedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// guardURL refuses a URL whose host is a guarded address or metadata name,
// unless the worker allows them. The dialer checks every address a name
// resolves to as well (guardDial), which also covers redirects and DNS
// names that lead there; this check covers requests sent through a proxy.
func (r *Registry) guardURL(u *url.URL) error {
	if r.allowLinkLocal {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil && guardedIP(a) {
		return &addressGuardError{addr: host}
	}
	for _, n := range guardedNames {
		if host == n {
			return &addressGuardError{addr: host}
		}
	}
	return nil
}

// guardDial is the tools' dialer's Control: it refuses a connection to a
// guarded address, whatever name led there.
func guardDial(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if a, err := netip.ParseAddr(host); err == nil && guardedIP(a) {
		return &addressGuardError{addr: host}
	}
	return nil
}
