package lambdaemu

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A tiny function built with aws-lambda-go would pull in a dependency just for
// this test; the protocol is plain HTTP, so a shell-free Go program speaks it.
const echoFunction = `package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
)

func main() {
	api := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/invocation/"
	for i := 0; i < 2; i++ {
		resp, err := http.Get(api + "next")
		if err != nil {
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		if bytes.Contains(body, []byte("fail")) {
			http.Post(api+id+"/error", "application/json", bytes.NewReader([]byte(` + "`" + `{"errorMessage":"asked to fail","errorType":"Boom"}` + "`" + `)))
			continue
		}
		http.Post(api+id+"/response", "application/json", bytes.NewReader(append([]byte("echo:"), body...)))
	}
}
`

func TestEmulatorRunsABinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(echoFunction), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Env = append(os.Environ(), "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cmd := exec.Command(bin)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + e.Addr()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := e.Invoke(ctx, []byte(`{"hello":"world"}`))
	if err != nil || string(r.Payload) != `echo:{"hello":"world"}` || r.Error != "" {
		t.Fatalf("invoke: %q %v", r.Payload, err)
	}
	r, err = e.Invoke(ctx, []byte(`"fail"`))
	if err != nil || !strings.Contains(r.Error, "Boom: asked to fail") {
		t.Fatalf("error invoke: %+v %v", r, err)
	}
}
