package main

import (
	"strings"
	"testing"
)

// TestURLPasswords: the passwords of database and NATS URLs are masked
// (noetl dev adds its throwaway cluster's this way); a URL without one adds
// nothing.
func TestURLPasswords(t *testing.T) {
	got := urlPasswords("postgres://postgres:0123456789abcdef@127.0.0.1:5/d, postgres://u@h/d,nats://n:natspassword9@h:4222")
	if strings.Join(got, " ") != "0123456789abcdef natspassword9" {
		t.Fatalf("urlPasswords = %q, want the two passwords", got)
	}
	s := envSecrets([]string{"NOETL_DATABASE_URL=postgres://postgres:0123456789abcdef@127.0.0.1:5/d"})
	if out := s.Masker().String("dsn postgres://postgres:0123456789abcdef@x"); strings.Contains(out, "0123456789abcdef") {
		t.Fatalf("the database URL's password is not masked: %s", out)
	}
}
