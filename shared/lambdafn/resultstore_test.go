package lambdafn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/resultstore"
)

// TestFromEnvResultStore: NOETL_RESULT_STORE is opened at cold start, and a
// store that cannot be opened fails the cold start naming the variable.
func TestFromEnvResultStore(t *testing.T) {
	mototest.IsolateSDK(t) // no AWS_REGION or ~/.aws from this machine
	ctx := context.Background()
	aFile := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// These fail before the database is opened: nothing listens on it.
	base := map[string]string{
		"NOETL_DATABASE_URL": "postgres://noetl@127.0.0.1:1/noetl", "NOETL_ALLOW_OPEN": "true",
		"AWS_LAMBDA_FUNCTION_NAME": "noetl-ci-ingest",
	}
	for _, tc := range []struct {
		name, store string
		env         map[string]string
		want        []string
	}{
		{"relative dir", "file://results", nil, []string{config.EnvResultStore, "file:///absolute/dir"}},
		{"no bucket", "s3:///results", nil, []string{config.EnvResultStore, "no bucket"}},
		{"dir not creatable", "file://" + aFile + "/results", nil, []string{config.EnvResultStore, "result store", "not a directory"}},
		{"s3 without a region", "s3://noetl-results/results", nil, []string{config.EnvResultStore, "no AWS region", "AWS_REGION"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{config.EnvResultStore: tc.store}
			for k, v := range base {
				env[k] = v
			}
			h, closeFn, err := lambdafn.FromEnv(ctx, api.FnIngest, func(k string) string { return env[k] }, lambdafn.Env{OpenResults: lambdafn.OpenResultStore})
			if err == nil {
				closeFn()
				t.Fatalf("cold start with %s=%q succeeded (%v), want it to fail", config.EnvResultStore, tc.store, h)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}

	// OpenResultStore: none configured is no store; s3:// gets the region and
	// endpoint Load read.
	cfg, err := config.Load(ctx, func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	if st, err := lambdafn.OpenResultStore(ctx, cfg); st != nil || err != nil {
		t.Errorf("no NOETL_RESULT_STORE: store %v, %v; want none", st, err)
	}
	s3env := map[string]string{config.EnvResultStore: "s3://noetl-results/results", "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
	for k, v := range base {
		s3env[k] = v
	}
	cfg, err = config.Load(ctx, func(k string) string { return s3env[k] })
	if err != nil {
		t.Fatal(err)
	}
	st, err := lambdafn.OpenResultStore(ctx, cfg)
	if err != nil || st == nil {
		t.Fatalf("s3 store: %v %v", st, err)
	}
	if st.URL() != "s3://noetl-results/results" || !resultstore.Owns(st, "s3://noetl-results/results/e/1.json") || resultstore.Owns(st, "s3://other/results/e/1.json") {
		t.Errorf("s3 store %s owns the wrong objects", st.URL())
	}

	// A working store: the function starts and the directory exists.
	pg := devstacktest.Postgres(t, 1)
	dir := filepath.Join(t.TempDir(), "results")
	env := map[string]string{
		"NOETL_DATABASE_URL": pg.ClusterDSN, "NOETL_MIGRATE_ON_START": "true", "NOETL_DB_SSLMODE": "disable",
		"NOETL_ALLOW_OPEN": "true", "AWS_LAMBDA_FUNCTION_NAME": "noetl-ci-ingest", config.EnvResultStore: "file://" + dir,
	}
	h, closeFn, err := lambdafn.FromEnv(ctx, api.FnIngest, func(k string) string { return env[k] }, lambdafn.Env{OpenResults: lambdafn.OpenResultStore})
	if err != nil {
		t.Fatalf("cold start with a file store: %v", err)
	}
	defer closeFn()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("the store's directory was not created: %v", err)
	}
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, []byte(`{"health": true}`))
	if err != nil || !strings.Contains(string(out), `"status":"ok"`) {
		t.Fatalf("health: %s %v", out, err)
	}

	// A function whose main passes no opener (every one but ingest) ignores
	// the variable: it never reads stored results, and does not link S3.
	other := filepath.Join(t.TempDir(), "other")
	env[config.EnvResultStore] = "file://" + other
	_, closeStatus, err := lambdafn.FromEnv(ctx, api.FnStatus, func(k string) string { return env[k] }, lambdafn.Env{})
	if err != nil {
		t.Fatalf("status with %s set: %v", config.EnvResultStore, err)
	}
	closeStatus()
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("the status function opened the result store (%v)", err)
	}
}
