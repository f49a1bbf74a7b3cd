package resultstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/noetl-go/noetl/shared/config/mototest"
	"github.com/noetl-go/noetl/shared/resultstore"
)

// motoFreeConfig is an SDK configuration that never reads the environment or
// ~/.aws, for opening s3:// stores in tests that make no request.
func motoFreeConfig() aws.Config {
	return aws.Config{Region: mototest.Region, Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}
}

const (
	bucket      = "noetl-results"
	otherBucket = "noetl-other"
)

// s3Fixture is a moto_server with the two buckets created.
type s3Fixture struct {
	cfg    aws.Config
	client *s3.Client
}

func newS3(t *testing.T) *s3Fixture {
	t.Helper()
	url := mototest.Start(t)
	mototest.IsolateSDK(t)
	cfg := mototest.Config(url)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	for _, b := range []string{bucket, otherBucket} {
		_, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{
			Bucket:                    aws.String(b),
			CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(mototest.Region)},
		})
		if err != nil {
			t.Fatalf("CreateBucket %s: %v", b, err)
		}
	}
	return &s3Fixture{cfg: cfg, client: client}
}

func (f *s3Fixture) open(t *testing.T, url string, maxBytes int64) resultstore.Store {
	t.Helper()
	s, err := resultstore.Open(context.Background(), url, resultstore.Options{MaxBytes: maxBytes, AWS: &f.cfg})
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	return s
}

func (f *s3Fixture) putRaw(t *testing.T, b, key string, data []byte) {
	t.Helper()
	_, err := f.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("PutObject s3://%s/%s: %v", b, key, err)
	}
}

// TestS3 runs the S3 store against a real moto_server (one per run).
func TestS3(t *testing.T) {
	f := newS3(t)
	t.Run("PutGet", func(t *testing.T) { testS3PutGet(t, f) })
	t.Run("NoPrefix", func(t *testing.T) { testS3NoPrefix(t, f) })
	t.Run("Owns", func(t *testing.T) { testS3Owns(t, f) })
	t.Run("GetNotOwned", func(t *testing.T) { testS3GetNotOwned(t, f) })
	t.Run("GetMissing", func(t *testing.T) { testS3GetMissing(t, f) })
	t.Run("TooLarge", func(t *testing.T) { testS3TooLarge(t, f) })
	t.Run("BadNames", func(t *testing.T) { testS3BadNames(t, f) })
	t.Run("OwnExecution", func(t *testing.T) { testOwnExecution(t, f.open(t, "s3://"+bucket+"/scoped", 0)) })
	t.Run("OwnExecutionNoPrefix", func(t *testing.T) { testOwnExecution(t, f.open(t, "s3://"+bucket, 0)) })
}

func testS3PutGet(t *testing.T, f *s3Fixture) {
	ctx := context.Background()
	s := f.open(t, "s3://"+bucket+"/results/", 0)
	if got, want := s.URL(), "s3://"+bucket+"/results"; got != want {
		t.Errorf("URL() = %q, want %q (slashes around the prefix trimmed)", got, want)
	}
	cases := []struct {
		name string
		data []byte
		key  string
	}{
		{"exec-1/step-a.json", []byte(`{"rows":[1,2,3]}`), "results/exec-1/step-a.json"},
		{"a/./b/../c.json", []byte(`"cleaned"`), "results/a/c.json"},
		{"empty.json", []byte{}, "results/empty.json"},
		{"big.json", bytes.Repeat([]byte("z"), 300<<10), "results/big.json"}, // over the 256 KiB inline limit
		// URI syntax characters must survive the URI round trip (the URI is
		// escaped; the key is not).
		{"odd/a#b?c%d e.json", []byte(`"odd"`), "results/odd/a#b?c%d e.json"},
	}
	for _, tc := range cases {
		uri, err := s.Put(ctx, tc.name, tc.data)
		if err != nil {
			t.Fatalf("Put(%q): %v", tc.name, err)
		}
		if want := (&url.URL{Scheme: "s3", Host: bucket, Path: "/" + tc.key}).String(); uri != want {
			t.Errorf("Put(%q) = %q, want %q", tc.name, uri, want)
		}
		if !resultstore.Owns(s, uri) {
			t.Errorf("the store does not own the URI Put returned: %q", uri)
		}
		got, err := s.Get(ctx, uri)
		if err != nil || !bytes.Equal(got, tc.data) {
			t.Errorf("Get(%q): %d bytes, %v; want the %d bytes put", uri, len(got), err, len(tc.data))
		}
		// The object really is in the bucket, typed as JSON.
		out, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(tc.key)})
		if err != nil {
			t.Fatalf("GetObject %s: %v", tc.key, err)
		}
		raw, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(raw, tc.data) || aws.ToString(out.ContentType) != "application/json" {
			t.Errorf("object %s: %d bytes, content type %q", tc.key, len(raw), aws.ToString(out.ContentType))
		}
	}
	// Overwrite.
	uri, err := s.Put(ctx, "exec-1/step-a.json", []byte(`"v2"`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, uri); err != nil || string(got) != `"v2"` {
		t.Errorf("after overwrite: %q %v", got, err)
	}
	// A second store over the same URL (another process: the server) reads
	// what the first (the worker) put.
	reader := f.open(t, s.URL(), 0)
	if got, err := reader.Get(ctx, uri); err != nil || string(got) != `"v2"` {
		t.Errorf("another store over %s: %q %v", s.URL(), got, err)
	}
}

func testS3NoPrefix(t *testing.T, f *s3Fixture) {
	ctx := context.Background()
	s := f.open(t, "s3://"+bucket, 0)
	uri, err := s.Put(ctx, "top/level.json", []byte(`1`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + bucket + "/top/level.json"; uri != want {
		t.Errorf("Put = %q, want %q", uri, want)
	}
	if got, err := s.Get(ctx, uri); err != nil || string(got) != "1" {
		t.Errorf("Get: %q %v", got, err)
	}
	for uri, want := range map[string]bool{
		"s3://" + bucket + "/anything.json":      true,
		"s3://" + bucket + "/results/x.json":     true,
		"s3://" + otherBucket + "/anything.json": false,
		"s3://" + bucket + "/../x.json":          false,
		"s3://" + bucket + "/":                   false,
		"s3://" + bucket:                         false,
	} {
		if got := resultstore.Owns(s, uri); got != want {
			t.Errorf("no prefix: Owns(%q) = %v, want %v", uri, got, want)
		}
	}
}

func testS3Owns(t *testing.T, f *s3Fixture) {
	s := f.open(t, "s3://"+bucket+"/results", 0)
	cases := []struct {
		uri  string
		want bool
	}{
		{"s3://" + bucket + "/results/x.json", true},
		{"s3://" + bucket + "/results/a/b/c.json", true},
		{"s3://" + otherBucket + "/results/x.json", false}, // another bucket
		{"s3://" + bucket + "/other/x.json", false},        // outside the prefix
		{"s3://" + bucket + "/x.json", false},
		{"s3://" + bucket + "/results-other/x.json", false}, // a prefix sibling
		{"s3://" + bucket + "/resultsx.json", false},
		{"s3://" + bucket + "/results", false}, // the prefix itself
		{"s3://" + bucket + "/results/", false},
		{"s3://" + bucket + "/results/../x.json", false},
		{"s3://" + bucket + "/results/a/../../x.json", false},
		{"s3://" + bucket + "/results/./x.json", false}, // not the key Put would write
		{"s3://" + bucket + "/results//x.json", false},
		{"s3://" + bucket + "//results/x.json", false},
		{"s3://" + strings.ToUpper(bucket) + "/results/x.json", false},
		{"s3://" + bucket + ".evil.example/results/x.json", false},
		{"file:///" + bucket + "/results/x.json", false},
		{"https://" + bucket + ".s3.amazonaws.com/results/x.json", false},
		{"s3:///results/x.json", false},
		{"", false},
		{"s3://%zz/results/x", false},
	}
	for _, tc := range cases {
		if got := resultstore.Owns(s, tc.uri); got != tc.want {
			t.Errorf("Owns(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
}

func testS3GetNotOwned(t *testing.T, f *s3Fixture) {
	ctx := context.Background()
	s := f.open(t, "s3://"+bucket+"/results", 0)
	// The objects exist: the store must refuse them, not read them.
	f.putRaw(t, otherBucket, "results/x.json", []byte(`"other bucket"`))
	f.putRaw(t, bucket, "private/x.json", []byte(`"outside the prefix"`))
	for _, uri := range []string{
		"s3://" + otherBucket + "/results/x.json",
		"s3://" + bucket + "/private/x.json",
		"s3://" + bucket + "/results/../private/x.json",
		"file:///etc/passwd",
	} {
		got, err := s.Get(ctx, uri)
		if err == nil || !strings.Contains(err.Error(), "is not inside the result store") {
			t.Errorf("Get(%q) = %q, %v; want an error saying it is outside the store", uri, got, err)
		}
	}
}

func testS3GetMissing(t *testing.T, f *s3Fixture) {
	s := f.open(t, "s3://"+bucket+"/results", 0)
	_, err := s.Get(context.Background(), "s3://"+bucket+"/results/never-put.json")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(fmt.Sprint(err), "NoSuchKey") {
		t.Errorf("Get of a missing key: %v, want fs.ErrNotExist saying NoSuchKey", err)
	}
	if errors.Is(err, resultstore.ErrTooLarge) {
		t.Errorf("a missing key is not too large: %v", err)
	}
}

func testS3TooLarge(t *testing.T, f *s3Fixture) {
	ctx := context.Background()
	const limit = 16
	s := f.open(t, "s3://"+bucket+"/limited", limit)
	for _, tc := range []struct {
		size     int
		tooLarge bool
	}{{limit, false}, {limit + 1, true}, {1 << 20, true}} {
		uri, err := s.Put(ctx, "sized.json", bytes.Repeat([]byte("x"), tc.size))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, uri)
		switch {
		case tc.tooLarge && !errors.Is(err, resultstore.ErrTooLarge):
			t.Errorf("%d bytes over a %d-byte limit: %d bytes, %v; want ErrTooLarge", tc.size, limit, len(got), err)
		case tc.tooLarge && got != nil:
			t.Errorf("%d bytes: ErrTooLarge came with data", tc.size)
		case !tc.tooLarge && (err != nil || len(got) != tc.size):
			t.Errorf("%d bytes within a %d-byte limit: %d bytes, %v", tc.size, limit, len(got), err)
		}
	}
}

func testS3BadNames(t *testing.T, f *s3Fixture) {
	ctx := context.Background()
	s := f.open(t, "s3://"+bucket+"/results", 0)
	for _, name := range []string{"", ".", "..", "/abs.json", "../x.json", "a/../../x.json"} {
		if uri, err := s.Put(ctx, name, []byte("x")); err == nil || !strings.Contains(err.Error(), "relative path inside the store") {
			t.Errorf("Put(%q) = %q, %v; want the name refused", name, uri, err)
		}
	}
	out, err := f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); !strings.HasPrefix(k, "results/") && !strings.HasPrefix(k, "limited/") &&
			!strings.HasPrefix(k, "private/") && k != "top/level.json" {
			t.Errorf("an object landed outside the prefixes the tests use: %s", k)
		}
	}
}
