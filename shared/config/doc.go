// Package config loads a function's configuration: from environment variables
// locally, and in AWS from Secrets Manager and SSM Parameter Store named by
// environment variables.
//
// Load takes a getenv function instead of reading the process environment so
// that callers (tests, `noetl dev` injecting a throwaway database URL) decide
// what the environment is. AWS clients are built with aws-sdk-go-v2's
// config.LoadDefaultConfig only when a secret ARN or parameter name is set; the
// SDK takes credentials from its default chain (the Lambda role), AWS_REGION and
// AWS_ENDPOINT_URL are passed from getenv so moto/LocalStack work.
// Config.AWSConfig builds the same SDK configuration for the functions' other
// AWS calls (the S3 result store).
//
// config-env.json at the repository root lists every name below by where it is
// set (deployed function, SAM only, local only, runtime); a test keeps it and
// Load in step, and infra/ and template.yaml set exactly those names.
//
// # Contract
//
//	Variable                      Meaning                                                           Default
//	NOETL_STAGE                   deployment stage; the `Stage` dimension of the NoETL EMF metrics   local
//	NOETL_DATABASE_URL            cluster database DSN (URL or key=value); the only shard when        -
//	                              NOETL_SHARD_URLS is empty. Local mode.
//	NOETL_SHARD_URLS              comma-separated shard DSNs, index = shard index. Local mode.        (cluster only)
//	NOETL_DB_SECRET_ARN           Secrets Manager secret (ARN or name), RDS JSON shape               -
//	                              {username, password, host, port, dbname, engine}. AWS mode.
//	NOETL_SHARD_MAP_PARAM         SSM parameter name; value JSON {"cluster": E, "shards": [E…]},     (cluster only)
//	                              E = {host, port?, dbname, secret_arn?}; an entry without
//	                              secret_arn uses NOETL_DB_SECRET_ARN's username/password; host,
//	                              port and dbname always come from the entry (the RDS Proxy).
//	NOETL_DB_SSLMODE              sslmode of DSNs built from secrets; added to URL DSNs that name     require in Lambda,
//	                              none when set explicitly                                           disable elsewhere
//	NOETL_DB_MAX_CONNS            pgx pool size per database                                          2 in Lambda, 10 elsewhere
//	NOETL_MIGRATE_ON_START        apply migrations at cold start (never in production by default)     false
//	NOETL_NATS_URL                NATS server URL(s), comma-separated; empty disables NATS            (disabled)
//	NOETL_NATS_CREDS_SECRET_ARN   secret holding NATS auth: a creds file (JWT + nkey seed), or JSON   (none)
//	                              {"user","password"} or {"token"}
//	NOETL_SERVER_URL              base URL of the API that NATS command bodies carry for workers      (empty: derive from request)
//	NOETL_API_TOKEN               tokens with scope api (users), comma-separated. Local mode.         -
//	NOETL_WORKER_TOKEN            tokens with scope worker (claim, heartbeat, events). Local mode.     -
//	NOETL_INTERNAL_API_TOKEN      tokens with scope internal (/api/internal/*), NoETL's name; they    -
//	                              hold the worker scope too (NoETL's workers send it). Local.
//	NOETL_INTERNAL_TOKEN          the earlier name of NOETL_INTERNAL_API_TOKEN; its tokens still count -
//	NOETL_ADMIN_TOKEN             tokens with scope admin (the database routes: POST /api/db/init,     (none: those
//	                              POST /api/postgres/execute); they hold the api scope too. Local.    routes 403)
//	NOETL_API_TOKENS_SECRET_ARN   secret JSON {"api","worker","internal","admin"}, each a string or a  -
//	                              list of strings. AWS mode.
//	NOETL_ALLOW_OPEN              let a Lambda start with no token at all (no authentication)         false
//	NOETL_TOKENLESS_WORKER_NETWORKS
//	                              networks (CIDRs or addresses, comma-separated) whose requests       (none)
//	                              WITHOUT an Authorization header get the worker scope: the worker
//	                              routes only, for NoETL's Python worker, which sends no token. Never
//	                              0.0.0.0/0. Local mode: refused in Lambda (docs/noetl-compat.md).
//	NOETL_LEASE_SECONDS           command claim lease (R-L1)                                          60
//	NOETL_MAX_BODY_BYTES          request body limit; at most 6 MiB in Lambda (sync payload limit)    1048576
//	NOETL_LOG_LEVEL               debug | info | warn | error                                         info
//	NOETL_CORS_ORIGINS            comma-separated allowed origins, or *; empty = same-origin only.    (empty)
//	                              A request carrying another Origin is refused (403)
//	NOETL_ALLOWED_HOSTS           host names the local server answers besides its listen address,    (none)
//	                              loopback names and NOETL_SERVER_URL's host; * = any. Other Host
//	                              headers get 421 (DNS rebinding). Local mode
//	NOETL_RESULT_STORE            where results posted by reference live (worker.md §1):              (none: such
//	                              file:///absolute/dir on one machine, s3://bucket/prefix in AWS      results get 422)
//	                              (set on the ingest function only); the server reads only URIs
//	                              inside it
//	NOETL_KEYCHAIN_KMS_KEY_ID     KMS key (id, ARN, alias) sealing the keychain's credentials; set    (none: credentials
//	                              on the keychain function only, the one function granted the key     cannot be stored
//	NOETL_KEYCHAIN_KEY_FILE       a key file doing the same on one machine (absolute path, mode       or opened)
//	                              0600; noetl dev/serve create it). Local only; not with the KMS key
//	NOETL_SCHEDULER_GROUP         EventBridge Scheduler group of the schedules' entries (set on the   (none: no
//	                              schedules function only, with the two below; docs/schedules.md)     entries)
//	NOETL_SCHEDULER_TARGET_ARN    the function the entries invoke (the schedules function)            (none)
//	NOETL_SCHEDULER_ROLE_ARN      the role EventBridge Scheduler invokes it with                      (none)
//	NOETL_COMMAND_BUS             where command notifications go: nats (NATS only), ehdb (NoETL's     nats
//	                              command bus only, as NoETL's Rust server: NoETL's Rust worker
//	                              >= 5.91.2 is fed, nothing listening on NATS is), shadow (both).
//	                              Local mode: refused in Lambda (docs/noetl-compat.md)
//	NOETL_COMMAND_BUS_WRITER_ADDRS
//	                              the bus writers' ingest addresses, <shard>@host:port,              (none; required
//	                              comma-separated (NoETL's host-mode worker's ingest bind)           with ehdb/shadow)
//	NOETL_COMMAND_SHARD_COUNT     the bus's shard count, as the writers' own; an execution's          1
//	                              commands go to the writer of its shard (XXH64 of its id)
//	AWS_LAMBDA_FUNCTION_NAME      set by the Lambda runtime: selects the Lambda defaults above        -
//	AWS_REGION                    region for Secrets Manager / SSM / S3                               SDK default chain
//	AWS_ENDPOINT_URL              endpoint override (moto, LocalStack)                                SDK default
//
// Go's own variables are read apart from Load, by ApplyGCDefaults at a
// function's or the CLI's start: GOGC (default DefaultGCPercent, 200, not
// Go's 100), and on Lambda GOMEMLIMIT (default 90% of
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE, which the runtime sets).
//
// Local mode (NOETL_DATABASE_URL, NOETL_*_TOKEN) and AWS mode (the *_ARN and
// *_PARAM names) cannot be mixed for the same setting: Load refuses rather than
// guess which one wins.
//
// Token scopes follow R-A3. With no token configured the local server runs open
// (and must say so); in Lambda, Load fails unless NOETL_ALLOW_OPEN=true.
package config
