package resultstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// s3Store keeps results as objects under one bucket prefix.
//
// It makes its two calls (GetObject, PutObject) as SigV4-signed HTTP requests
// rather than through the SDK's S3 client. The ingest function links the
// engine's expression language, whose reflection on methods makes the linker
// keep every exported method of every type it cannot prove unused: an
// s3.Client there brings all ~340 S3 operations along (4.5 MB), and the
// function's binary past its 25 MiB budget. Credentials, region, endpoint and
// HTTP client still come from the SDK's configuration.
type s3Store struct {
	cfg    aws.Config
	signer *v4.Signer
	bucket string
	prefix string // no leading or trailing slash; may be empty
	max    int64
}

// s3Attempts bounds the tries of one call on a network error or a 5xx
// (the SDK's standard retryer also makes three).
const s3Attempts = 3

func openS3(ctx context.Context, u *url.URL, opt Options) (*s3Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("result store %q: expected s3://bucket/prefix", u.String())
	}
	cfg := opt.AWS
	if cfg == nil {
		c, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("result store %q: loading AWS SDK configuration: %w", u.String(), err)
		}
		cfg = &c
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("result store %q: no AWS region configured (set AWS_REGION)", u.String())
	}
	// Both go into the request's host name (objectURL): a region or bucket
	// with other characters ("x@evil.example/") would send the signed
	// request elsewhere.
	if !hostLabel(cfg.Region, "-") {
		return nil, fmt.Errorf("result store %q: region %q is not an AWS region name (letters, digits and hyphens, like us-east-1)", u.String(), cfg.Region)
	}
	if !hostLabel(u.Host, ".-_") {
		return nil, fmt.Errorf("result store %q: bucket %q is not a bucket name (letters, digits, dots, hyphens)", u.String(), u.Host)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("result store %q: no AWS credentials configured", u.String())
	}
	c := cfg.Copy()
	if _, cached := c.Credentials.(*aws.CredentialsCache); !cached {
		c.Credentials = aws.NewCredentialsCache(c.Credentials)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	// S3 signs the path as sent, without escaping it again.
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	return &s3Store{cfg: c, signer: signer, bucket: u.Host, prefix: strings.Trim(u.Path, "/"), max: opt.MaxBytes}, nil
}

// hostLabel reports whether v is letters and digits joined by the
// characters of also: safe to place in a host name.
func hostLabel(v, also string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(also, r)) {
			return false
		}
	}
	return true
}

func (s *s3Store) URL() string {
	return (&url.URL{Scheme: "s3", Host: s.bucket, Path: "/" + s.prefix}).String()
}

func (s *s3Store) key(name string) string {
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

func (s *s3Store) Put(ctx context.Context, name string, data []byte) (string, error) {
	name, err := cleanName(name)
	if err != nil {
		return "", err
	}
	key := s.key(name)
	resp, err := s.do(ctx, http.MethodPut, key, data)
	if err != nil {
		return "", fmt.Errorf("resultstore: putting s3://%s/%s: %w", s.bucket, key, err)
	}
	_ = resp.Body.Close()
	return (&url.URL{Scheme: "s3", Host: s.bucket, Path: "/" + key}).String(), nil
}

// Name returns the name (the key under the prefix) a URI names when it lies
// under the prefix.
func (s *s3Store) Name(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host != s.bucket {
		return "", false
	}
	key := strings.TrimPrefix(u.Path, "/")
	if c, err := cleanName(key); err != nil || c != key {
		return "", false
	}
	if s.prefix == "" {
		return key, true
	}
	name, ok := strings.CutPrefix(key, s.prefix+"/")
	return name, ok
}

func (s *s3Store) Get(ctx context.Context, uri string) ([]byte, error) {
	name, err := locate(s, uri)
	if err != nil {
		return nil, err
	}
	resp, err := s.do(ctx, http.MethodGet, s.key(name), nil)
	if err != nil {
		return nil, fmt.Errorf("resultstore: getting %s: %w", uri, err)
	}
	defer resp.Body.Close()
	return readLimited(resp.Body, s.max, uri)
}

// s3Error is S3's error answer. A missing object (NoSuchKey) also matches
// fs.ErrNotExist, as the directory store's does.
type s3Error struct {
	Status  int
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *s3Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("S3 answered %d", e.Status)
	}
	return fmt.Sprintf("S3 answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *s3Error) Is(target error) bool {
	return target == fs.ErrNotExist && (e.Code == "NoSuchKey" || e.Status == http.StatusNotFound && e.Code == "")
}

// do sends one signed request for key, retrying a network error or a 5xx;
// a 2xx answer's body is the caller's to close.
func (s *s3Store) do(ctx context.Context, method, key string, body []byte) (*http.Response, error) {
	var err error
	for attempt := range s3Attempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(100<<attempt) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		var resp *http.Response
		resp, err = s.send(ctx, method, key, body)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue
		}
		if resp.StatusCode < 300 {
			return resp, nil
		}
		answer := &s3Error{Status: resp.StatusCode}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		_ = xml.Unmarshal(raw, answer)
		err = answer
		if resp.StatusCode < 500 {
			return nil, err
		}
	}
	return nil, err
}

func (s *s3Store) send(ctx context.Context, method, key string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.objectURL(key), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if method == http.MethodPut {
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	creds, err := s.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("retrieving AWS credentials: %w", err)
	}
	if err := s.signer.SignHTTP(ctx, creds, req, hash, "s3", s.cfg.Region, time.Now().UTC()); err != nil {
		return nil, fmt.Errorf("signing the request: %w", err)
	}
	return s.cfg.HTTPClient.Do(req)
}

// objectURL addresses key as the SDK's client did: path style under a
// configured endpoint (AWS_ENDPOINT_URL: moto, LocalStack), virtual-hosted on
// AWS (path style for a bucket name with dots, which TLS cannot cover).
func (s *s3Store) objectURL(key string) string {
	path := "/" + escapeKey(key)
	if s.cfg.BaseEndpoint != nil {
		return strings.TrimRight(*s.cfg.BaseEndpoint, "/") + "/" + s.bucket + path
	}
	domain := "amazonaws.com"
	if strings.HasPrefix(s.cfg.Region, "cn-") {
		domain = "amazonaws.com.cn"
	}
	if strings.Contains(s.bucket, ".") {
		return "https://s3." + s.cfg.Region + "." + domain + "/" + s.bucket + path
	}
	return "https://" + s.bucket + ".s3." + s.cfg.Region + "." + domain + path
}

// escapeKey is S3's URI encoding of an object key: every byte but the
// unreserved characters and the slashes between segments.
func escapeKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
