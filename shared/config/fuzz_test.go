package config

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/noetl-go/noetl/shared/resultstore"
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

// FuzzResultStore: checkResultStore never panics, every error names
// NOETL_RESULT_STORE, and an s3:// URL it accepts opens as a store that owns
// the keys a worker would write under it (config and resultstore agree on
// what a usable URL is).
func FuzzResultStore(f *testing.F) {
	for _, s := range []string{
		"s3://noetl-results/results", "s3://noetl-results", "s3://b.c-d/a/b/", "s3://bucket/a/../b",
		"s3://bucket//x", "s3://Bucket/x", "s3://000/.", "s3://000/0/%00", "s3://b00/a%23b", "s3://b00/a b", "file:///var/results", "file://h/x", "file:x", "%", "",
	} {
		f.Add(s)
	}
	awsCfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	f.Fuzz(func(t *testing.T, v string) {
		err := checkResultStore(v)
		if err != nil {
			if !strings.Contains(err.Error(), EnvResultStore) {
				t.Fatalf("error does not name %s: %v", EnvResultStore, err)
			}
			return
		}
		u, perr := url.Parse(v)
		if perr != nil {
			t.Fatalf("accepted %q, which does not parse: %v", v, perr)
		}
		if u.Scheme != "s3" {
			return // opening a file store would create directories
		}
		st, err := resultstore.Open(context.Background(), v, resultstore.Options{AWS: &awsCfg})
		if err != nil {
			t.Fatalf("accepted %q, which resultstore.Open refuses: %v", v, err)
		}
		key := "exec-1/step.json"
		if p := strings.Trim(u.Path, "/"); p != "" {
			key = p + "/" + key
		}
		if uri := "s3://" + u.Host + "/" + key; !resultstore.Owns(st, uri) {
			t.Fatalf("accepted %q, but the store does not own %q, where a worker would write", v, uri)
		}
		if resultstore.Owns(st, "s3://not-"+u.Host+"/"+key) {
			t.Fatalf("the store %q owns another bucket's key", v)
		}
	})
}
