package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// awsClients are built once per Load, only when something must be fetched.
type awsClients struct {
	sm  *secretsmanager.Client
	ssm *ssm.Client
}

func newAWSClients(ctx context.Context, e env) (*awsClients, error) {
	cfg, err := loadAWSConfig(ctx, e[EnvAWSRegion], e[EnvAWSEndpointURL])
	if err != nil {
		return nil, err
	}
	return &awsClients{sm: secretsmanager.NewFromConfig(cfg), ssm: ssm.NewFromConfig(cfg)}, nil
}

// AWSConfig is the AWS SDK configuration the functions use for their own
// calls beyond configuration (the S3 result store): the SDK's default chain
// (the Lambda role's credentials) with AWS_REGION and AWS_ENDPOINT_URL as
// Load read them, exactly as for Secrets Manager and SSM. It makes no request.
// On a Config that Load did not build, the SDK reads the process environment.
func (c *Config) AWSConfig(ctx context.Context) (aws.Config, error) {
	return loadAWSConfig(ctx, c.awsRegion, c.awsEndpoint)
}

func loadAWSConfig(ctx context.Context, region, endpoint string) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if endpoint != "" {
		opts = append(opts, awsconfig.WithBaseEndpoint(endpoint))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS SDK configuration: %w; check %s and the AWS credentials", err, EnvAWSRegion)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("no AWS region: set %s (the Lambda runtime sets it; set it yourself outside Lambda)", EnvAWSRegion)
	}
	return cfg, nil
}

func (a *awsClients) secret(ctx context.Context, id string) ([]byte, error) {
	out, err := a.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return nil, err
	}
	if out.SecretString != nil {
		return []byte(*out.SecretString), nil
	}
	return out.SecretBinary, nil
}

func (a *awsClients) parameter(ctx context.Context, name string) ([]byte, error) {
	out, err := a.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return nil, errors.New("parameter has no value")
	}
	return []byte(*out.Parameter.Value), nil
}

const secretFix = "check the ARN or name, %s, and that the function's role may call secretsmanager:GetSecretValue on it"

// loadFromAWS fetches what p names, concurrently because every round trip
// adds to the cold start.
func loadFromAWS(ctx context.Context, e env, c *Config, p pending) error {
	cl, err := newAWSClients(ctx, e)
	if err != nil {
		return err
	}
	var (
		dbSec    *dbSecret
		smap     *shardMap
		tokens   Tokens
		natsAuth NATS
	)
	jobs := map[string]func() error{}
	if p.dbSecret != "" {
		jobs["db"] = secretJob(ctx, cl, EnvDBSecretARN, p.dbSecret, parseDBSecret, &dbSec)
	}
	if p.shardMap != "" {
		jobs["map"] = func() error {
			raw, err := cl.parameter(ctx, p.shardMap)
			if err != nil {
				return fmt.Errorf("%s: reading SSM parameter %q: %w; check the name, %s, and that the function's role may call ssm:GetParameter on it", EnvShardMapParam, p.shardMap, err, EnvAWSRegion)
			}
			smap, err = parseShardMap(raw)
			if err != nil {
				return fmt.Errorf("%s: parameter %q: %w", EnvShardMapParam, p.shardMap, err)
			}
			return nil
		}
	}
	if p.tokensSecret != "" {
		jobs["tokens"] = secretJob(ctx, cl, EnvAPITokensSecretARN, p.tokensSecret, parseTokensSecret, &tokens)
	}
	if p.natsSecret != "" {
		jobs["nats"] = secretJob(ctx, cl, EnvNATSCredsSecretARN, p.natsSecret, parseNATSCreds, &natsAuth)
	}
	if err := runAll(jobs); err != nil {
		return err
	}

	if p.tokensSecret != "" {
		c.Tokens = tokens
	}
	if p.natsSecret != "" {
		natsAuth.URL = c.NATS.URL
		c.NATS = natsAuth
	}
	if p.dbSecret == "" && p.shardMap == "" {
		return nil // the database came from NOETL_DATABASE_URL
	}
	if smap == nil {
		if dbSec.Host == "" || dbSec.DBName == "" {
			return fmt.Errorf("%s: secret %q has no host or dbname: add them to the secret, or set %s to a shard map naming the endpoints",
				EnvDBSecretARN, p.dbSecret, EnvShardMapParam)
		}
		c.ClusterDSN = buildDSN(dbSec.Username, dbSec.Password, dbEndpoint{Host: dbSec.Host, Port: dbSec.Port, DBName: dbSec.DBName}, p.sslmode)
		c.ShardDSNs = []string{c.ClusterDSN}
		return nil
	}

	// Credentials of entries that name their own secret (one cluster per
	// shard has one secret per cluster), fetched once each.
	creds := map[string]*dbSecret{}
	if dbSec != nil {
		creds[""] = dbSec
		creds[p.dbSecret] = dbSec
	}
	entries := append([]dbEndpoint{*smap.Cluster}, smap.Shards...)
	var mu sync.Mutex
	jobs = map[string]func() error{}
	for i, ep := range entries {
		arn := ep.SecretARN
		if _, have := creds[arn]; have {
			continue
		}
		if arn == "" {
			return fmt.Errorf("%s: parameter %q: %s has no secret_arn and %s is not set: add secret_arn to the entry or set %s",
				EnvShardMapParam, p.shardMap, entryName(i), EnvDBSecretARN, EnvDBSecretARN)
		}
		if _, queued := jobs[arn]; queued {
			continue
		}
		what := entryName(i)
		jobs[arn] = func() error {
			raw, err := cl.secret(ctx, arn)
			if err != nil {
				return fmt.Errorf("%s: parameter %q: %s.secret_arn: reading secret %q: %w; "+secretFix, EnvShardMapParam, p.shardMap, what, arn, err, EnvAWSRegion)
			}
			s, err := parseDBSecret(raw)
			if err != nil {
				return fmt.Errorf("%s: parameter %q: %s.secret_arn: secret %q: %w", EnvShardMapParam, p.shardMap, what, arn, err)
			}
			mu.Lock()
			creds[arn] = s
			mu.Unlock()
			return nil
		}
	}
	if err := runAll(jobs); err != nil {
		return err
	}
	dsn := func(ep dbEndpoint) string {
		s := creds[ep.SecretARN]
		return buildDSN(s.Username, s.Password, ep, p.sslmode)
	}
	c.ClusterDSN = dsn(*smap.Cluster)
	c.ShardDSNs = nil
	for _, ep := range smap.Shards {
		c.ShardDSNs = append(c.ShardDSNs, dsn(ep))
	}
	if len(c.ShardDSNs) == 0 {
		c.ShardDSNs = []string{c.ClusterDSN}
	}
	return nil
}

func entryName(i int) string {
	if i == 0 {
		return "cluster"
	}
	return fmt.Sprintf("shards[%d]", i-1)
}

// runAll runs the jobs concurrently and joins their errors in a stable order.
func runAll(jobs map[string]func() error) error {
	keys := slices.Sorted(maps.Keys(jobs)) // stable error order
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { errs[i] = jobs[k]() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// port accepts a JSON number or a numeric string: RDS writes a number, people
// secretJob reads the secret id (named by the variable env) and parses it
// into dst; its errors name the variable and the secret.
func secretJob[T any](ctx context.Context, cl *awsClients, env, id string, parse func([]byte) (T, error), dst *T) func() error {
	return func() error {
		raw, err := cl.secret(ctx, id)
		if err != nil {
			return fmt.Errorf("%s: reading secret %q: %w; "+secretFix, env, id, err, EnvAWSRegion)
		}
		v, err := parse(raw)
		if err != nil {
			return fmt.Errorf("%s: secret %q: %w", env, id, err)
		}
		*dst = v
		return nil
	}
}

// writing secrets by hand often write a string.
type port int

func (p *port) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %s is not a TCP port (1-65535)", b)
	}
	*p = port(n)
	return nil
}

type dbSecret struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Host     string `json:"host"`
	Port     port   `json:"port"`
	DBName   string `json:"dbname"`
	Engine   string `json:"engine"`
}

func parseDBSecret(raw []byte) (*dbSecret, error) {
	var s dbSecret
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not the RDS secret JSON {username, password, host, port, dbname, engine}: %w", err)
	}
	if s.Username == "" || s.Password == "" {
		return nil, errors.New("username or password is empty: store the RDS secret JSON {username, password, host, port, dbname, engine}")
	}
	if s.Engine != "" && !strings.Contains(s.Engine, "postgres") {
		return nil, fmt.Errorf("engine is %q: NoETL needs a PostgreSQL (or Aurora PostgreSQL) database secret", s.Engine)
	}
	return &s, nil
}

type dbEndpoint struct {
	Host      string `json:"host"`
	Port      port   `json:"port"`
	DBName    string `json:"dbname"`
	SecretARN string `json:"secret_arn"`
}

type shardMap struct {
	Cluster *dbEndpoint  `json:"cluster"`
	Shards  []dbEndpoint `json:"shards"`
}

const shardMapShape = `{"cluster": {"host", "port", "dbname", "secret_arn"?}, "shards": [{…}, …]}`

func parseShardMap(raw []byte) (*shardMap, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a misspelt key must not silently drop a setting
	var m shardMap
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not the shard map JSON %s: %w", shardMapShape, err)
	}
	if m.Cluster == nil {
		return nil, fmt.Errorf("no \"cluster\" entry: the shard map is %s", shardMapShape)
	}
	if len(m.Shards) > MaxShards {
		return nil, fmt.Errorf("%d shards: at most %d (ids carry 10 shard bits, R-I1)", len(m.Shards), MaxShards)
	}
	seen := map[string]int{}
	for i, ep := range append([]dbEndpoint{*m.Cluster}, m.Shards...) {
		if ep.Host == "" || ep.DBName == "" {
			return nil, fmt.Errorf("%s: host and dbname are required", entryName(i))
		}
		if i == 0 {
			continue // the cluster database may double as a shard
		}
		key := fmt.Sprintf("%s:%d/%s", ep.Host, ep.Port, ep.DBName)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s and %s are the same database: each shard needs its own", entryName(j), entryName(i))
		}
		seen[key] = i
	}
	return &m, nil
}

// stringOrList accepts "tok" or ["tok1", "tok2"].
type stringOrList []string

func (l *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = SplitList(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("must be a string or a list of strings")
	}
	*l = nil
	for _, s := range many {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func parseTokensSecret(raw []byte) (Tokens, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Tokens{}, fmt.Errorf(`not the tokens JSON {"api": ..., "worker": ..., "internal": ..., "admin": ...}: %w`, err)
	}
	var t Tokens
	scopes := map[string]*[]string{"api": &t.API, "worker": &t.Worker, "internal": &t.Internal, "admin": &t.Admin}
	for k, v := range m {
		var l stringOrList
		if err := json.Unmarshal(v, &l); err != nil {
			return Tokens{}, fmt.Errorf("key %q: %w", k, err)
		}
		dst, ok := scopes[k]
		if !ok {
			return Tokens{}, fmt.Errorf(`unknown key %q: the tokens secret has only "api", "worker", "internal" and "admin"`, k)
		}
		*dst = l
	}
	return t, nil
}

const (
	natsJWTMarker  = "-----BEGIN NATS USER JWT-----"
	natsSeedMarker = "-----BEGIN USER NKEY SEED-----"
)

// parseNATSCreds reads the NATS creds secret: a creds file (as `nsc` writes
// it), or JSON {"user","password"} or {"token"}.
func parseNATSCreds(raw []byte) (NATS, error) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' {
		var v struct {
			User     string `json:"user"`
			Password string `json:"password"`
			Token    string `json:"token"`
		}
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return NATS{}, fmt.Errorf(`not {"user", "password"} or {"token"}: %w`, err)
		}
		switch {
		case v.Token != "" && v.User == "" && v.Password == "":
			return NATS{Token: v.Token}, nil
		case v.User != "" && v.Password != "" && v.Token == "":
			return NATS{User: v.User, Password: v.Password}, nil
		}
		return NATS{}, errors.New(`give either "user" and "password", or "token" alone`)
	}
	if bytes.Contains(t, []byte(natsJWTMarker)) && bytes.Contains(t, []byte(natsSeedMarker)) {
		return NATS{Creds: append([]byte(nil), t...)}, nil
	}
	return NATS{}, errors.New(`neither a NATS creds file (user JWT and nkey seed blocks) nor JSON {"user", "password"} / {"token"}`)
}

func buildDSN(user, password string, ep dbEndpoint, sslmode string) string {
	p := int(ep.Port)
	if p == 0 {
		p = 5432
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(user, password),
		Host:     net.JoinHostPort(ep.Host, strconv.Itoa(p)),
		Path:     "/" + ep.DBName,
		RawQuery: url.Values{"sslmode": {sslmode}}.Encode(),
	}
	return u.String()
}
