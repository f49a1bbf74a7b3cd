package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// MaxScript bounds a python script read from a file, a URL or a bucket.
const MaxScript = 4 << 20

// GCSEndpoint is where gs:// scripts are read: Cloud Storage's S3-compatible API,
// reached with HMAC keys through the S3 client (the result store's).
const GCSEndpoint = "https://storage.googleapis.com"

// pythonSource reads the code to run: `code` (rendered like any config value),
// `code_b64` (alias code_base64: base64 of the code, never rendered), or `script`
// — exactly one. It returns the code and the file name tracebacks show.
func (r *Registry) pythonSource(ctx context.Context, cfg map[string]any) (code, filename string, err error) {
	var given []string
	c := valueOf(cfg, keyNames(toolkind.Python, "code")...)
	if c != nil && c != "" {
		given = append(given, "code")
	}
	bk, b64, _ := first(cfg, keyNames(toolkind.Python, "code_b64")...)
	if b64 != nil && b64 != "" {
		given = append(given, bk)
	}
	_, script, _ := first(cfg, keyNames(toolkind.Python, "script")...)
	if script != nil && script != "" {
		given = append(given, "script")
	}
	switch len(given) {
	case 0:
		return "", "", errors.New("code or script is required (or code_b64)")
	case 1:
	default:
		return "", "", fmt.Errorf("give either code or script, not both (%s are set)", strings.Join(given, " and "))
	}
	switch given[0] {
	case "code":
		s, ok := c.(string)
		if !ok {
			return "", "", fmt.Errorf("code: expected a string, got %s", jsonx.TypeName(c))
		}
		return s, "<code>", nil
	case "script":
		return r.loadScript(ctx, script)
	}
	s, ok := b64.(string)
	if !ok {
		return "", "", fmt.Errorf("%s: expected a base64 string, got %s", bk, jsonx.TypeName(b64))
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return "", "", fmt.Errorf("%s: not base64: %w", bk, err)
	}
	return string(raw), "<code>", nil
}

// loadScript reads `script`: a path on the worker host (this project's form), or
// NoETL's {uri, source} where source is a type name or {type, …}: file (uri is a
// path), inline (source.code), http (GET uri, or source.endpoint joined with uri;
// source.headers, source.timeout in seconds, default 30), s3 (s3://bucket/key) or
// gcs (gs://bucket/key). A uri of s3:// or gs:// and an http(s) uri need no type.
// Bucket reads go through the result store's S3 client: AWS's default chain, or
// source.auth naming a credential with access_key_id and secret_access_key (and
// region, endpoint) in its fields; gcs reads use GCSEndpoint with HMAC keys.
func (r *Registry) loadScript(ctx context.Context, v any) (string, string, error) {
	switch s := v.(type) {
	case string:
		return r.readScriptFile(ctx, s)
	case map[string]any:
		return r.loadScriptObject(ctx, s)
	}
	return "", "", fmt.Errorf("script: expected a path or {uri, source}, got %s", jsonx.TypeName(v))
}

func (r *Registry) loadScriptObject(ctx context.Context, s map[string]any) (string, string, error) {
	uri, err := stringField(s, "uri", "path")
	if err != nil {
		return "", "", fmt.Errorf("script.%w", err)
	}
	src := map[string]any{}
	switch x := s["source"].(type) {
	case nil:
	case string:
		src["type"] = x
	case map[string]any:
		src = x
	default:
		return "", "", fmt.Errorf("script.source: expected a type name or {type, …}, got %s", jsonx.TypeName(x))
	}
	typ, err := stringField(src, "type")
	if err != nil {
		return "", "", fmt.Errorf("script.source.%w", err)
	}
	typ = strings.ToLower(strings.TrimSpace(typ))
	if typ == "" {
		switch {
		case strings.HasPrefix(uri, "s3://"):
			typ = "s3"
		case strings.HasPrefix(uri, "gs://"):
			typ = "gcs"
		case strings.HasPrefix(uri, "http://"), strings.HasPrefix(uri, "https://"):
			typ = "http"
		case uri != "":
			typ = "file"
		}
	}
	switch typ {
	case "inline":
		code, err := stringField(src, "code")
		if err != nil {
			return "", "", fmt.Errorf("script.source.%w", err)
		}
		if code == "" {
			code, _ = stringField(s, "code")
		}
		if code == "" {
			return "", "", errors.New("script: an inline source needs source.code")
		}
		return code, "<script>", nil
	case "file":
		if uri == "" {
			return "", "", errors.New("script.uri: required (the script's path)")
		}
		return r.readScriptFile(ctx, uri)
	case "http":
		return r.scriptHTTP(ctx, uri, src)
	case "s3", "gcs":
		return r.scriptBucket(ctx, typ, uri, src)
	case "":
		return "", "", errors.New("script: give uri (a path, http(s)://, s3:// or gs://) or source.type inline with source.code")
	}
	return "", "", fmt.Errorf("script.source.type: expected file, inline, http, s3 or gcs, got %q", typ)
}

// readScriptFile reads a script file (python's, or the SQL of postgres and
// duckdb) with the tool user's rights: through cat running as that user
// when there is one, so a step cannot have the worker read (and show in an
// error) a file only the worker's user may read. A relative path is the
// worker's.
func (r *Registry) readScriptFile(ctx context.Context, path string) (string, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("script %s: %w", path, err)
	}
	if r.user != nil {
		res := runProcess(ctx, procSpec{Path: "/bin/cat", Args: []string{"--", abs}, Dir: "/", Env: baseEnv(),
			User: r.user, MaxOutput: MaxScript + 1})
		switch {
		case res.Stopped:
			return "", "", fmt.Errorf("script %s: reading it stopped: %w", abs, context.Cause(ctx))
		case res.Err != nil:
			return "", "", fmt.Errorf("script %s: %w%s", abs, res.Err, r.userNote())
		case res.ExitCode != 0:
			return "", "", fmt.Errorf("script %s: %s (read as the tool user %s)", abs, lastLine(res.Stderr), r.user.Name)
		case len(res.Stdout) > MaxScript:
			return "", "", fmt.Errorf("script %s is larger than %d bytes (MaxScript)", abs, MaxScript)
		}
		return res.Stdout, abs, nil
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", "", fmt.Errorf("script: %w", err)
	}
	defer f.Close()
	b, err := readBounded(f, abs)
	return string(b), abs, err
}

func readBounded(rd io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(rd, MaxScript+1))
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", what, err)
	}
	if len(b) > MaxScript {
		return nil, fmt.Errorf("script %s is larger than %d bytes (MaxScript)", what, MaxScript)
	}
	return b, nil
}

func (r *Registry) scriptHTTP(ctx context.Context, uri string, src map[string]any) (string, string, error) {
	endpoint, err := stringField(src, "endpoint", "url")
	if err != nil {
		return "", "", fmt.Errorf("script.source.%w", err)
	}
	target := uri
	if endpoint != "" {
		target = strings.TrimRight(endpoint, "/") + "/" + strings.TrimLeft(uri, "/")
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", "", fmt.Errorf("script: %q is not an http(s) URL", target)
	}
	if err := r.guardURL(u); err != nil {
		return "", "", fmt.Errorf("script: %w", err)
	}
	method, err := stringField(src, "method")
	if err != nil {
		return "", "", fmt.Errorf("script.source.%w", err)
	}
	if method == "" {
		method = http.MethodGet
	}
	timeout, err := durationField(src, "timeout")
	if err != nil {
		return "", "", fmt.Errorf("script.source.%w", err)
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), u.String(), nil)
	if err != nil {
		return "", "", fmt.Errorf("script: %w", err)
	}
	headers, err := mapField(src, "headers")
	if err != nil {
		return "", "", fmt.Errorf("script.source.%w", err)
	}
	for k, v := range headers {
		if v != nil {
			req.Header.Set(k, tmpl.Text(v))
		}
	}
	resp, err := r.httpClient(true, true, nil).Do(req)
	if err != nil {
		return "", "", fmt.Errorf("script: %s %s: %w", req.Method, redactURL(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", "", fmt.Errorf("script: %s %s: HTTP %s", req.Method, redactURL(u), resp.Status)
	}
	b, err := readBounded(resp.Body, redactURL(u))
	return string(b), redactURL(u), err
}

func (r *Registry) scriptBucket(ctx context.Context, typ, uri string, src map[string]any) (string, string, error) {
	scheme := map[string]string{"s3": "s3", "gcs": "gs"}[typ]
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != scheme || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return "", "", fmt.Errorf("script.uri: expected %s://bucket/key, got %q", scheme, uri)
	}
	cfg, err := r.bucketConfig(ctx, typ, src)
	if err != nil {
		return "", "", err
	}
	store, err := resultstore.Open(ctx, "s3://"+u.Host, resultstore.Options{MaxBytes: MaxScript, AWS: cfg})
	if err != nil {
		return "", "", fmt.Errorf("script: %w", err)
	}
	b, err := store.Get(ctx, "s3://"+u.Host+"/"+strings.TrimLeft(u.Path, "/"))
	if err != nil {
		return "", "", fmt.Errorf("script %s: %w", uri, err)
	}
	return string(b), uri, nil
}

// bucketConfig is the S3 client's configuration for a script bucket.
func (r *Registry) bucketConfig(ctx context.Context, typ string, src map[string]any) (*aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	region, _ := stringField(src, "region")
	endpoint := ""
	if typ == "gcs" {
		endpoint, region = GCSEndpoint, "auto"
	}
	if alias, _ := stringField(src, "auth", "credential"); alias != "" {
		cred, err := r.lookupCredential(ctx, alias)
		if err != nil {
			return nil, err
		}
		id, _ := cred.Extra["access_key_id"].(string)
		secret, _ := cred.Extra["secret_access_key"].(string)
		if id == "" || secret == "" {
			return nil, fmt.Errorf("script.source.auth: credential %q has no access_key_id and secret_access_key", alias)
		}
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")))
		if reg, _ := cred.Extra["region"].(string); reg != "" {
			region = reg
		}
		if ep, _ := cred.Extra["endpoint"].(string); ep != "" {
			endpoint = ep
		}
	}
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("script: AWS SDK configuration: %w", err)
	}
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
	}
	return &cfg, nil
}
