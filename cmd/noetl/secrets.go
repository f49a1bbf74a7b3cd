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
			for _, raw := range strings.Split(v, ",") {
				if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
					p, _ := u.User.Password()
					s.Add(p)
				}
			}
		}
	}
	return s
}
