// Package mototest starts a real moto_server (the AWS API emulator that
// python's moto ships) for tests of the Secrets Manager / SSM code paths.
package mototest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region tests use against moto.
const Region = "eu-west-1"

// Start runs moto_server on a free 127.0.0.1 port until the test ends and
// returns its URL. Without moto_server on PATH it skips, or fails when CI is
// set (CI must run every test).
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server is not on PATH and CI is set: install it (pip install 'moto[server]'): %v", err)
		}
		t.Skip("moto_server is not on PATH (pip install 'moto[server]'); skipping the AWS emulator test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(t.TempDir(), "moto.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto_server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("moto_server not ready on %s after 30s: %v\n%s", base, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// IsolateSDK points the SDK's default chain (which reads the process
// environment) at dummy credentials, away from ~/.aws and IMDS, and clears
// region and endpoint so that only what the test passes explicitly counts.
func IsolateSDK(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// Unset rather than empty: the aws CLI rejects AWS_PROFILE="".
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "") // restores the old value after the test
		os.Unsetenv(k)
	}
}

// Config is an SDK configuration for creating fixtures in moto at url.
func Config(url string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(url),
	}
}
