package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/tools/duckdb"
	"github.com/noetl-go/noetl/shared/worker"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dataDirFlag is --data-dir of the commands that run workers.
func dataDirFlag(fs *flag.FlagSet) *string {
	return fs.String("data-dir", os.Getenv("NOETL_DATA_DIR"), "where duckdb steps keep their default database files, one per execution (env NOETL_DATA_DIR; default <temp dir>/noetl-data)")
}

// allowLinkLocalFlag is --allow-link-local of the commands that run workers.
func allowLinkLocalFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("allow-link-local", tools.AllowLinkLocalFromEnv(), "let http, transfer and script-source steps reach link-local and cloud metadata\naddresses such as 169.254.169.254 (env "+tools.LinkLocalEnv+"=true); default: refused")
}

// toolUserFlag is --tool-user of the commands that run workers.
func toolUserFlag(fs *flag.FlagSet) *string {
	return fs.String("tool-user", envOr("NOETL_TOOL_USER", tools.DefaultToolUser()),
		"run python and shell steps as this user (env NOETL_TOOL_USER); default nobody when running as root,\nso steps cannot read the worker's tokens or root-only credential files; --tool-user= runs them as the worker")
}

func runWorker(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	server := fs.String("server", envOr("NOETL_SERVER_URL", "http://127.0.0.1:8082"), "control plane URL (env NOETL_SERVER_URL)")
	token := fs.String("token", os.Getenv("NOETL_WORKER_TOKEN"), "worker token (env NOETL_WORKER_TOKEN)")
	apiToken := fs.String("api-token", os.Getenv("NOETL_API_TOKEN"), "api token the playbook tool uses to start and read child executions (env NOETL_API_TOKEN; default the worker token)")
	natsURL := fs.String("nats", envOr("NOETL_NATS_URL", nats.DefaultURL), "NATS URL (env NOETL_NATS_URL)")
	pool := fs.String("pool", envOr("NOETL_POOL", notify.PoolShared), "worker pool to serve (env NOETL_POOL)")
	concurrency := fs.Int("concurrency", worker.DefaultConcurrency, "commands run at once")
	host, _ := os.Hostname()
	id := fs.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "worker id")
	python := fs.String("python", envOr("NOETL_PYTHON", "python3"), "python interpreter (env NOETL_PYTHON)")
	resultStore := fs.String("result-store", os.Getenv("NOETL_RESULT_STORE"), "where results too large to post inline go, file:///dir or s3://bucket/prefix: the server's store (env NOETL_RESULT_STORE);\nempty: the worker hands them to the server (PUT /api/result, up to 5 MiB each; a larger one fails its step, naming this flag)")
	inlineLimit := fs.Int("inline-limit", worker.DefaultInlineLimit, "largest result (bytes of JSON) posted inline")
	dataDir := dataDirFlag(fs)
	toolUser := toolUserFlag(fs)
	allowLinkLocal := allowLinkLocalFlag(fs)
	if code, ok := flagsOnly(fs, args, "worker [flags]", "Runs a worker: pulls commands of a pool from NATS, claims and runs them.\nCredentials for auth: aliases come from NOETL_CREDENTIALS_FILE and NOETL_CREDENTIAL_<ALIAS> (R-P4).\n"+
		"Give tokens in the environment, not as flags: any user can read a process's arguments.", stderr); !ok {
		return code
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	nc, err := connectNATS(*natsURL, *id, log)
	if err != nil {
		return fail(stderr, "worker", fmt.Errorf("connect to NATS at %s: %w (give the server's NATS with --nats or NOETL_NATS_URL; noetl serve prints it)", config.RedactDSN(*natsURL), err))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	var results resultstore.Store
	if *resultStore != "" {
		if results, err = resultstore.Open(ctx, *resultStore, resultstore.Options{}); err != nil {
			return fail(stderr, "worker", err)
		}
	}
	w, err := worker.Standard{Server: *server, Token: *token, APIToken: *apiToken, JS: js, Pool: *pool, ID: *id,
		Concurrency: *concurrency, Python: *python, Results: results, InlineLimit: *inlineLimit, Logger: log,
		ToolUser: *toolUser, DuckDB: duckdb.New(), DataDir: *dataDir, AllowLinkLocal: *allowLinkLocal}.Build(ctx)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	// Everything secret has been read: drop it from the environment and keep
	// the tools out of this process's /proc entries.
	if err := worker.Protect(); err != nil {
		return fail(stderr, "worker", err)
	}
	if err := w.Run(ctx); err != nil {
		return fail(stderr, "worker", err)
	}
	return exitOK
}

// connectNATS connects the worker to NATS. An outage is waited out, at start
// as later: nats.go keeps reconnecting (every 2 s), Run retries the pool's
// consumer with backoff, and both are logged; only a URL that cannot work is
// an error.
func connectNATS(url, id string, log *slog.Logger) (*nats.Conn, error) {
	where := config.RedactDSN(url)
	connected := func(*nats.Conn) { log.Info("connected to NATS", "nats", where) }
	nc, err := nats.Connect(url, nats.Name("noetl-worker "+id), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected; reconnecting", "nats", where, "error", err.Error())
			}
		}),
		// After a failed first attempt nats.go calls ConnectHandler, later ReconnectHandler.
		nats.ConnectHandler(connected), nats.ReconnectHandler(connected))
	if err != nil {
		return nil, err
	}
	if !nc.IsConnected() {
		log.Warn("NATS is not reachable yet; retrying", "nats", where)
	}
	return nc, nil
}

func runMigrate(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	dbURL := fs.String("database-url", os.Getenv("NOETL_DATABASE_URL"), "cluster database URL (env NOETL_DATABASE_URL)")
	shardURLs := fs.String("shard-urls", os.Getenv("NOETL_SHARD_URLS"), "comma-separated shard database URLs (env NOETL_SHARD_URLS); default: the cluster database is the only shard")
	natsURL := fs.String("nats", os.Getenv("NOETL_NATS_URL"), "NATS URL: also create the NOETL_COMMANDS stream (env NOETL_NATS_URL)")
	if code, ok := flagsOnly(fs, args, "migrate [flags]", "Applies the embedded schema migrations to the cluster and shard databases (idempotent),\nand creates the NATS stream when a NATS URL is given (R-A7).", stderr); !ok {
		return code
	}
	if *dbURL == "" {
		fmt.Fprintln(stderr, "noetl migrate: give --database-url or set NOETL_DATABASE_URL")
		return exitUsage
	}
	cfg := store.Config{ClusterDSN: *dbURL}
	if *shardURLs != "" {
		for _, u := range strings.Split(*shardURLs, ",") {
			cfg.ShardDSNs = append(cfg.ShardDSNs, strings.TrimSpace(u))
		}
	}
	if err := store.Migrate(ctx, cfg); err != nil {
		return fail(stderr, "migrate", err)
	}
	fmt.Fprintf(stdout, "migrated the cluster database and %d shard(s)\n", max(1, len(cfg.ShardDSNs)))
	if *natsURL != "" {
		nc, err := nats.Connect(*natsURL)
		if err != nil {
			return fail(stderr, "migrate", fmt.Errorf("connect to NATS: %w", err))
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return fail(stderr, "migrate", err)
		}
		if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
			return fail(stderr, "migrate", err)
		}
		fmt.Fprintf(stdout, "stream %s ready\n", notify.StreamName)
	}
	return exitOK
}
