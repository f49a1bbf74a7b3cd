package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noetl-go/noetl/shared/config/mototest"
)

// envOf turns a map into a getenv function.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func load(t *testing.T, m map[string]string) (*Config, error) {
	t.Helper()
	return Load(context.Background(), envOf(m))
}

func mustLoad(t *testing.T, m map[string]string) *Config {
	t.Helper()
	c, err := load(t, m)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

const localDB = "postgres://noetl:pw@127.0.0.1:5432/noetl"

func TestLocalDefaults(t *testing.T) {
	c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB})
	if c.Stage != "local" || c.InLambda {
		t.Errorf("stage %q lambda %v, want local false", c.Stage, c.InLambda)
	}
	if c.ClusterDSN != localDB {
		t.Errorf("cluster DSN %q changed (no sslmode was asked for)", c.ClusterDSN)
	}
	if !slices.Equal(c.ShardDSNs, []string{localDB}) {
		t.Errorf("shards %q, want the cluster as the only shard", c.ShardDSNs)
	}
	if c.DBMaxConns != 10 || c.MigrateOnStart {
		t.Errorf("db max conns %d migrate %v", c.DBMaxConns, c.MigrateOnStart)
	}
	if c.NATS.Enabled() || c.NATS.AuthKind() != "none" {
		t.Errorf("NATS %+v should be disabled", c.NATS)
	}
	if !c.Open() || c.AllowOpen {
		t.Errorf("no tokens: Open() = %v, AllowOpen = %v", c.Open(), c.AllowOpen)
	}
	if c.Lease != 60*time.Second || c.MaxBodyBytes != 1048576 || c.LogLevel != slog.LevelInfo {
		t.Errorf("lease %v body %d level %v", c.Lease, c.MaxBodyBytes, c.LogLevel)
	}
	if c.ServerURL != "" || c.CORSOrigins != nil {
		t.Errorf("server url %q cors %q, want empty", c.ServerURL, c.CORSOrigins)
	}
}

func TestLambdaDefaults(t *testing.T) {
	c := mustLoad(t, map[string]string{
		EnvLambdaFunctionName: "noetl-dev-status",
		EnvDatabaseURL:        localDB,
		EnvAPIToken:           "a",
	})
	if !c.InLambda || c.DBMaxConns != 2 {
		t.Errorf("lambda %v max conns %d, want true 2", c.InLambda, c.DBMaxConns)
	}
	// The Lambda sslmode default applies to DSNs built from secrets only: a
	// URL says what it wants.
	if c.ClusterDSN != localDB {
		t.Errorf("cluster DSN %q was changed", c.ClusterDSN)
	}
}

func TestEverythingSet(t *testing.T) {
	c := mustLoad(t, map[string]string{
		EnvStage:          "prod",
		EnvDatabaseURL:    localDB,
		EnvShardURLs:      " postgres://a@h1/s0 , host=h2 dbname=s1 user=a ,postgres://a@h3/s2?sslmode=verify-full",
		EnvDBSSLMode:      "require",
		EnvDBMaxConns:     "4",
		EnvMigrateOnStart: "true",
		EnvNATSURL:        "nats://n1:4222,tls://n2:4222",
		EnvServerURL:      "https://api.example.com/",
		EnvAPIToken:       "u1, u2",
		EnvWorkerToken:    "w1",
		EnvInternalToken:  "i1",
		EnvAllowOpen:      "false",
		EnvLeaseSeconds:   "5",
		EnvMaxBodyBytes:   "2048",
		EnvLogLevel:       "DEBUG",
		EnvCORSOrigins:    "https://a.example.com, http://localhost:3000",
		EnvSchedulerGroup: "noetl-prod", EnvSchedulerTargetARN: "arn:aws:lambda:eu-west-1:1:function:noetl-prod-schedules",
		EnvSchedulerRoleARN: "arn:aws:iam::1:role/scheduler",
	})
	if want := (Scheduler{Group: "noetl-prod", TargetARN: "arn:aws:lambda:eu-west-1:1:function:noetl-prod-schedules",
		RoleARN: "arn:aws:iam::1:role/scheduler"}); c.Scheduler != want || !c.Scheduler.Enabled() {
		t.Errorf("scheduler %+v", c.Scheduler)
	}
	want := []string{
		"postgres://a@h1/s0?sslmode=require",
		"host=h2 dbname=s1 user=a sslmode=require",
		"postgres://a@h3/s2?sslmode=verify-full", // its own sslmode wins
	}
	if !slices.Equal(c.ShardDSNs, want) {
		t.Errorf("shards\n got %q\nwant %q", c.ShardDSNs, want)
	}
	if c.ClusterDSN != localDB+"?sslmode=require" {
		t.Errorf("cluster %q", c.ClusterDSN)
	}
	if c.Stage != "prod" || c.DBMaxConns != 4 || !c.MigrateOnStart {
		t.Errorf("stage %q conns %d migrate %v", c.Stage, c.DBMaxConns, c.MigrateOnStart)
	}
	if c.NATS.URL != "nats://n1:4222,tls://n2:4222" || !c.NATS.Enabled() {
		t.Errorf("nats %+v", c.NATS)
	}
	if c.ServerURL != "https://api.example.com" {
		t.Errorf("server url %q, want the trailing slash trimmed", c.ServerURL)
	}
	if !slices.Equal(c.Tokens.API, []string{"u1", "u2"}) || c.Open() {
		t.Errorf("api tokens %q open %v", c.Tokens.API, c.Open())
	}
	if c.Lease != 5*time.Second || c.MaxBodyBytes != 2048 || c.LogLevel != slog.LevelDebug {
		t.Errorf("lease %v body %d level %v", c.Lease, c.MaxBodyBytes, c.LogLevel)
	}
	if !slices.Equal(c.CORSOrigins, []string{"https://a.example.com", "http://localhost:3000"}) {
		t.Errorf("cors %q", c.CORSOrigins)
	}
}

func TestOpenLambda(t *testing.T) {
	base := map[string]string{EnvLambdaFunctionName: "f", EnvDatabaseURL: localDB}
	_, err := load(t, base)
	for _, want := range []string{"no API token", EnvAPITokensSecretARN, EnvAllowOpen + "=true"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Lambda without tokens: error %v, want it to mention %q", err, want)
		}
	}
	base[EnvAllowOpen] = "true"
	c := mustLoad(t, base)
	if !c.Open() || !c.AllowOpen {
		t.Errorf("allowed open: Open %v AllowOpen %v", c.Open(), c.AllowOpen)
	}
	// Locally no token is fine: the local server runs open and says so.
	delete(base, EnvLambdaFunctionName)
	delete(base, EnvAllowOpen)
	mustLoad(t, base)
}

func TestMaxBodyLambdaLimit(t *testing.T) {
	big := fmt.Sprint(MaxLambdaBodyBytes + 1)
	if c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvMaxBodyBytes: big}); c.MaxBodyBytes != MaxLambdaBodyBytes+1 {
		t.Errorf("locally a body limit above 6 MiB is allowed, got %d", c.MaxBodyBytes)
	}
	_, err := load(t, map[string]string{EnvDatabaseURL: localDB, EnvMaxBodyBytes: big, EnvLambdaFunctionName: "f", EnvAPIToken: "t"})
	if err == nil || !strings.Contains(err.Error(), EnvMaxBodyBytes) || !strings.Contains(err.Error(), "6291456") {
		t.Errorf("Lambda body limit above 6 MiB: error %v", err)
	}
}

// TestErrors covers every error Load can return without AWS: each must name
// the variable and say what to do.
func TestErrors(t *testing.T) {
	db := map[string]string{EnvDatabaseURL: localDB}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range db {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tooMany := strings.Repeat("postgres://h/x,", MaxShards) + "postgres://h/y"
	manyDistinct := make([]string, MaxShards+1)
	for i := range manyDistinct {
		manyDistinct[i] = fmt.Sprintf("postgres://h/s%d", i)
	}
	cases := []struct {
		name string
		env  map[string]string
		want []string // every one must appear in the message
	}{
		{"no database", map[string]string{}, []string{"no database configured", EnvDatabaseURL, EnvDBSecretARN}},
		{"shards without cluster", map[string]string{EnvShardURLs: "postgres://h/s0"}, []string{EnvShardURLs, EnvDatabaseURL + " is empty", "set " + EnvDatabaseURL}},
		{"url and secret", with(EnvDBSecretARN, "arn:x"), []string{"both", EnvDatabaseURL, EnvDBSecretARN, "not both"}},
		{"shard urls and map", map[string]string{EnvShardURLs: "postgres://h/s", EnvDatabaseURL: localDB, EnvShardMapParam: "/p"}, []string{"both", EnvShardMapParam}},
		{"sslmode", with(EnvDBSSLMode, "on"), []string{EnvDBSSLMode, `"on"`, "verify-full"}},
		{"dsn scheme", map[string]string{EnvDatabaseURL: "mysql://u:p@h/db"}, []string{EnvDatabaseURL, `scheme "mysql"`, "postgres://user:password@host:5432/dbname"}},
		{"dsn unparseable", map[string]string{EnvDatabaseURL: "postgres://u:se%zzcret@h/db"}, []string{EnvDatabaseURL, "not a valid URL", "percent-encoded"}},
		{"dsn garbage", map[string]string{EnvDatabaseURL: "just-a-host"}, []string{EnvDatabaseURL, "neither a postgres:// URL nor a key=value DSN"}},
		{"empty shard entry", with(EnvShardURLs, "postgres://h/a,,postgres://h/b"), []string{EnvShardURLs + " entry 1 is empty", "stray comma"}},
		{"bad shard entry", with(EnvShardURLs, "postgres://h/a,http://h/b"), []string{EnvShardURLs + " entry 1", `scheme "http"`}},
		{"duplicate shard", with(EnvShardURLs, "postgres://h/a,postgres://h/b,postgres://h/a"), []string{EnvShardURLs + " entries 0 and 2", "its own"}},
		{"duplicate shards many", with(EnvShardURLs, tooMany), []string{"entries 0 and 1"}},
		{"too many shards", with(EnvShardURLs, strings.Join(manyDistinct, ",")), []string{EnvShardURLs, "1025 shards", "at most 1024"}},
		{"max conns not int", with(EnvDBMaxConns, "two"), []string{EnvDBMaxConns, `"two"`, "whole number of connections", "default 10"}},
		{"max conns zero", with(EnvDBMaxConns, "0"), []string{EnvDBMaxConns + "=0", "out of range", "between 1 and 1000"}},
		{"migrate", with(EnvMigrateOnStart, "yes"), []string{EnvMigrateOnStart, "set true or false"}},
		{"allow open", with(EnvAllowOpen, "maybe"), []string{EnvAllowOpen, "set true or false"}},
		{"nats scheme", with(EnvNATSURL, "http://n:4222"), []string{EnvNATSURL, `scheme "http"`, "nats://"}},
		{"nats not url", with(EnvNATSURL, "n4222"), []string{EnvNATSURL, "not a URL", "unset it to disable NATS"}},
		{"nats url password hidden", with(EnvNATSURL, "nats://u:hunter2@/x"), []string{EnvNATSURL, "not a URL"}},
		{"nats creds without url", with(EnvNATSCredsSecretARN, "arn:x"), []string{EnvNATSCredsSecretARN, EnvNATSURL + " is empty"}},
		{"server url", with(EnvServerURL, "api.example.com"), []string{EnvServerURL, "absolute http(s) URL"}},
		{"tokens twice", with(EnvAPIToken, "t", EnvAPITokensSecretARN, "arn:x"), []string{"both", EnvAPITokensSecretARN, EnvAPIToken, "not both"}},
		{"lease", with(EnvLeaseSeconds, "1m"), []string{EnvLeaseSeconds, "whole number of seconds", "default 60"}},
		{"lease zero", with(EnvLeaseSeconds, "0"), []string{EnvLeaseSeconds + "=0", "out of range"}},
		{"body negative", with(EnvMaxBodyBytes, "-1"), []string{EnvMaxBodyBytes + "=-1", "bytes"}},
		{"log level", with(EnvLogLevel, "verbose"), []string{EnvLogLevel, "debug, info, warn or error"}},
		{"cors origin", with(EnvCORSOrigins, "https://a.example.com/app"), []string{EnvCORSOrigins, "not an origin", "scheme://host[:port]"}},
		{"cors star", with(EnvCORSOrigins, "*,https://a.example.com"), []string{EnvCORSOrigins, "'*' alone"}},
		{"allowed host URL", with(EnvAllowedHosts, "https://noetl.internal"), []string{EnvAllowedHosts, "not a host name"}},
		{"allowed host port", with(EnvAllowedHosts, "noetl.internal:8082"), []string{EnvAllowedHosts, "without scheme or port"}},
		{"allowed hosts star", with(EnvAllowedHosts, "*,noetl.internal"), []string{EnvAllowedHosts, "'*' alone"}},
		{"stage", with(EnvStage, "my stage"), []string{EnvStage, "letters, digits"}},
		{"shard map name", map[string]string{EnvDBSecretARN: "arn:x", EnvShardMapParam: "noetl/map"}, []string{EnvShardMapParam, "must start with '/'"}},
		{"result store relative", with(EnvResultStore, "file://results"), []string{EnvResultStore, `"results" is read as a host`, "file:///absolute/dir"}},
		{"result store opaque", with(EnvResultStore, "file:results"), []string{EnvResultStore, "must be absolute", "file:///absolute/dir"}},
		{"result store no path", with(EnvResultStore, "file://"), []string{EnvResultStore, "must be absolute"}},
		{"result store remote host", with(EnvResultStore, "file://nas/results"), []string{EnvResultStore, `"nas" is read as a host`}},
		{"result store root", with(EnvResultStore, "file:///"), []string{EnvResultStore, "not the filesystem root"}},
		{"result store bare path", with(EnvResultStore, "/var/results"), []string{EnvResultStore, "no scheme", "file:///absolute/dir", "s3://bucket/prefix"}},
		{"result store scheme", with(EnvResultStore, "gs://bucket/results"), []string{EnvResultStore, `scheme "gs"`, "s3://bucket/prefix", "unset it"}},
		{"result store no bucket", with(EnvResultStore, "s3:///results"), []string{EnvResultStore, "no bucket", "s3://bucket/prefix"}},
		{"result store empty s3", with(EnvResultStore, "s3://"), []string{EnvResultStore, "no bucket"}},
		{"result store bucket case", with(EnvResultStore, "s3://My_Bucket/results"), []string{EnvResultStore, "not an S3 bucket name"}},
		{"result store bucket port", with(EnvResultStore, "s3://bucket:9000/results"), []string{EnvResultStore, "not an S3 bucket name"}},
		{"result store bucket short", with(EnvResultStore, "s3://ab"), []string{EnvResultStore, "not an S3 bucket name"}},
		{"result store prefix dotdot", with(EnvResultStore, "s3://bucket/a/../b"), []string{EnvResultStore, "prefix", "'..'"}},
		{"result store prefix dot", with(EnvResultStore, "s3://bucket/./"), []string{EnvResultStore, "prefix", "'.'"}},
		{"result store prefix chars", with(EnvResultStore, "s3://bucket/a%23b"), []string{EnvResultStore, `prefix "a#b"`, "safe key characters"}},
		{"result store prefix empty part", with(EnvResultStore, "s3://bucket/a//b"), []string{EnvResultStore, "prefix"}},
		{"result store query", with(EnvResultStore, "s3://bucket/results?region=x"), []string{EnvResultStore, "no user, query or fragment"}},
		{"result store key hidden", with(EnvResultStore, "s3://AKIA:hunter2@bucket/results"), []string{EnvResultStore, "no user"}},
		{"result store unparseable", with(EnvResultStore, "s3://bu%zzcket/x"), []string{EnvResultStore, "not a URL", "s3://bucket/prefix"}},
		{"scheduler group alone", with(EnvSchedulerGroup, "noetl-dev"), []string{EnvSchedulerGroup, EnvSchedulerTargetARN, EnvSchedulerRoleARN, "all three"}},
		{"scheduler group name", with(EnvSchedulerGroup, "noetl dev", EnvSchedulerTargetARN, "arn:aws:lambda:x", EnvSchedulerRoleARN, "arn:aws:iam::1:role/r"),
			[]string{EnvSchedulerGroup, "1-64 letters"}},
		{"scheduler target", with(EnvSchedulerGroup, "g", EnvSchedulerTargetARN, "noetl-dev-schedules", EnvSchedulerRoleARN, "arn:aws:iam::1:role/r"),
			[]string{EnvSchedulerTargetARN, "function's ARN"}},
		{"scheduler role", with(EnvSchedulerGroup, "g", EnvSchedulerTargetARN, "arn:aws:lambda:x", EnvSchedulerRoleARN, "scheduler-role"),
			[]string{EnvSchedulerRoleARN, "role EventBridge Scheduler assumes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.env)
			if err == nil {
				t.Fatalf("Load succeeded, want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not mention %q", err, w)
				}
			}
			for _, secret := range []string{"se%zzcret", "hunter2", ":pw@", "bu%zzcket"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks a password: %q", err)
				}
			}
		})
	}
}

func TestResultStore(t *testing.T) {
	if c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB}); c.ResultStore != "" {
		t.Errorf("unset: result store %q, want none", c.ResultStore)
	}
	for _, v := range []string{
		"file:///var/lib/noetl/results",
		"file:///tmp/r/",
		"file://localhost/var/results",
		"s3://noetl-results",
		"s3://noetl-results/",
		"s3://noetl-results/results",
		"s3://noetl-results/dev/results/",
		"s3://my.bucket-1/a/b/c",
	} {
		c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvResultStore: " " + v + " "})
		if c.ResultStore != v {
			t.Errorf("%s=%q: result store %q", EnvResultStore, v, c.ResultStore)
		}
	}
}

func TestAWSConfig(t *testing.T) {
	ctx := context.Background()
	mototest.IsolateSDK(t) // the SDK would otherwise read this machine's AWS_REGION and ~/.aws
	c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvAWSRegion: "eu-central-1", EnvAWSEndpointURL: "http://127.0.0.1:1"})
	cfg, err := c.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-central-1" || cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:1" {
		t.Errorf("region %q endpoint %v, want what Load read", cfg.Region, cfg.BaseEndpoint)
	}
	c = mustLoad(t, map[string]string{EnvDatabaseURL: localDB})
	if _, err := c.AWSConfig(ctx); err == nil || !strings.Contains(err.Error(), "no AWS region") || !strings.Contains(err.Error(), EnvAWSRegion) {
		t.Errorf("no region anywhere: %v, want it to name %s", err, EnvAWSRegion)
	}
}

func TestErrorsReportedTogether(t *testing.T) {
	_, err := load(t, map[string]string{EnvDatabaseURL: localDB, EnvLeaseSeconds: "x", EnvLogLevel: "loud", EnvDBSSLMode: "on"})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, w := range []string{EnvLeaseSeconds, EnvLogLevel, EnvDBSSLMode} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q misses %s: every problem should be reported at once", err, w)
		}
	}
}

func TestNilGetenv(t *testing.T) {
	if _, err := Load(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "os.Getenv") {
		t.Errorf("nil getenv: %v", err)
	}
}

func TestLogLevels(t *testing.T) {
	for in, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "Info": slog.LevelInfo, "warn": slog.LevelWarn, "WARNING": slog.LevelWarn, "error": slog.LevelError} {
		c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvLogLevel: in})
		if c.LogLevel != want {
			t.Errorf("%s=%q: level %v, want %v", EnvLogLevel, in, c.LogLevel, want)
		}
	}
}

func TestCORSStar(t *testing.T) {
	c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvCORSOrigins: "*"})
	if !slices.Equal(c.CORSOrigins, []string{"*"}) {
		t.Errorf("cors %q", c.CORSOrigins)
	}
}

func TestScopes(t *testing.T) {
	tok := Tokens{API: []string{"user-1", "shared"}, Worker: []string{"worker-1", "shared"}, Internal: []string{"internal-1"}, Admin: []string{"admin-1"}}
	cases := map[string]Scope{
		"admin-1":    ScopeAdmin | ScopeAPI, // NoETL's CLI sends one token for every command
		"user-1":     ScopeAPI,
		"worker-1":   ScopeWorker,
		"internal-1": ScopeInternal | ScopeWorker, // NoETL's workers hold the internal token
		"shared":     ScopeAPI | ScopeWorker,
		"user-":      0, // a prefix is not the token
		"user-12":    0,
		"":           0,
		"USER-1":     0,
	}
	for in, want := range cases {
		if got := tok.Scopes(in); got != want {
			t.Errorf("Scopes(%q) = %b, want %b", in, got, want)
		}
	}
	if !tok.Scopes("shared").Has(ScopeWorker) || tok.Scopes("user-1").Has(ScopeInternal) || tok.Scopes("user-1").Has(0) || tok.Scopes("internal-1").Has(ScopeAPI) || tok.Scopes("worker-1").Has(ScopeInternal) || tok.Scopes("internal-1").Has(ScopeAdmin) {
		t.Error("Has is wrong")
	}
	if (Tokens{}).Scopes("") != 0 || !(Tokens{}).Empty() || tok.Empty() || (Tokens{Admin: []string{"a"}}).Empty() {
		t.Error("Empty is wrong")
	}
}

func TestBuildDSNRoundTrip(t *testing.T) {
	pw := `p@ss:w/o?rd#%&= '"`
	dsn := buildDSN("us er", pw, dbEndpoint{Host: "proxy.example.com", Port: 6432, DBName: "noetl_shard_1"}, "verify-full")
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgx cannot parse %q: %v", RedactDSN(dsn), err)
	}
	if pc.User != "us er" || pc.Password != pw || pc.Host != "proxy.example.com" || pc.Port != 6432 || pc.Database != "noetl_shard_1" {
		t.Errorf("round trip lost something: user %q password %q host %q port %d db %q", pc.User, pc.Password, pc.Host, pc.Port, pc.Database)
	}
	if pc.TLSConfig == nil || pc.TLSConfig.ServerName != "proxy.example.com" {
		t.Errorf("sslmode verify-full did not reach pgx: %+v", pc.TLSConfig)
	}
	if d := buildDSN("u", "p", dbEndpoint{Host: "h", DBName: "d"}, "disable"); d != "postgres://u:p@h:5432/d?sslmode=disable" {
		t.Errorf("default port: %q", d)
	}
}

func TestRedaction(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h/db":           "postgres://u:xxxxx@h/db",
		"host=h password=secret user=u":      "host=h password=xxxxx user=u",
		"host=h password = 'sec ret' user=u": "host=h password = xxxxx user=u",
		"postgres://u@h/db":                  "postgres://u@h/db",
		"":                                   "",
	} {
		if got := RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
	c := mustLoad(t, map[string]string{
		EnvDatabaseURL: "postgres://u:dbsecret@h/db", EnvShardURLs: "host=h password=shardsecret",
		EnvAPIToken: "apisecret", EnvNATSURL: "nats://nu:natssecret@n:4222,nats://nu:natssecret2@m:4222",
		EnvResultStore: "s3://noetl-results/results",
	})
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", c)
	for _, s := range []string{"dbsecret", "shardsecret", "apisecret", "natssecret", "natssecret2"} {
		if strings.Contains(buf.String(), s) {
			t.Errorf("log line leaks %q: %s", s, buf.String())
		}
	}
	if !strings.Contains(buf.String(), `"api_tokens":1`) || !strings.Contains(buf.String(), "nats://nu:xxxxx@m:4222") ||
		!strings.Contains(buf.String(), `"result_store":"s3://noetl-results/results"`) {
		t.Errorf("log line should count tokens: %s", buf.String())
	}
}

// TestTokenlessWorkerNetworks: off by default; CIDRs and single addresses;
// never every address; and refused in Lambda, which stays closed.
func TestTokenlessWorkerNetworks(t *testing.T) {
	if c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB}); c.TokenlessWorkers != nil {
		t.Errorf("by default tokenless workers are allowed from %v, want nowhere", c.TokenlessWorkers)
	}
	c := mustLoad(t, map[string]string{EnvDatabaseURL: localDB, EnvTokenlessWorkers: "10.0.0.0/8, 127.0.0.1,fd00::/8,192.168.7.9/24"})
	var got []string
	for _, p := range c.TokenlessWorkers {
		got = append(got, p.String())
	}
	if want := []string{"10.0.0.0/8", "127.0.0.1/32", "fd00::/8", "192.168.7.0/24"}; !slices.Equal(got, want) {
		t.Errorf("networks %v, want %v", got, want)
	}
	for v, want := range map[string]string{
		"0.0.0.0/0":  "is every address",
		"::/0":       "is every address",
		"10.0.0.0/x": "neither a network",
		"localhost":  "neither a network",
	} {
		if _, err := load(t, map[string]string{EnvDatabaseURL: localDB, EnvTokenlessWorkers: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v, want %q", EnvTokenlessWorkers, v, err, want)
		}
	}
	_, err := load(t, map[string]string{EnvLambdaFunctionName: "f", EnvDatabaseURL: localDB, EnvAllowOpen: "true", EnvTokenlessWorkers: "10.0.0.0/8"})
	if err == nil || !strings.Contains(err.Error(), "local server only") {
		t.Errorf("in Lambda: %v, want a refusal", err)
	}
}
