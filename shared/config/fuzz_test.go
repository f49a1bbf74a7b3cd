package config

import (
	"context"
	"strings"
	"testing"
)

// FuzzLoadEnv: whatever the environment holds, Load does not panic, a
// success has a cluster and at least one shard, and a password given in a
// database URL never shows up in an error.
func FuzzLoadEnv(f *testing.F) {
	f.Add("postgres://u:fuzzsecret@h/db", "postgres://u:fuzzsecret@h/s0,postgres://u:fuzzsecret@h/s1", "nats://n:4222", "https://a.example.com", "60", "require")
	f.Add("host=h password=fuzzsecret dbname=d", "", "", "*", "x", "")
	f.Add("postgres://u:fuzz%zzsecret@h/db", ",", "nats://:4222", "http://a/b", "0", "on")
	f.Fuzz(func(t *testing.T, dbURL, shards, natsURL, cors, lease, sslmode string) {
		env := map[string]string{
			EnvDatabaseURL: dbURL, EnvShardURLs: shards, EnvNATSURL: natsURL,
			EnvCORSOrigins: cors, EnvLeaseSeconds: lease, EnvDBSSLMode: sslmode,
		}
		c, err := Load(context.Background(), func(k string) string { return env[k] })
		if err != nil {
			if strings.Contains(dbURL+shards, "fuzzsecret") && strings.Contains(err.Error(), "fuzzsecret") {
				t.Fatalf("error leaks a database password: %v", err)
			}
			return
		}
		if c.ClusterDSN == "" || len(c.ShardDSNs) == 0 {
			t.Fatalf("success without a database: cluster %q shards %q", c.ClusterDSN, c.ShardDSNs)
		}
	})
}
