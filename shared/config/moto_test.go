package config

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/resultstore"
)

const motoRegion = mototest.Region

// TestMoto runs Load against a real moto_server (one per run: it takes about a
// second to start). Each subtest uses its own secret and parameter names.
func TestMoto(t *testing.T) {
	m := newMoto(t)
	t.Run("ShardMapTokensNATS", func(t *testing.T) { testMotoShardMapTokensNATS(t, m.with(t)) })
	t.Run("SecretOnly", func(t *testing.T) { testMotoSecretOnly(t, m.with(t)) })
	t.Run("URLWithTokensSecret", func(t *testing.T) { testMotoURLWithTokensSecret(t, m.with(t)) })
	t.Run("Errors", func(t *testing.T) { testMotoErrors(t, m.with(t)) })
	t.Run("ResultStoreS3", func(t *testing.T) { testMotoResultStore(t, m.with(t)) })
}

type motoFixture struct {
	t   *testing.T
	url string
	sm  *secretsmanager.Client
	ps  *ssm.Client
}

func newMoto(t *testing.T) *motoFixture {
	url := mototest.Start(t)
	mototest.IsolateSDK(t)
	cfg := mototest.Config(url)
	return &motoFixture{t: t, url: url, sm: secretsmanager.NewFromConfig(cfg), ps: ssm.NewFromConfig(cfg)}
}

// with returns the fixture bound to a subtest (for t.Fatal).
func (m *motoFixture) with(t *testing.T) *motoFixture {
	c := *m
	c.t = t
	return &c
}

func (m *motoFixture) secret(name, value string) string {
	m.t.Helper()
	out, err := m.sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)})
	if err != nil {
		m.t.Fatalf("CreateSecret %s: %v", name, err)
	}
	return *out.ARN
}

func (m *motoFixture) param(name, value string) {
	m.t.Helper()
	_, err := m.ps.PutParameter(context.Background(), &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeString})
	if err != nil {
		m.t.Fatalf("PutParameter %s: %v", name, err)
	}
}

func (m *motoFixture) env(kv ...string) map[string]string {
	e := map[string]string{EnvAWSRegion: motoRegion, EnvAWSEndpointURL: m.url, EnvLambdaFunctionName: "noetl-test-ingest"}
	for i := 0; i < len(kv); i += 2 {
		e[kv[i]] = kv[i+1]
	}
	return e
}

func parseDSN(t *testing.T, dsn string) *pgconn.Config {
	t.Helper()
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgx cannot parse %s: %v", RedactDSN(dsn), err)
	}
	return pc
}

func testMotoShardMapTokensNATS(t *testing.T, m *motoFixture) {
	const pw = "p@ss/w:rd?%"
	dbARN := m.secret("noetl/map/db", fmt.Sprintf(`{"username":"noetl","password":%q,"host":"writer.internal","port":5432,"dbname":"noetl","engine":"postgres"}`, pw))
	shard1ARN := m.secret("noetl/map/shard1", `{"username":"s1user","password":"s1pass","host":"ignored.internal","port":"5432","engine":"aurora-postgresql"}`)
	tokARN := m.secret("noetl/map/tokens", `{"api":"api-tok","worker":["worker-tok","worker-next"],"internal":"internal-tok"}`)
	natsARN := m.secret("noetl/map/nats", testCreds)
	m.param("/noetl/map/shard-map", fmt.Sprintf(`{
		"cluster": {"host": "proxy0.internal", "port": 5432, "dbname": "noetl"},
		"shards": [
			{"host": "proxy0.internal", "port": 5432, "dbname": "noetl"},
			{"host": "proxy1.internal", "port": 6432, "dbname": "noetl", "secret_arn": %q}
		]}`, shard1ARN))

	c, err := Load(context.Background(), envOf(m.env(
		EnvDBSecretARN, dbARN,
		EnvShardMapParam, "/noetl/map/shard-map",
		EnvAPITokensSecretARN, tokARN,
		EnvNATSURL, "nats://nats.internal:4222",
		EnvNATSCredsSecretARN, natsARN,
	)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	cl := parseDSN(t, c.ClusterDSN)
	if cl.Host != "proxy0.internal" || cl.User != "noetl" || cl.Password != pw || cl.Database != "noetl" || cl.TLSConfig == nil {
		t.Errorf("cluster: host %q user %q password %q db %q tls %v (want the map's host, the DB secret's credentials, sslmode=require in Lambda)",
			cl.Host, cl.User, cl.Password, cl.Database, cl.TLSConfig != nil)
	}
	if len(c.ShardDSNs) != 2 || c.ShardDSNs[0] != c.ClusterDSN {
		t.Fatalf("shards %v: want 2, shard 0 = cluster", c.ShardDSNs)
	}
	s1 := parseDSN(t, c.ShardDSNs[1])
	if s1.Host != "proxy1.internal" || s1.Port != 6432 || s1.User != "s1user" || s1.Password != "s1pass" {
		t.Errorf("shard 1: host %q port %d user %q password %q (want the entry's endpoint and its own secret's credentials)", s1.Host, s1.Port, s1.User, s1.Password)
	}
	if !strings.Contains(c.ShardDSNs[1], "sslmode=require") {
		t.Errorf("shard 1 DSN lacks the Lambda sslmode default: %s", RedactDSN(c.ShardDSNs[1]))
	}
	if got := c.Tokens.Scopes("worker-next"); got != ScopeWorker {
		t.Errorf("worker-next scopes %b", got)
	}
	if c.Tokens.Scopes("api-tok") != ScopeAPI || c.Tokens.Scopes("internal-tok") != ScopeInternal|ScopeWorker || c.Open() {
		t.Errorf("tokens %+v", c.Tokens)
	}
	if c.NATS.URL != "nats://nats.internal:4222" || c.NATS.AuthKind() != "creds" {
		t.Errorf("nats %q auth %s", c.NATS.URL, c.NATS.AuthKind())
	}
}

func testMotoSecretOnly(t *testing.T, m *motoFixture) {
	m.secret("noetl/only/db", `{"username":"u","password":"p","host":"db.internal","port":5433,"dbname":"noetl"}`)
	m.secret("noetl/only/nats", `{"user":"nu","password":"np"}`)
	// Names work as well as ARNs (LocalStack's env file uses names).
	c, err := Load(context.Background(), envOf(m.env(
		EnvDBSecretARN, "noetl/only/db",
		EnvDBSSLMode, "disable",
		EnvAllowOpen, "true",
		EnvNATSURL, "nats://n:4222",
		EnvNATSCredsSecretARN, "noetl/only/nats",
	)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := "postgres://u:p@db.internal:5433/noetl?sslmode=disable"
	if c.ClusterDSN != want || !slices.Equal(c.ShardDSNs, []string{want}) {
		t.Errorf("cluster %q shards %q, want %q as both", c.ClusterDSN, c.ShardDSNs, want)
	}
	if c.NATS.User != "nu" || c.NATS.Password != "np" {
		t.Errorf("nats %+v", c.NATS)
	}
	if !c.Open() {
		t.Error("no tokens secret and NOETL_ALLOW_OPEN=true: want open")
	}
}

// testMotoResultStore: the S3 result store opened as a function opens it —
// NOETL_RESULT_STORE and AWSConfig from the same environment — reaches the
// endpoint and region Load read.
func testMotoResultStore(t *testing.T, m *motoFixture) {
	ctx := context.Background()
	const bucket = "noetl-config-results"
	_, err := s3.NewFromConfig(mototest.Config(m.url), func(o *s3.Options) { o.UsePathStyle = true }).CreateBucket(ctx, &s3.CreateBucketInput{
		Bucket:                    aws.String(bucket),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(motoRegion)},
	})
	if err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	c, err := Load(ctx, envOf(m.env(EnvDatabaseURL, localDB, EnvAllowOpen, "true", EnvResultStore, "s3://"+bucket+"/results")))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	cfg, err := c.AWSConfig(ctx)
	if err != nil {
		t.Fatalf("AWSConfig: %v", err)
	}
	if cfg.Region != motoRegion || aws.ToString(cfg.BaseEndpoint) != m.url {
		t.Errorf("AWSConfig region %q endpoint %q, want %q %q", cfg.Region, aws.ToString(cfg.BaseEndpoint), motoRegion, m.url)
	}
	st, err := resultstore.Open(ctx, c.ResultStore, resultstore.Options{AWS: &cfg})
	if err != nil {
		t.Fatalf("resultstore.Open(%q): %v", c.ResultStore, err)
	}
	uri, err := st.Put(ctx, "exec/1.json", []byte(`{"big":true}`))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if want := "s3://" + bucket + "/results/exec/1.json"; uri != want {
		t.Errorf("Put = %q, want %q", uri, want)
	}
	if got, err := st.Get(ctx, uri); err != nil || string(got) != `{"big":true}` {
		t.Errorf("Get: %q %v", got, err)
	}
}

// testMotoURLWithTokensSecret: the database from a URL, only tokens from AWS.
func testMotoURLWithTokensSecret(t *testing.T, m *motoFixture) {
	m.secret("noetl/url/tokens", `{"api":["a"]}`)
	c, err := Load(context.Background(), envOf(m.env(EnvDatabaseURL, localDB, EnvAPITokensSecretARN, "noetl/url/tokens")))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.ClusterDSN != localDB || c.Tokens.Scopes("a") != ScopeAPI {
		t.Errorf("cluster %q tokens %+v", c.ClusterDSN, c.Tokens)
	}
}

func testMotoErrors(t *testing.T, m *motoFixture) {
	noHost := m.secret("noetl/err/nohost", `{"username":"u","password":"p"}`)
	mysql := m.secret("noetl/err/mysql", `{"username":"u","password":"p","host":"h","dbname":"d","engine":"mysql"}`)
	empty := m.secret("noetl/err/emptytokens", `{"api":"","worker":[]}`)
	badTok := m.secret("noetl/err/badtokens", `{"owner":"x"}`)
	badNATS := m.secret("noetl/err/badnats", `hunter2`)
	m.param("/noetl/err/nocreds", `{"cluster":{"host":"c","dbname":"d"}}`)
	m.param("/noetl/err/badmap", `{"cluster":{"host":"c","dbname":"d","user":"x"}}`)
	m.param("/noetl/err/missing-shard-secret", `{"cluster":{"host":"c","dbname":"d"},"shards":[{"host":"s","dbname":"d","secret_arn":"noetl/err/nope"}]}`)

	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing db secret", m.env(EnvDBSecretARN, "noetl/err/nope", EnvAllowOpen, "true"),
			[]string{EnvDBSecretARN, `reading secret "noetl/err/nope"`, "secretsmanager:GetSecretValue"}},
		{"secret without host", m.env(EnvDBSecretARN, noHost, EnvAllowOpen, "true"),
			[]string{EnvDBSecretARN, "no host or dbname", EnvShardMapParam}},
		{"mysql secret", m.env(EnvDBSecretARN, mysql, EnvAllowOpen, "true"),
			[]string{EnvDBSecretARN, `engine is "mysql"`}},
		{"missing parameter", m.env(EnvDBSecretARN, noHost, EnvShardMapParam, "/noetl/err/nope", EnvAllowOpen, "true"),
			[]string{EnvShardMapParam, `reading SSM parameter "/noetl/err/nope"`, "ssm:GetParameter"}},
		{"map without credentials", m.env(EnvShardMapParam, "/noetl/err/nocreds", EnvAllowOpen, "true"),
			[]string{EnvShardMapParam, "cluster has no secret_arn", EnvDBSecretARN + " is not set"}},
		{"map unknown field", m.env(EnvDBSecretARN, noHost, EnvShardMapParam, "/noetl/err/badmap", EnvAllowOpen, "true"),
			[]string{EnvShardMapParam, `unknown field "user"`}},
		{"missing shard secret", m.env(EnvDBSecretARN, noHost, EnvShardMapParam, "/noetl/err/missing-shard-secret", EnvAllowOpen, "true"),
			[]string{EnvShardMapParam, "shards[0].secret_arn", `reading secret "noetl/err/nope"`}},
		{"empty tokens secret in Lambda", m.env(EnvDatabaseURL, localDB, EnvAPITokensSecretARN, empty),
			[]string{"holds no token", EnvAllowOpen + "=true"}},
		{"unknown tokens key", m.env(EnvDatabaseURL, localDB, EnvAPITokensSecretARN, badTok),
			[]string{EnvAPITokensSecretARN, `unknown key "owner"`}},
		{"bad nats secret", m.env(EnvDatabaseURL, localDB, EnvAllowOpen, "true", EnvNATSURL, "nats://n:4222", EnvNATSCredsSecretARN, badNATS),
			[]string{EnvNATSCredsSecretARN, "neither a NATS creds file"}},
		{"no region", map[string]string{EnvAWSEndpointURL: m.url, EnvDBSecretARN: noHost},
			[]string{"no AWS region", "set " + EnvAWSRegion}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), envOf(tc.env))
			if err == nil {
				t.Fatalf("Load succeeded, want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}
