package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// TestAnswerOverTheLimit: an answer over MaxAnswerBytes is an error naming the
// limit and what to ask for instead, not a truncated body that fails to decode.
func TestAnswerOverTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.CopyN(w, zeros{}, MaxAnswerBytes+1)
	}))
	defer srv.Close()
	_, err := New(srv.URL, "").Execution(context.Background(), 7)
	var tooLarge *AnswerTooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "64 MiB (client.MaxAnswerBytes)") || !strings.Contains(err.Error(), "view=summary") {
		t.Fatalf("err = %v", err)
	}
	if tooLarge.Path != "/api/executions/7" {
		t.Fatalf("path %q", tooLarge.Path)
	}
}
