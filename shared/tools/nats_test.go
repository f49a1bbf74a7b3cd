package tools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// embeddedNATS starts an embedded NATS and connects to it.
func embeddedNATS(t *testing.T) (string, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	url := devstacktest.NATS(t).URL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return url, nc, js
}

// TestNATSKV runs NoETL's test_nats_kv sequence against the embedded NATS,
// once through the worker's own connection and once through a credential
// alias: put (creating the bucket), get (JSON back as JSON), keys, delete, get
// again (not_found, not an error), in NoETL's result shapes.
func TestNATSKV(t *testing.T) {
	t.Parallel()
	url, _, js := embeddedNATS(t)
	for _, c := range []struct {
		name string
		r    *Registry
		auth map[string]any
	}{
		{"worker's NATS", New(Options{NATS: js}), nil},
		{"credential alias", New(Options{Credentials: CredentialMap{"nats_credential": {Kind: "nats", Extra: map[string]any{"url": url}}}}),
			map[string]any{"auth": "nats_credential"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket := "sessions_" + strings.ReplaceAll(c.name, " ", "_")[:6]
			do := func(op string, kv ...any) map[string]any {
				t.Helper()
				cfg := map[string]any{"kind": "nats", "operation": op, "bucket": bucket}
				for k, v := range c.auth {
					cfg[k] = v
				}
				for i := 0; i+1 < len(kv); i += 2 {
					cfg[kv[i].(string)] = kv[i+1]
				}
				env := execTool(t, c.r, cfg, nil)
				mustSucceed(t, env)
				return dataMap(t, env)
			}
			value := map[string]any{"session_token": "test_session_123", "user_id": 1, "is_active": true}
			put := do("kv_put", "key", "test_session_123", "value", value)
			if put["status"] != "success" || put["revision"] != int64(1) || put["bucket_created"] != true {
				t.Fatalf("put %v", put)
			}
			got := do("kv_get", "key", "test_session_123")
			same(t, "value", got["value"], value)
			if got["status"] != "success" || got["revision"] != int64(1) || got["created"] == nil {
				t.Fatalf("get %v", got)
			}
			do("kv_put", "key", "plain", "value", "just text")
			if v := do("kv_get", "key", "plain")["value"]; v != "just text" {
				t.Fatalf("text value %#v", v)
			}
			same(t, "keys", do("kv_keys", "pattern", "test_*")["keys"], []any{"test_session_123"})
			if d := do("kv_delete", "key", "test_session_123"); d["status"] != "success" || d["key"] != "test_session_123" {
				t.Fatalf("delete %v", d)
			}
			if g := do("kv_get", "key", "test_session_123"); g["status"] != "not_found" || g["value"] != nil {
				t.Fatalf("get after delete %v", g)
			}
		})
	}
}

// TestNATSPublish: js_publish lands in a stream, publish on a plain subject;
// the server's own command subjects, payloads over the limit, a missing bucket
// and unknown operations are refused naming the reason.
func TestNATSPublish(t *testing.T) {
	t.Parallel()
	_, nc, js := embeddedNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("plain.hello")
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{NATS: js})
	env := execTool(t, r, map[string]any{"kind": "nats", "operation": "js_publish", "subject": "events.order", "data": map[string]any{"id": 7},
		"headers": map[string]any{"X-Trace": "t1"}}, nil)
	mustSucceed(t, env)
	if d := dataMap(t, env); d["stream"] != "EVENTS" || d["seq"] != int64(1) || d["duplicate"] != false {
		t.Fatalf("js_publish %v", d)
	}
	m, err := stream.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != `{"id":7}` || m.Header.Get("X-Trace") != "t1" {
		t.Fatalf("stored %v %q %v", err, m.Data, m.Header)
	}
	mustSucceed(t, execTool(t, r, map[string]any{"kind": "nats", "operation": "publish", "subject": "plain.hello", "data": "hi"}, nil))
	if msg, err := sub.NextMsg(5 * time.Second); err != nil || string(msg.Data) != "hi" {
		t.Fatalf("plain publish: %v %v", msg, err)
	}
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"operation": "js_publish", "subject": "noetl.commands.shared.1", "data": "x"}, "belongs to this server's command notifications"},
		{map[string]any{"operation": "publish", "subject": "big", "data": strings.Repeat("x", MaxNATSPayload+1)}, "over the"},
		{map[string]any{"operation": "kv_get", "bucket": "nope", "key": "k"}, "KV bucket nope does not exist"},
		{map[string]any{"operation": "object_get", "bucket": "b"}, `"object_get" is not one this worker runs`},
		{map[string]any{"operation": "kv_put", "bucket": "b"}, "key is required for kv_put"},
	} {
		c.cfg["kind"] = "nats"
		env := execTool(t, r, c.cfg, nil)
		if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, c.want) {
			t.Errorf("%v: %+v, want an error naming %q", c.cfg["operation"], env.Error, c.want)
		}
	}
	if env := execTool(t, New(Options{}), map[string]any{"kind": "nats", "operation": "kv_get", "bucket": "b", "key": "k"}, nil); env.Status != toolresult.StatusError ||
		!strings.Contains(env.Error.Message, "no NATS server") {
		t.Errorf("no NATS: %+v", env.Error)
	}
}
