package resultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3Store keeps results as objects under one bucket prefix.
type s3Store struct {
	client *s3.Client
	bucket string
	prefix string // no leading or trailing slash; may be empty
	max    int64
}

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
	// Path-style addressing works with S3 and with every emulator (moto,
	// LocalStack), which do not resolve bucket subdomains.
	client := s3.NewFromConfig(*cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
	return &s3Store{client: client, bucket: u.Host, prefix: strings.Trim(u.Path, "/"), max: opt.MaxBytes}, nil
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
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentType: aws.String("application/json")})
	if err != nil {
		return "", fmt.Errorf("resultstore: putting s3://%s/%s: %w", s.bucket, key, err)
	}
	return (&url.URL{Scheme: "s3", Host: s.bucket, Path: "/" + key}).String(), nil
}

// objectKey returns the key a URI names when it lies under the prefix.
func (s *s3Store) objectKey(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host != s.bucket {
		return "", false
	}
	key := strings.TrimPrefix(u.Path, "/")
	if c, err := cleanName(key); err != nil || c != key {
		return "", false
	}
	if s.prefix != "" && !strings.HasPrefix(key, s.prefix+"/") {
		return "", false
	}
	return key, true
}

func (s *s3Store) Owns(uri string) bool {
	_, ok := s.objectKey(uri)
	return ok
}

func (s *s3Store) Get(ctx context.Context, uri string) ([]byte, error) {
	key, ok := s.objectKey(uri)
	if !ok {
		return nil, fmt.Errorf("resultstore: %s is not inside the result store %s", uri, s.URL())
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	var missing *s3types.NoSuchKey
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("resultstore: getting %s: %w (%w)", uri, fs.ErrNotExist, err)
	}
	if err != nil {
		return nil, fmt.Errorf("resultstore: getting %s: %w", uri, err)
	}
	defer out.Body.Close()
	return readLimited(out.Body, s.max, uri)
}
