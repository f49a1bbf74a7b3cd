package localgw_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/dev/localgw"
)

// TestConcurrentInvokesGetTheirOwnAnswer: many requests at once through one
// gateway, each answered by the same handlers; every caller must get its own
// response. aws-lambda-go's Invoke returns bytes of a pooled buffer that goes
// back to the pool before the caller reads them, so sharing one lambda.Handler
// between concurrent requests hands callers each other's (or torn) responses.
func TestConcurrentInvokesGetTheirOwnAnswer(t *testing.T) {
	// Every function echoes the request path, padded so that responses are
	// large enough for a reused buffer to be overwritten while it is read.
	pad := strings.Repeat("x", 8<<10)
	echo := func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: ev.RawPath + "|" + pad,
			Headers: map[string]string{"Content-Type": "text/plain"}}, nil
	}
	handlers := map[string]any{}
	for _, fn := range api.Functions() {
		handlers[fn] = echo
	}
	gw, err := localgw.New(handlers, localgw.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 64, 100
	var wrong, broken atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				path := fmt.Sprintf("/api/executions/%d/status", c*each+i+1)
				rec := httptest.NewRecorder()
				gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				body, _ := io.ReadAll(rec.Result().Body)
				switch {
				case rec.Code != 200:
					broken.Add(1)
				case string(body) != path+"|"+pad:
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if wrong.Load() > 0 || broken.Load() > 0 {
		t.Fatalf("of %d concurrent requests, %d got another caller's answer and %d a malformed one (502)",
			callers*each, wrong.Load(), broken.Load())
	}
}
