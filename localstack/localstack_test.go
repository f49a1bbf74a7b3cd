package localstack

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/jackc/pgx/v5/pgconn"
	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/keychain/kmsring"
	"github.com/noetl-go/noetl/shared/resultstore"
)

const hookPath = "init/ready.d/10-noetl-config.sh"

type service struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Networks    []string          `yaml:"networks"`
	Healthcheck yaml.Node         `yaml:"healthcheck"`
}

type composeFile struct {
	Name     string             `yaml:"name"`
	Services map[string]service `yaml:"services"`
	Networks map[string]struct {
		Name string `yaml:"name"`
	} `yaml:"networks"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true) // a misspelt key would silently do nothing in compose
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// containerPorts returns the container side of each "host:port:container" or
// "host-range:container-range" mapping (ranges expanded).
func containerPorts(t *testing.T, s service) []string {
	t.Helper()
	var out []string
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		c := parts[len(parts)-1]
		if lo, hi, ok := strings.Cut(c, "-"); ok {
			if len(lo) != len(hi) {
				t.Fatalf("port range %q", p)
			}
			out = append(out, lo, hi) // ends are enough for our checks
			continue
		}
		out = append(out, c)
	}
	return out
}

type envFile map[string]map[string]string // "Parameters" or a function logical id -> name -> value

func readEnvJSON(t *testing.T) envFile {
	t.Helper()
	b, err := os.ReadFile("env.json")
	if err != nil {
		t.Fatal(err)
	}
	var e envFile
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("env.json: %v", err)
	}
	return e
}

type configEnv struct {
	Functions map[string][]string `json:"functions"`
	SAMOnly   []string            `json:"sam_only"`
}

func readConfigEnv(t *testing.T) configEnv {
	t.Helper()
	b, err := os.ReadFile("../config-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var c configEnv
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

var logicalIDs = map[string]string{
	"CatalogFunction": "catalog", "ExecuteFunction": "execute", "IngestFunction": "ingest", "ClaimFunction": "claim",
	"StatusFunction": "status", "ReplayFunction": "replay", "OutboxFunction": "outbox",
}

func TestCompose(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"localstack", "postgres", "nats"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no %s service", name)
		}
	}
	ls := c.Services["localstack"]
	repo, tag, ok := strings.Cut(ls.Image, ":")
	if !ok || !strings.HasPrefix(repo, "localstack/") || tag == "" || tag == "latest" || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(tag) {
		t.Errorf("localstack image %q: pin an exact x.y.z tag", ls.Image)
	}
	if !strings.Contains(ls.Environment["LOCALSTACK_AUTH_TOKEN"], "${LOCALSTACK_AUTH_TOKEN") {
		t.Errorf("LOCALSTACK_AUTH_TOKEN must come from the user's environment, got %q", ls.Environment["LOCALSTACK_AUTH_TOKEN"])
	}
	if got := c.Services["postgres"].Image; got != "postgres:15" {
		t.Errorf("postgres image %q, want postgres:15", got)
	}
	if !slices.Contains(c.Services["nats"].Command, "-js") {
		t.Errorf("nats command %q lacks -js (JetStream)", c.Services["nats"].Command)
	}
	net := c.Networks["noetl"].Name
	if net == "" {
		t.Fatal("the noetl network needs a fixed name (sam local --docker-network uses it)")
	}
	if ls.Environment["LAMBDA_DOCKER_NETWORK"] != net {
		t.Errorf("LAMBDA_DOCKER_NETWORK %q, want the compose network %q", ls.Environment["LAMBDA_DOCKER_NETWORK"], net)
	}
	for name, s := range c.Services {
		if !slices.Equal(s.Networks, []string{"noetl"}) {
			t.Errorf("service %s networks %q, want [noetl]", name, s.Networks)
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	if !slices.Contains(ls.Volumes, "./init/ready.d:/etc/localstack/init/ready.d:ro") {
		t.Errorf("localstack does not mount the init hooks: %q", ls.Volumes)
	}
}

// TestEnvFile: env.json sets only names the template declares (SAM ignores
// others) and shared/config reads, and its endpoints match the compose ports.
func TestEnvFile(t *testing.T) {
	e := readEnvJSON(t)
	ce := readConfigEnv(t)
	c := readCompose(t)
	declared := map[string]map[string]bool{} // function -> names template.yaml declares
	anyFn := map[string]bool{}
	for fn, names := range ce.Functions {
		declared[fn] = map[string]bool{}
		for _, n := range append(slices.Clone(names), ce.SAMOnly...) {
			declared[fn][n] = true
			anyFn[n] = true
		}
	}
	for key, vars := range e {
		fn, isFn := logicalIDs[key]
		if key != "Parameters" && !isFn {
			t.Errorf("env.json key %q: use Parameters or a function logical id", key)
			continue
		}
		for n := range vars {
			if key == "Parameters" && !anyFn[n] || isFn && !declared[fn][n] {
				t.Errorf("env.json %s sets %s, which template.yaml does not declare there (config-env.json): sam local would ignore it", key, n)
			}
		}
	}
	p := e["Parameters"]

	checkURL := func(name, svc string) {
		u, err := url.Parse(p[name])
		if err != nil || u.Hostname() != svc {
			t.Errorf("%s=%q: want the compose service %q as host", name, p[name], svc)
			return
		}
		if !slices.Contains(containerPorts(t, c.Services[svc]), u.Port()) {
			t.Errorf("%s port %s is not a port of the %s service (%q)", name, u.Port(), svc, c.Services[svc].Ports)
		}
	}
	checkURL("AWS_ENDPOINT_URL", "localstack")
	checkURL("NOETL_NATS_URL", "nats")
	if u, _ := url.Parse(p["NOETL_NATS_URL"]); !slices.Contains(c.Services["nats"].Command, u.Port()) {
		t.Errorf("NOETL_NATS_URL port %s is not the one nats listens on (%q)", u.Port(), c.Services["nats"].Command)
	}
	if p["NOETL_DB_SSLMODE"] != "disable" {
		t.Errorf("NOETL_DB_SSLMODE=%q: the postgres:15 container has no TLS, use disable", p["NOETL_DB_SSLMODE"])
	}
	if u, err := url.Parse(p["NOETL_SERVER_URL"]); err != nil || u.Port() != "3000" {
		t.Errorf("NOETL_SERVER_URL=%q: workers reach sam local start-api on port 3000", p["NOETL_SERVER_URL"])
	}
	// The functions run in containers: a file:// store would not be shared
	// with the workers.
	if u, err := url.Parse(p["NOETL_RESULT_STORE"]); err != nil || u.Scheme != "s3" || u.Host == "" {
		t.Errorf("NOETL_RESULT_STORE=%q: want s3://bucket/prefix in LocalStack", p["NOETL_RESULT_STORE"])
	}
}

var (
	putSecretRE = regexp.MustCompile(`(?m)^put_secret (\S+) '([^']*)'`)
	putParamRE  = regexp.MustCompile(`(?m)^awslocal ssm put-parameter .*--name (\S+) --value '([^']*)'`)
	bucketRE    = regexp.MustCompile(`(?m)^create_bucket (\S+)$`)
	keyAliasRE  = regexp.MustCompile(`(?m)^create_key_alias (\S+)$`)
	createDBRE  = regexp.MustCompile(`(?m)^CREATE DATABASE (\w+);`)
)

type hooks struct {
	secrets map[string]string // name -> secret string
	params  map[string]string
	buckets []string
	keys    []string // KMS key aliases
}

func readHooks(t *testing.T) hooks {
	t.Helper()
	b, err := os.ReadFile(hookPath)
	if err != nil {
		t.Fatal(err)
	}
	h := hooks{secrets: map[string]string{}, params: map[string]string{}}
	for _, m := range putSecretRE.FindAllStringSubmatch(string(b), -1) {
		h.secrets[m[1]] = m[2]
	}
	for _, m := range putParamRE.FindAllStringSubmatch(string(b), -1) {
		h.params[m[1]] = m[2]
	}
	for _, m := range bucketRE.FindAllStringSubmatch(string(b), -1) {
		h.buckets = append(h.buckets, m[1])
	}
	sort.Strings(h.buckets)
	for _, m := range keyAliasRE.FindAllStringSubmatch(string(b), -1) {
		h.keys = append(h.keys, m[1])
	}
	if len(h.secrets) == 0 || len(h.params) == 0 || len(h.buckets) == 0 || len(h.keys) == 0 {
		t.Fatalf("%s: found secrets %v, parameters %v and buckets %v; keep put_secret NAME 'JSON', awslocal ssm put-parameter ... --name NAME --value 'JSON' , create_bucket NAME and create_key_alias ALIAS literal",
			hookPath, h.secrets, h.params, h.buckets)
	}
	return h
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wanted lists the secrets and parameters env.json points the functions at.
func wanted(p map[string]string) (secrets, params []string) {
	for _, n := range []string{"NOETL_DB_SECRET_ARN", "NOETL_API_TOKENS_SECRET_ARN", "NOETL_NATS_CREDS_SECRET_ARN"} {
		if p[n] != "" {
			secrets = append(secrets, p[n])
		}
	}
	if p["NOETL_SHARD_MAP_PARAM"] != "" {
		params = append(params, p["NOETL_SHARD_MAP_PARAM"])
	}
	sort.Strings(secrets)
	return secrets, params
}

// wantedBuckets lists the buckets env.json points the functions at.
func wantedBuckets(t *testing.T, p map[string]string) []string {
	t.Helper()
	var out []string
	if v := p["NOETL_RESULT_STORE"]; v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "s3" {
			t.Fatalf("NOETL_RESULT_STORE=%q: want s3://bucket/prefix", v)
		}
		out = append(out, u.Host)
	}
	return out
}

// TestHooks: the hooks create exactly what env.json names, and the database
// endpoints and credentials in them are the compose postgres's.
func TestHooks(t *testing.T) {
	h := readHooks(t)
	p := readEnvJSON(t)["Parameters"]
	c := readCompose(t)
	ws, wp := wanted(p)
	if got := keys(h.secrets); !slices.Equal(got, ws) {
		t.Errorf("hooks create secrets %q, env.json points at %q", got, ws)
	}
	if got := keys(h.params); !slices.Equal(got, wp) {
		t.Errorf("hooks create parameters %q, env.json points at %q", got, wp)
	}
	if wb := wantedBuckets(t, p); !slices.Equal(h.buckets, wb) {
		t.Errorf("hooks create buckets %q, env.json points at %q", h.buckets, wb)
	}
	if want := []string{p["NOETL_KEYCHAIN_KMS_KEY_ID"]}; !slices.Equal(h.keys, want) {
		t.Errorf("hooks create KMS key aliases %q, env.json points at %q", h.keys, want)
	}

	pg := c.Services["postgres"]
	sql, err := os.ReadFile("postgres/init.sql")
	if err != nil {
		t.Fatal(err)
	}
	dbs := []string{pg.Environment["POSTGRES_DB"]}
	for _, m := range createDBRE.FindAllStringSubmatch(string(sql), -1) {
		dbs = append(dbs, m[1])
	}
	checkEndpoint := func(what string, e map[string]any) {
		if e["host"] != "postgres" || !slices.Contains(containerPorts(t, pg), strings.TrimSuffix(strings.TrimPrefix(jsonText(e["port"]), `"`), `"`)) {
			t.Errorf("%s: host %v port %v, want the postgres service and one of its ports %q", what, e["host"], e["port"], pg.Ports)
		}
		if db, _ := e["dbname"].(string); !slices.Contains(dbs, db) {
			t.Errorf("%s: dbname %v is neither POSTGRES_DB nor created by postgres/init.sql (%q)", what, e["dbname"], dbs)
		}
	}
	var db map[string]any
	if err := json.Unmarshal([]byte(h.secrets[p["NOETL_DB_SECRET_ARN"]]), &db); err != nil {
		t.Fatalf("DB secret: %v", err)
	}
	if db["username"] != pg.Environment["POSTGRES_USER"] || db["password"] != pg.Environment["POSTGRES_PASSWORD"] {
		t.Errorf("DB secret credentials %v/%v, want POSTGRES_USER/POSTGRES_PASSWORD", db["username"], db["password"])
	}
	checkEndpoint("DB secret", db)
	var sm struct {
		Cluster map[string]any   `json:"cluster"`
		Shards  []map[string]any `json:"shards"`
	}
	if err := json.Unmarshal([]byte(h.params[p["NOETL_SHARD_MAP_PARAM"]]), &sm); err != nil {
		t.Fatalf("shard map: %v", err)
	}
	checkEndpoint("shard map cluster", sm.Cluster)
	for i, s := range sm.Shards {
		checkEndpoint("shard map shards["+jsonText(i)+"]", s)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHooksAgainstMoto runs the real hook script (awslocal = aws CLI with
// --endpoint-url) against moto_server, then loads the functions'
// configuration from env.json exactly as a function would.
func TestHooksAgainstMoto(t *testing.T) {
	awsBin, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the aws CLI is not on PATH and CI is set: %v", err)
		}
		t.Skip("the aws CLI is not on PATH; skipping the run of the LocalStack hooks against moto")
	}
	motoURL := mototest.Start(t)
	mototest.IsolateSDK(t)

	bin := t.TempDir()
	shim := "#!/bin/sh\nexec " + awsBin + " --endpoint-url \"$AWS_ENDPOINT_URL\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "awslocal"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() {
		cmd := exec.Command("bash", hookPath)
		cmd.Env = append(os.Environ(),
			"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"AWS_ENDPOINT_URL="+motoURL, "AWS_DEFAULT_REGION="+mototest.Region)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", hookPath, err, out)
		}
	}
	run()
	run() // again, as on a LocalStack restart with persistence: it must not fail

	ctx := context.Background()
	cfg := mototest.Config(motoURL)
	ls, err := secretsmanager.NewFromConfig(cfg).ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var gotSecrets []string
	for _, s := range ls.SecretList {
		gotSecrets = append(gotSecrets, *s.Name)
	}
	sort.Strings(gotSecrets)
	dp, err := ssm.NewFromConfig(cfg).DescribeParameters(ctx, &ssm.DescribeParametersInput{})
	if err != nil {
		t.Fatal(err)
	}
	var gotParams []string
	for _, p := range dp.Parameters {
		gotParams = append(gotParams, *p.Name)
	}
	lb, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var gotBuckets []string
	for _, b := range lb.Buckets {
		gotBuckets = append(gotBuckets, *b.Name)
	}
	sort.Strings(gotBuckets)
	p := readEnvJSON(t)["Parameters"]
	ws, wp := wanted(p)
	if !slices.Equal(gotSecrets, ws) || !slices.Equal(gotParams, wp) {
		t.Errorf("after the hook: secrets %q parameters %q; env.json points at %q and %q", gotSecrets, gotParams, ws, wp)
	}
	if wb := wantedBuckets(t, p); !slices.Equal(gotBuckets, wb) {
		t.Errorf("after the hook: buckets %q; env.json points at %q", gotBuckets, wb)
	}

	env := map[string]string{}
	for k, v := range p {
		env[k] = v
	}
	env["AWS_ENDPOINT_URL"] = motoURL // the functions reach LocalStack as http://localstack:4566
	env["AWS_REGION"] = mototest.Region
	env["AWS_LAMBDA_FUNCTION_NAME"] = "noetl-local-ingest"
	c, err := config.Load(ctx, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config.Load with env.json: %v", err)
	}
	wantDBs := []string{"noetl", "noetl_shard_0", "noetl_shard_1"}
	for i, dsn := range append([]string{c.ClusterDSN}, c.ShardDSNs...) {
		pc, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("DSN %d: %v", i, err)
		}
		if pc.Host != "postgres" || pc.Port != 5432 || pc.User != "noetl" || pc.Password != "noetl" || pc.Database != wantDBs[i] || pc.TLSConfig != nil {
			t.Errorf("DSN %d = %s, want noetl:noetl@postgres:5432/%s without TLS", i, config.RedactDSN(dsn), wantDBs[i])
		}
	}
	if len(c.ShardDSNs) != 2 {
		t.Errorf("%d shards, want 2", len(c.ShardDSNs))
	}
	if c.Tokens.Scopes("local-worker-token") != config.ScopeWorker || c.Open() {
		t.Errorf("tokens %+v", c.Tokens)
	}
	if c.NATS.URL != "nats://nats:4222" || c.Stage != "local" {
		t.Errorf("nats %q stage %q", c.NATS.URL, c.Stage)
	}

	// The ingest function's result store works in the bucket the hook made,
	// opened as lambdafn opens it (shared/config's SDK settings).
	awsCfg, err := c.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := resultstore.Open(ctx, c.ResultStore, resultstore.Options{AWS: &awsCfg})
	if err != nil {
		t.Fatalf("result store %q: %v", c.ResultStore, err)
	}
	uri, err := rs.Put(ctx, "e1/step.json", []byte(`{"rows": 100000}`))
	if err != nil {
		t.Fatalf("Put into %s: %v", c.ResultStore, err)
	}
	if got, err := rs.Get(ctx, uri); err != nil || string(got) != `{"rows": 100000}` {
		t.Errorf("Get %s: %q %v", uri, got, err)
	}

	// The keychain function seals and opens credentials with the key the
	// hook made, through its alias, as functions/keychain opens its ring.
	kc := maps.Clone(env)
	kc["AWS_LAMBDA_FUNCTION_NAME"] = "noetl-local-keychain"
	kcfg, err := config.Load(ctx, func(k string) string { return kc[k] })
	if err != nil {
		t.Fatal(err)
	}
	kAWS, err := kcfg.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := kmsring.New(kAWS, kcfg.KeychainKMSKeyID)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := keychain.Seal(ctx, ring, "credential:pg_local", []byte(`{"password": "local-secret-pw"}`))
	if err != nil {
		t.Fatalf("seal with %s: %v", kcfg.KeychainKMSKeyID, err)
	}
	if got, err := keychain.Open(ctx, ring, "credential:pg_local", sealed); err != nil || string(got) != `{"password": "local-secret-pw"}` {
		t.Errorf("open: %q %v", got, err)
	}
}
