package main

import (
	"net/url"
	"strings"

	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/worker"
)

// envSecrets are the secrets of a server process's environment, to be masked
// in its logs: tokens and credential entries (worker.SecretEnv) and the
// passwords of the database and NATS URLs.
func envSecrets(environ []string) *redact.Secrets {
	s := &redact.Secrets{}
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		switch {
		case worker.SecretEnv(name):
			s.Add(v)
		case name == "NOETL_DATABASE_URL" || name == "NOETL_SHARD_URLS" || name == "NOETL_NATS_URL":
			s.Add(urlPasswords(v)...)
		}
	}
	return s
}

// urlPasswords are the passwords in a comma-separated list of URLs.
func urlPasswords(list string) []string {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
	}
	return out
}
