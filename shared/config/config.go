package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/commandbus"
)

// Environment variable names (see the package doc for the contract).
const (
	EnvStage              = "NOETL_STAGE"
	EnvDatabaseURL        = "NOETL_DATABASE_URL"
	EnvShardURLs          = "NOETL_SHARD_URLS"
	EnvDBSecretARN        = "NOETL_DB_SECRET_ARN"
	EnvShardMapParam      = "NOETL_SHARD_MAP_PARAM"
	EnvDBSSLMode          = "NOETL_DB_SSLMODE"
	EnvDBMaxConns         = "NOETL_DB_MAX_CONNS"
	EnvMigrateOnStart     = "NOETL_MIGRATE_ON_START"
	EnvNATSURL            = "NOETL_NATS_URL"
	EnvNATSCredsSecretARN = "NOETL_NATS_CREDS_SECRET_ARN"
	EnvServerURL          = "NOETL_SERVER_URL"
	EnvAPIToken           = "NOETL_API_TOKEN"
	EnvWorkerToken        = "NOETL_WORKER_TOKEN"
	EnvInternalToken      = "NOETL_INTERNAL_API_TOKEN" // NoETL's name for it
	// EnvInternalTokenOld is this project's earlier name, still read (its
	// tokens join EnvInternalToken's) so existing deployments keep working.
	EnvInternalTokenOld   = "NOETL_INTERNAL_TOKEN"
	EnvAPITokensSecretARN = "NOETL_API_TOKENS_SECRET_ARN"
	EnvAllowOpen          = "NOETL_ALLOW_OPEN"
	EnvLeaseSeconds       = "NOETL_LEASE_SECONDS"
	EnvMaxBodyBytes       = "NOETL_MAX_BODY_BYTES"
	EnvLogLevel           = "NOETL_LOG_LEVEL"
	EnvCORSOrigins        = "NOETL_CORS_ORIGINS"
	EnvResultStore        = "NOETL_RESULT_STORE"
	EnvTokenlessWorkers   = "NOETL_TOKENLESS_WORKER_NETWORKS"
	EnvAllowedHosts       = "NOETL_ALLOWED_HOSTS"
	EnvKeychainKMSKeyID   = "NOETL_KEYCHAIN_KMS_KEY_ID"
	EnvKeychainKeyFile    = "NOETL_KEYCHAIN_KEY_FILE"
	// The EventBridge Scheduler entries the schedules function keeps in
	// step with the schedules table (docs/schedules.md): their group, the
	// function they invoke, and the role they invoke it with.
	EnvSchedulerGroup     = "NOETL_SCHEDULER_GROUP"
	EnvSchedulerTargetARN = "NOETL_SCHEDULER_TARGET_ARN"
	EnvSchedulerRoleARN   = "NOETL_SCHEDULER_ROLE_ARN"
	// NoETL's command bus (shared/commandbus, docs/noetl-compat.md): where
	// command notifications go besides (or instead of) NATS.
	EnvCommandBus           = commandbus.EnvMode
	EnvCommandBusWriters    = commandbus.EnvWriters
	EnvCommandBusShardCount = commandbus.EnvShardCount

	// EnvAdminToken enables the operator's database routes (ScopeAdmin).
	EnvAdminToken = "NOETL_ADMIN_TOKEN"

	EnvLambdaFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
	EnvAWSRegion          = "AWS_REGION"
	EnvAWSEndpointURL     = "AWS_ENDPOINT_URL"
)

// Defaults and limits.
const (
	DefaultStage            = "local"
	DefaultLeaseSeconds     = 60
	DefaultMaxBodyBytes     = 1 << 20
	DefaultDBMaxConnsLambda = 2
	DefaultDBMaxConnsLocal  = 10
	// MaxLambdaBodyBytes is Lambda's synchronous invocation payload limit: a
	// larger body limit could never be reached through API Gateway + Lambda.
	MaxLambdaBodyBytes = 6 << 20
	// MaxShards is the number of shard indexes an id can encode (R-I1).
	MaxShards = 1024
	// awsTimeout bounds secret/parameter reads when the caller gave no deadline,
	// so a function in a VPC without a route to AWS fails at cold start with a
	// clear error instead of hanging until the Lambda timeout.
	awsTimeout = 10 * time.Second
)

// Config is everything a function needs to start.
type Config struct {
	Stage string
	// InLambda is true when AWS_LAMBDA_FUNCTION_NAME is set; it selects the
	// Lambda defaults and forbids running open without NOETL_ALLOW_OPEN.
	InLambda bool

	// ClusterDSN is the cluster database (catalog, tokens); ShardDSNs[i] is
	// shard i. With one database both are the same DSN.
	ClusterDSN     string
	ShardDSNs      []string
	DBMaxConns     int32
	MigrateOnStart bool

	NATS NATS
	// ServerURL is what NATS command bodies carry; empty means "derive it from
	// the request" (API Gateway's domain name).
	ServerURL string

	Tokens    Tokens
	AllowOpen bool
	// TokenlessWorkers are the networks whose requests without an
	// Authorization header get the worker scope (NoETL's Python worker sends
	// no token); empty: none. Local server only: Load refuses it in Lambda.
	TokenlessWorkers []netip.Prefix

	Lease        time.Duration
	MaxBodyBytes int64
	LogLevel     slog.Level
	CORSOrigins  []string
	// AllowedHosts are the host names the local server answers besides its
	// listen address, loopback names and NOETL_SERVER_URL's host ("*": any
	// Host header; api.HostRule). Local server only.
	AllowedHosts []string

	// ResultStore is the URL of the store of results posted by reference
	// (worker.md §1): file:///absolute/dir or s3://bucket/prefix; empty =
	// none (such results are refused). Open it with resultstore.Open and,
	// for s3://, AWSConfig.
	ResultStore string

	// KeychainKMSKeyID is the KMS key (id, ARN or alias) that seals the
	// keychain's credentials (shared/keychain/kmsring); KeychainKeyFile a key
	// file doing the same on one machine. At most one is set; neither: the
	// keychain cannot store or open credentials.
	KeychainKMSKeyID string
	KeychainKeyFile  string
	// Scheduler names the EventBridge Scheduler entries of the schedules;
	// a zero Scheduler: none (a local loop fires the schedules).
	Scheduler Scheduler
	// CommandBus says whether command notifications go to NATS, to NoETL's
	// command bus writers, or to both (commandbus.Settings). Local server
	// only: Load refuses a bus mode in Lambda.
	CommandBus commandbus.Settings

	// The AWS SDK settings Load read (AWSConfig uses them).
	awsRegion, awsEndpoint string
}

// Scheduler is where the schedules' EventBridge Scheduler entries live:
// all three set, or none.
type Scheduler struct {
	Group     string // the schedule group
	TargetARN string // the schedules function the entries invoke
	RoleARN   string // the role EventBridge Scheduler invokes it with
}

// Enabled reports whether scheduler entries are configured.
func (s Scheduler) Enabled() bool { return s.Group != "" }

// NATS holds the NATS connection settings. At most one of Creds,
// User/Password and Token is set.
type NATS struct {
	URL      string
	Creds    []byte // creds file content: use nats.UserCredentialBytes
	User     string // with Password: nats.UserInfo
	Password string
	Token    string // nats.Token
}

// Enabled reports whether a NATS URL is configured.
func (n NATS) Enabled() bool { return n.URL != "" }

// AuthKind names the configured NATS authentication, for logs.
func (n NATS) AuthKind() string {
	switch {
	case len(n.Creds) > 0:
		return "creds"
	case n.User != "":
		return "user"
	case n.Token != "":
		return "token"
	}
	return "none"
}

// Open reports whether no API token at all is configured (no authentication).
func (c *Config) Open() bool { return c.Tokens.Empty() }

// LogValue keeps passwords and tokens out of logs.
func (c *Config) LogValue() slog.Value {
	shards := make([]string, len(c.ShardDSNs))
	for i, d := range c.ShardDSNs {
		shards[i] = RedactDSN(d)
	}
	return slog.GroupValue(
		slog.String("stage", c.Stage),
		slog.Bool("lambda", c.InLambda),
		slog.String("cluster", RedactDSN(c.ClusterDSN)),
		slog.Any("shards", shards),
		slog.Int("db_max_conns", int(c.DBMaxConns)),
		slog.Bool("migrate_on_start", c.MigrateOnStart),
		slog.String("nats_url", redactURLs(c.NATS.URL)),
		slog.String("nats_auth", c.NATS.AuthKind()),
		slog.String("server_url", c.ServerURL),
		slog.Int("api_tokens", len(c.Tokens.API)),
		slog.Int("worker_tokens", len(c.Tokens.Worker)),
		slog.Int("internal_tokens", len(c.Tokens.Internal)),
		slog.Int("admin_tokens", len(c.Tokens.Admin)),
		slog.Bool("open", c.Open()),
		slog.Any("tokenless_worker_networks", c.TokenlessWorkers),
		slog.Duration("lease", c.Lease),
		slog.Int64("max_body_bytes", c.MaxBodyBytes),
		slog.String("log_level", c.LogLevel.String()),
		slog.Any("cors_origins", c.CORSOrigins),
		slog.Any("allowed_hosts", c.AllowedHosts),
		slog.String("result_store", redactURL(c.ResultStore)),
		slog.String("keychain_kms_key_id", c.KeychainKMSKeyID),
		slog.String("keychain_key_file", c.KeychainKeyFile),
		slog.String("scheduler_group", c.Scheduler.Group),
		slog.String("command_bus", string(c.CommandBus.Mode)),
		slog.Any("command_bus_writers", c.CommandBus.Writers),
	)
}

// env is a snapshot of every variable Load reads, taken once up front so that
// the set of names read does not depend on which branch Load takes.
type env map[string]string

func names() []string {
	return []string{
		EnvStage, EnvDatabaseURL, EnvShardURLs, EnvDBSecretARN, EnvShardMapParam,
		EnvDBSSLMode, EnvDBMaxConns, EnvMigrateOnStart, EnvNATSURL,
		EnvNATSCredsSecretARN, EnvServerURL, EnvAPIToken, EnvWorkerToken,
		EnvInternalToken, EnvInternalTokenOld, EnvAPITokensSecretARN, EnvAdminToken, EnvAllowOpen, EnvLeaseSeconds,
		EnvMaxBodyBytes, EnvLogLevel, EnvCORSOrigins, EnvResultStore, EnvTokenlessWorkers, EnvAllowedHosts, EnvKeychainKMSKeyID, EnvKeychainKeyFile,
		EnvSchedulerGroup, EnvSchedulerTargetARN, EnvSchedulerRoleARN,
		EnvCommandBus, EnvCommandBusWriters, EnvCommandBusShardCount,
		EnvLambdaFunctionName, EnvAWSRegion, EnvAWSEndpointURL,
	}
}

func readEnv(getenv func(string) string) env {
	e := env{}
	for _, n := range names() {
		e[n] = strings.TrimSpace(getenv(n))
	}
	return e
}

// Load builds the configuration from getenv (normally os.Getenv) and, when
// the environment names them, from Secrets Manager and SSM. Every problem in
// the environment is reported at once; each names the variable and the fix.
func Load(ctx context.Context, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		return nil, errors.New("config.Load: getenv is nil; pass os.Getenv")
	}
	e := readEnv(getenv)
	c, p, err := parseEnv(e)
	if err != nil {
		return nil, err
	}
	if p.needsAWS() {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, awsTimeout)
			defer cancel()
		}
		if err := loadFromAWS(ctx, e, c, p); err != nil {
			return nil, err
		}
	}
	if c.InLambda && c.Tokens.Empty() && !c.AllowOpen {
		src := "NOETL_API_TOKENS_SECRET_ARN is not set"
		if p.tokensSecret != "" {
			src = "the secret in NOETL_API_TOKENS_SECRET_ARN holds no token"
		}
		return nil, fmt.Errorf("no API token configured and running in Lambda (%s): set %s to a secret "+
			`{"api": "...", "worker": "...", "internal": "...", "admin": "..."}, or set %s=true to run without authentication (never in production)`,
			src, EnvAPITokensSecretARN, EnvAllowOpen)
	}
	return c, nil
}

// pending is what parseEnv leaves for loadFromAWS.
type pending struct {
	dbSecret     string
	shardMap     string
	tokensSecret string
	natsSecret   string
	sslmode      string
}

func (p pending) needsAWS() bool {
	return p.dbSecret != "" || p.shardMap != "" || p.tokensSecret != "" || p.natsSecret != ""
}

// parseEnv does everything that needs no network.
func parseEnv(e env) (*Config, pending, error) {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	c := &Config{InLambda: e[EnvLambdaFunctionName] != "", awsRegion: e[EnvAWSRegion], awsEndpoint: e[EnvAWSEndpointURL]}
	var p pending

	c.Stage = e[EnvStage]
	if c.Stage == "" {
		c.Stage = DefaultStage
	} else if !stageRE.MatchString(c.Stage) {
		add(fmt.Errorf("%s=%q: use 1-32 letters, digits, '-' or '_' (it becomes a CloudWatch dimension value)", EnvStage, c.Stage))
	}

	// Database.
	sslmode, sslExplicit := e[EnvDBSSLMode], true
	if sslmode == "" {
		sslExplicit = false
		sslmode = "disable"
		if c.InLambda {
			sslmode = "require"
		}
	}
	if !slices.Contains([]string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, sslmode) {
		add(fmt.Errorf("%s=%q: not a Postgres sslmode; use one of disable, allow, prefer, require, verify-ca, verify-full", EnvDBSSLMode, sslmode))
	}
	p.sslmode = sslmode
	urlMode := e[EnvDatabaseURL] != "" || e[EnvShardURLs] != ""
	awsMode := e[EnvDBSecretARN] != "" || e[EnvShardMapParam] != ""
	switch {
	case urlMode && awsMode:
		add(fmt.Errorf("both %s/%s and %s/%s are set: use the URLs locally or the secret and shard map in AWS, not both",
			EnvDatabaseURL, EnvShardURLs, EnvDBSecretARN, EnvShardMapParam))
	case awsMode:
		p.dbSecret, p.shardMap = e[EnvDBSecretARN], e[EnvShardMapParam]
		if m := p.shardMap; m != "" && !strings.HasPrefix(m, "/") && !strings.HasPrefix(m, "arn:") && strings.Contains(m, "/") {
			add(fmt.Errorf("%s=%q: a parameter name with '/' must start with '/' (e.g. /noetl/prod/shard-map)", EnvShardMapParam, p.shardMap))
		}
	case e[EnvDatabaseURL] == "" && e[EnvShardURLs] != "":
		add(fmt.Errorf("%s is set but %s is empty: set %s to the cluster database (it may be the same as shard 0)", EnvShardURLs, EnvDatabaseURL, EnvDatabaseURL))
	case urlMode:
		mode := ""
		if sslExplicit {
			mode = sslmode
		}
		cluster, err := checkDSN(EnvDatabaseURL, e[EnvDatabaseURL])
		add(err)
		c.ClusterDSN = withSSLMode(cluster, mode)
		if e[EnvShardURLs] == "" {
			c.ShardDSNs = []string{c.ClusterDSN}
		} else {
			seen := map[string]int{}
			for i, s := range strings.Split(e[EnvShardURLs], ",") {
				d, err := checkDSN(fmt.Sprintf("%s entry %d", EnvShardURLs, i), strings.TrimSpace(s))
				if err != nil {
					add(err)
					continue
				}
				if j, dup := seen[d]; dup {
					add(fmt.Errorf("%s entries %d and %d are the same database: each shard needs its own", EnvShardURLs, j, i))
					continue
				}
				seen[d] = i
				c.ShardDSNs = append(c.ShardDSNs, withSSLMode(d, mode))
			}
			if len(c.ShardDSNs) > MaxShards {
				add(fmt.Errorf("%s lists %d shards: at most %d (ids carry 10 shard bits, R-I1)", EnvShardURLs, len(c.ShardDSNs), MaxShards))
			}
		}
	default:
		add(fmt.Errorf("no database configured: set %s (and optionally %s) locally, or %s (and optionally %s) in AWS",
			EnvDatabaseURL, EnvShardURLs, EnvDBSecretARN, EnvShardMapParam))
	}

	defConns := int64(DefaultDBMaxConnsLocal)
	if c.InLambda {
		defConns = DefaultDBMaxConnsLambda
	}
	n, err := intVar(e, EnvDBMaxConns, defConns, 1, 1000, "connections")
	add(err)
	c.DBMaxConns = int32(n)

	c.MigrateOnStart, err = boolVar(e, EnvMigrateOnStart, false)
	add(err)

	// NATS.
	if u := e[EnvNATSURL]; u != "" {
		add(checkNATSURL(u))
		c.NATS.URL = u
	}
	if e[EnvNATSCredsSecretARN] != "" {
		if c.NATS.URL == "" {
			add(fmt.Errorf("%s is set but %s is empty: set the NATS URL too, or unset the creds secret (NATS is disabled without a URL)", EnvNATSCredsSecretARN, EnvNATSURL))
		}
		p.natsSecret = e[EnvNATSCredsSecretARN]
	}
	if u := e[EnvServerURL]; u != "" {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
			add(fmt.Errorf("%s=%q: not an absolute http(s) URL; set it to the API's base URL, e.g. https://api.example.com", EnvServerURL, u))
		}
		c.ServerURL = strings.TrimRight(u, "/")
	}

	// Tokens.
	c.Tokens = Tokens{API: SplitList(e[EnvAPIToken]), Worker: SplitList(e[EnvWorkerToken]), Internal: append(SplitList(e[EnvInternalToken]), SplitList(e[EnvInternalTokenOld])...),
		Admin: SplitList(e[EnvAdminToken])}
	if e[EnvAPITokensSecretARN] != "" {
		if !c.Tokens.Empty() {
			add(fmt.Errorf("both %s and %s/%s/%s are set: keep the tokens in the secret in AWS or in the env vars locally, not both",
				EnvAPITokensSecretARN, EnvAPIToken, EnvWorkerToken, EnvInternalToken))
		}
		p.tokensSecret = e[EnvAPITokensSecretARN]
	}
	c.AllowOpen, err = boolVar(e, EnvAllowOpen, false)
	add(err)
	if v := e[EnvTokenlessWorkers]; v != "" {
		if c.InLambda {
			add(fmt.Errorf("%s is set in Lambda: tokenless workers are for the local server only (noetl serve, noetl dev); "+
				"in AWS give NoETL's workers a way in that carries a worker token, as docs/noetl-compat.md says, and unset it", EnvTokenlessWorkers))
		}
		c.TokenlessWorkers, err = networks(v)
		add(err)
	}

	// Limits and logging.
	n, err = intVar(e, EnvLeaseSeconds, DefaultLeaseSeconds, 1, 86400, "seconds")
	add(err)
	c.Lease = time.Duration(n) * time.Second
	maxBody := int64(1 << 30)
	if c.InLambda {
		maxBody = MaxLambdaBodyBytes
	}
	c.MaxBodyBytes, err = intVar(e, EnvMaxBodyBytes, DefaultMaxBodyBytes, 1, maxBody, "bytes")
	add(err)
	c.LogLevel, err = logLevel(e[EnvLogLevel])
	add(err)
	c.CORSOrigins, err = corsOrigins(e[EnvCORSOrigins])
	add(err)
	c.AllowedHosts, err = allowedHosts(e[EnvAllowedHosts])
	add(err)

	// Large results.
	if v := e[EnvResultStore]; v != "" {
		add(checkResultStore(v))
		c.ResultStore = v
	}

	// The keychain's key.
	c.KeychainKMSKeyID, c.KeychainKeyFile = e[EnvKeychainKMSKeyID], e[EnvKeychainKeyFile]
	switch {
	case c.KeychainKMSKeyID != "" && c.KeychainKeyFile != "":
		add(fmt.Errorf("both %s and %s are set: the keychain uses one key ring; KMS in AWS, a key file on one machine", EnvKeychainKMSKeyID, EnvKeychainKeyFile))
	case c.KeychainKeyFile != "" && c.InLambda:
		add(fmt.Errorf("%s is set in Lambda, whose files do not last: use %s (a KMS key)", EnvKeychainKeyFile, EnvKeychainKMSKeyID))
	case c.KeychainKeyFile != "" && !path.IsAbs(c.KeychainKeyFile):
		add(fmt.Errorf("%s=%q: name the key file by an absolute path", EnvKeychainKeyFile, c.KeychainKeyFile))
	}
	// Schedules' scheduler entries.
	c.Scheduler = Scheduler{Group: e[EnvSchedulerGroup], TargetARN: e[EnvSchedulerTargetARN], RoleARN: e[EnvSchedulerRoleARN]}
	add(checkScheduler(c.Scheduler))

	// NoETL's command bus.
	c.CommandBus, err = commandbus.ParseSettings(e[EnvCommandBus], e[EnvCommandBusWriters], e[EnvCommandBusShardCount])
	add(err)
	if err == nil && c.CommandBus.Mode.Bus() && c.InLambda {
		add(fmt.Errorf("%s=%s is set in Lambda: the command bus is published to by the local server (noetl serve, noetl dev) only; "+
			"in AWS NoETL's workers take commands from NATS (NoETL's Rust worker up to 5.91.1, its Python worker): unset it", EnvCommandBus, c.CommandBus.Mode))
	}

	if len(errs) > 0 {
		return nil, p, errors.Join(errs...)
	}
	return c, p, nil
}

var stageRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func intVar(e env, name string, def, lo, hi int64, unit string) (int64, error) {
	v := e[name]
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def, fmt.Errorf("%s=%q: %w; set a whole number of %s between %d and %d, or unset it for the default %d", name, v, err, unit, lo, hi, def)
	}
	if n < lo || n > hi {
		return def, fmt.Errorf("%s=%d: out of range; set a whole number of %s between %d and %d, or unset it for the default %d", name, n, unit, lo, hi, def)
	}
	return n, nil
}

func boolVar(e env, name string, def bool) (bool, error) {
	v := e[name]
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def, fmt.Errorf("%s=%q: %w; set true or false", name, v, err)
	}
	return b, nil
}

func logLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("%s=%q: unknown level; use debug, info, warn or error", EnvLogLevel, v)
}

func corsOrigins(v string) ([]string, error) {
	return starList(EnvCORSOrigins, v, "allows every origin", "origins", func(o string) error {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("%s: %q is not an origin; use scheme://host[:port] such as https://app.example.com, or *", EnvCORSOrigins, o)
		}
		return nil
	})
}

// allowedHosts reads NOETL_ALLOWED_HOSTS: host names or addresses (no
// scheme, no port), or * alone.
func allowedHosts(v string) ([]string, error) {
	return starList(EnvAllowedHosts, v, "answers every Host header", "names", func(h string) error {
		if _, err := netip.ParseAddr(h); err != nil && strings.ContainsAny(h, "/:@[] ") {
			return fmt.Errorf("%s: %q is not a host name; give names such as noetl.internal or addresses such as 10.0.0.5, without scheme or port", EnvAllowedHosts, h)
		}
		return nil
	})
}

// starList reads the comma-separated list v of the variable name: entries
// that pass check, or * alone.
func starList(name, v, star, entries string, check func(string) error) ([]string, error) {
	list := SplitList(v)
	for _, e := range list {
		if e == "*" {
			if len(list) > 1 {
				return nil, fmt.Errorf("%s=%q: '*' %s and cannot be combined with others; use '*' alone or list %s", name, v, star, entries)
			}
			continue
		}
		if err := check(e); err != nil {
			return nil, err
		}
	}
	return list, nil
}

func checkNATSURL(v string) error {
	for _, s := range strings.Split(v, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return fmt.Errorf("%s: %q is not a URL; use nats://host:4222 (comma-separate several servers), or unset it to disable NATS", EnvNATSURL, redactURL(strings.TrimSpace(s)))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%s: scheme %q is not a NATS scheme; use nats://, tls://, ws:// or wss://", EnvNATSURL, u.Scheme)
		}
	}
	return nil
}

// s3BucketRE is S3's rule for (new) bucket names: 3-63 lower-case letters,
// digits, '.' and '-', starting and ending with a letter or digit.
var s3BucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// s3PrefixRE keeps a key prefix to S3's safe characters, which need no
// escaping in an s3:// URI, so the URIs in the event log read as the keys.
var s3PrefixRE = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/-]*$`)

const resultStoreFix = "use file:///absolute/dir (one machine) or s3://bucket/prefix (AWS), or unset it to refuse results posted by reference"

var schedulerGroupRE = regexp.MustCompile(`^[0-9A-Za-z_.-]{1,64}$`)

// checkScheduler accepts all three scheduler settings or none.
func checkScheduler(s Scheduler) error {
	if s == (Scheduler{}) {
		return nil
	}
	switch {
	case s.Group == "" || s.TargetARN == "" || s.RoleARN == "":
		return fmt.Errorf("%s, %s and %s go together: set all three (EventBridge Scheduler entries) or none (no entries)",
			EnvSchedulerGroup, EnvSchedulerTargetARN, EnvSchedulerRoleARN)
	case !schedulerGroupRE.MatchString(s.Group):
		return fmt.Errorf("%s=%q: a schedule group name is 1-64 letters, digits, '.', '_' or '-'", EnvSchedulerGroup, s.Group)
	case !strings.HasPrefix(s.TargetARN, "arn:"):
		return fmt.Errorf("%s=%q: want the schedules function's ARN (arn:aws:lambda:…)", EnvSchedulerTargetARN, s.TargetARN)
	case !strings.HasPrefix(s.RoleARN, "arn:"):
		return fmt.Errorf("%s=%q: want the ARN of the role EventBridge Scheduler assumes (arn:aws:iam::…:role/…)", EnvSchedulerRoleARN, s.RoleARN)
	}
	return nil
}

// checkResultStore accepts what resultstore.Open can use: file:///abs/dir or
// s3://bucket/prefix, with a prefix that is already a clean key path (the
// store only owns keys that are).
func checkResultStore(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which might hold a key
		}
		return fmt.Errorf("%s is not a URL (%w); %s", EnvResultStore, err, resultStoreFix)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("%s=%q: a result store URL has no user, query or fragment; %s", EnvResultStore, redactURL(v), resultStoreFix)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return fmt.Errorf("%s=%q: %q is read as a host; a file store is a local absolute directory: file:///absolute/dir (three slashes)", EnvResultStore, v, u.Host)
		}
		if u.Opaque != "" || !path.IsAbs(u.Path) {
			return fmt.Errorf("%s=%q: the directory must be absolute: file:///absolute/dir (three slashes)", EnvResultStore, v)
		}
		if path.Clean(u.Path) == "/" {
			return fmt.Errorf("%s=%q: not the filesystem root; name a directory for results, e.g. file:///var/lib/noetl/results", EnvResultStore, v)
		}
		return nil
	case "s3":
		if u.Host == "" {
			return fmt.Errorf("%s=%q: no bucket; use s3://bucket/prefix, e.g. s3://my-noetl-results/results", EnvResultStore, v)
		}
		if !s3BucketRE.MatchString(u.Host) || strings.Contains(u.Host, "..") {
			return fmt.Errorf("%s=%q: %q is not an S3 bucket name (3-63 lower-case letters, digits, '.' or '-'); use s3://bucket/prefix", EnvResultStore, v, u.Host)
		}
		prefix := strings.Trim(u.Path, "/")
		if !s3PrefixRE.MatchString(prefix) {
			return fmt.Errorf("%s=%q: the prefix %q may use only letters, digits, '/' and !-_.*'() (S3's safe key characters); use s3://bucket/a/b", EnvResultStore, v, prefix)
		}
		if prefix != "" && (path.Clean(prefix) != prefix || prefix == "." || prefix == ".." || strings.HasPrefix(prefix, "../")) {
			return fmt.Errorf("%s=%q: the prefix %q has empty, '.' or '..' parts; use s3://bucket/a/b", EnvResultStore, v, prefix)
		}
		return nil
	case "":
		return fmt.Errorf("%s=%q: no scheme; %s", EnvResultStore, v, resultStoreFix)
	}
	return fmt.Errorf("%s=%q: scheme %q is not supported; %s", EnvResultStore, redactURL(v), u.Scheme, resultStoreFix)
}

// networks reads NOETL_TOKENLESS_WORKER_NETWORKS: CIDRs (10.0.0.0/8) or
// single addresses (127.0.0.1), comma-separated. A prefix of length 0 is
// refused: that is every address, the whole worker API open to anyone.
func networks(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range SplitList(v) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%s: %q is neither a network (10.0.0.0/8, fd00::/8) nor an address (127.0.0.1)", EnvTokenlessWorkers, s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Bits() == 0 {
			return nil, fmt.Errorf("%s: %q is every address: name the networks NoETL's workers run in (e.g. 10.0.0.0/8, 127.0.0.1), or give them a worker token instead", EnvTokenlessWorkers, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// SplitList splits a comma-separated value, dropping blanks so that an empty
// token can never be configured by accident.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// urlProblem says what is wrong with a URL that does not parse without quoting
// it: url.Parse's messages quote pieces of the URL (a password typed without
// "@host" parses as a port and would be quoted whole).
func urlProblem(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "invalid port"):
		return "what follows the host's last ':' is not a port number; is the password missing its '@host'?"
	case strings.Contains(msg, "invalid URL escape"):
		return "a '%' does not start a %XX escape"
	case strings.Contains(msg, "invalid userinfo"):
		return "the user:password part has characters that must be percent-encoded"
	case strings.Contains(msg, "invalid character"), strings.Contains(msg, "invalid control character"):
		return "it holds a character a URL cannot"
	}
	return "it does not parse"
}

// checkDSN accepts a postgres URL or a key=value DSN. Errors never quote the
// DSN, which may hold a password.
func checkDSN(what, dsn string) (string, error) {
	if dsn == "" {
		return "", fmt.Errorf("%s is empty: remove the stray comma or give a postgres:// URL", what)
	}
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("%s is not a valid URL (%s); use postgres://user:password@host:5432/dbname with the password percent-encoded", what, urlProblem(err))
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			return "", fmt.Errorf("%s has scheme %q: use postgres://user:password@host:5432/dbname", what, u.Scheme)
		}
		return dsn, nil
	}
	if !strings.Contains(dsn, "=") {
		return "", fmt.Errorf("%s is neither a postgres:// URL nor a key=value DSN: use postgres://user:password@host:5432/dbname", what)
	}
	return dsn, nil
}

// withSSLMode adds sslmode to a DSN that does not name one; a DSN's own
// sslmode wins because it is the more specific setting.
func withSSLMode(dsn, mode string) string {
	if mode == "" || dsn == "" {
		return dsn
	}
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil || u.Query().Has("sslmode") {
			return dsn
		}
		q := u.Query()
		q.Set("sslmode", mode)
		u.RawQuery = q.Encode()
		return u.String()
	}
	if strings.Contains(dsn, "sslmode=") {
		return dsn
	}
	return dsn + " sslmode=" + mode
}

var kvPasswordRE = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactDSN hides the password of a URL or key=value DSN.
func RedactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		return redactURL(dsn)
	}
	return kvPasswordRE.ReplaceAllString(dsn, "${1}xxxxx")
}

// redactURLs redacts a comma-separated URL list (NATS takes several servers).
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = redactURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}
