package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// MaxNATSPayload bounds a value put, a message published and a value read
// (NATS's own default max_payload); a server with a smaller limit lowers it.
const MaxNATSPayload = 1 << 20

// maxNATSKeys bounds the keys kv_keys lists.
const maxNATSKeys = 10_000

// natsOperations are the operations the nats tool runs.
var natsOperations = []string{"kv_get", "kv_put", "kv_delete", "kv_keys", "kv_purge", "js_publish", "publish"}

// runNATS runs one NATS operation (NoETL's nats tool): KV get, put, delete,
// keys and purge, JetStream publish, and a plain publish. The server is the one
// the `auth` credential names ({url | dsn, user, password, token}), else `url`,
// else the NATS this worker takes its commands from. Results are NoETL's:
// {status, bucket, key, value, revision, …}; a missing key is status
// not_found, not an error. kv_put creates a missing bucket (ttl, seconds, is
// then its max age: NATS expires keys per bucket).
func (r *Registry) runNATS(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	cfg := it.Config
	fail := func(err error) toolresult.Envelope { return failure(toolresult.KindTool, "nats: "+err.Error()) }
	op, err := stringField(cfg, keyNames(toolkind.NATS, "operation")...)
	if err != nil {
		return fail(err)
	}
	if !slices.Contains(natsOperations, op) {
		return fail(fmt.Errorf("operation: %q is not one this worker runs (%s)", op, strings.Join(natsOperations, ", ")))
	}
	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	js, closeConn, err := r.natsConn(ctx, cfg)
	var dial *natsDialError
	switch {
	case errors.As(err, &dial):
		return failure(toolresult.KindConnection, "nats: "+err.Error())
	case err != nil:
		// The step's own configuration: retrying cannot help.
		return fail(err)
	}
	defer closeConn()
	limit := MaxNATSPayload
	if mp := js.Conn().MaxPayload(); mp > 0 && int(mp) < limit {
		limit = int(mp)
	}
	data, err := natsOperation(ctx, js, op, cfg, limit)
	if err != nil {
		if ctx.Err() != nil {
			return ctxEnvelope(ctx, "nats: "+op)
		}
		return fail(err)
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}
}

// natsConn is the JetStream context to use and what closes it.
func (r *Registry) natsConn(ctx context.Context, cfg map[string]any) (jetstream.JetStream, func(), error) {
	var url, user, password, token string
	if err := stringFields(cfg, stringKey{keyNames(toolkind.NATS, "url"), &url}, stringKey{keyNames(toolkind.NATS, "user"), &user},
		stringKey{keyNames(toolkind.NATS, "password"), &password}, stringKey{keyNames(toolkind.NATS, "token"), &token}); err != nil {
		return nil, nil, err
	}
	alias, err := authAlias(cfg)
	if err != nil {
		return nil, nil, err
	}
	if alias != "" {
		cred, err := r.lookupCredential(ctx, alias)
		if err != nil {
			return nil, nil, err
		}
		url = cmp.Or(cred.DSN, extraString(cred.Extra, "url", "nats_url", "server", "servers"), url)
		user, password = cmp.Or(cred.User, user), cmp.Or(cred.Password, password)
		token = cmp.Or(extraString(cred.Extra, "token", "nats_token"), token)
		if url == "" {
			return nil, nil, fmt.Errorf("credential %q names no NATS server (give it url)", alias)
		}
		for _, server := range strings.Split(url, ",") {
			u, err := natsServerURL(server)
			if err != nil {
				return nil, nil, fmt.Errorf("credential %q: NATS server %q: %w", alias, strings.TrimSpace(server), err)
			}
			if err := CheckCredentialHost(alias, cred, u.Hostname(), urlPort(u)); err != nil {
				return nil, nil, err
			}
		}
	}
	if url == "" {
		if r.nats == nil {
			return nil, nil, errors.New("no NATS server: give url, or auth naming a credential with url (this worker has no NATS of its own)")
		}
		return r.nats, func() {}, nil
	}
	opts := []nats.Option{nats.Name("noetl-worker nats tool"), nats.Timeout(10 * time.Second)}
	if alias != "" {
		// The servers a server advertises were not checked against the
		// credential's scope: a reconnect must not carry it to them.
		opts = append(opts, nats.IgnoreDiscoveredServers())
	}
	switch {
	case token != "":
		opts = append(opts, nats.Token(token))
	case user != "":
		opts = append(opts, nats.UserInfo(user, password))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, &natsDialError{err}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

func extraString(m map[string]any, keys ...string) string {
	s, _ := stringField(m, keys...)
	return s
}

func natsOperation(ctx context.Context, js jetstream.JetStream, op string, cfg map[string]any, limit int) (map[string]any, error) {
	required := func(name string, names []string) (string, error) {
		v, err := stringField(cfg, names...)
		if err == nil && v == "" {
			err = fmt.Errorf("%s is required for %s", name, op)
		}
		return v, err
	}
	payload := func(name string, names []string) ([]byte, error) {
		v := valueOf(cfg, names...)
		var b []byte
		switch x := v.(type) {
		case nil:
			return nil, fmt.Errorf("%s is required for %s", name, op)
		case string:
			b = []byte(x)
		case map[string]any, []any:
			var err error
			if b, err = jsonx.Marshal(x); err != nil {
				return nil, err
			}
		default:
			b = []byte(tmpl.Text(x))
		}
		if len(b) > limit {
			return nil, fmt.Errorf("%s is %d bytes, over the %d-byte limit of a NATS message", name, len(b), limit)
		}
		return b, nil
	}
	if op == "js_publish" || op == "publish" {
		subject, err := required("subject", keyNames(toolkind.NATS, "subject"))
		if err != nil {
			return nil, err
		}
		if subject == notify.SubjectPrefix || strings.HasPrefix(subject, notify.SubjectPrefix+".") {
			return nil, fmt.Errorf("subject %s belongs to this server's command notifications; publish elsewhere", subject)
		}
		b, err := payload("data", keyNames(toolkind.NATS, "data"))
		if err != nil {
			return nil, err
		}
		msg := nats.NewMsg(subject)
		msg.Data = b
		headers, err := mapField(cfg, keyNames(toolkind.NATS, "headers")...)
		if err != nil {
			return nil, err
		}
		for k, v := range headers {
			if v != nil {
				msg.Header.Set(k, tmpl.Text(v))
			}
		}
		if op == "publish" {
			if err := js.Conn().PublishMsg(msg); err != nil {
				return nil, err
			}
			if err := js.Conn().FlushWithContext(ctx); err != nil {
				return nil, err
			}
			return map[string]any{"status": "success", "subject": subject, "bytes": int64(len(b))}, nil
		}
		var opts []jetstream.PublishOpt
		if stream, _ := stringField(cfg, keyNames(toolkind.NATS, "stream")...); stream != "" {
			opts = append(opts, jetstream.WithExpectStream(stream))
		}
		ack, err := js.PublishMsg(ctx, msg, opts...)
		if err != nil {
			return nil, err
		}
		return map[string]any{"status": "success", "stream": ack.Stream, "seq": int64(ack.Sequence), "duplicate": ack.Duplicate}, nil
	}
	bucket, err := required("bucket", keyNames(toolkind.NATS, "bucket"))
	if err != nil {
		return nil, err
	}
	if op == "kv_put" {
		return natsPut(ctx, js, cfg, bucket, payload)
	}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("KV bucket %s does not exist (kv_put creates it)", bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("KV bucket %s: %w", bucket, err)
	}
	if op == "kv_keys" {
		return natsKeys(ctx, kv, cfg, bucket)
	}
	key, err := required("key", keyNames(toolkind.NATS, "key"))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"status": "success", "bucket": bucket, "key": key}
	switch op {
	case "kv_get":
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			out["status"], out["value"] = "not_found", nil
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out["value"] = natsValue(e.Value())
		out["revision"], out["created"] = int64(e.Revision()), e.Created().UTC().Format(time.RFC3339Nano)
	case "kv_delete":
		err = kv.Delete(ctx, key)
	case "kv_purge":
		err = kv.Purge(ctx, key)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func natsPut(ctx context.Context, js jetstream.JetStream, cfg map[string]any, bucket string, payload func(string, []string) ([]byte, error)) (map[string]any, error) {
	key, err := stringField(cfg, keyNames(toolkind.NATS, "key")...)
	if err != nil || key == "" {
		return nil, errors.Join(err, errors.New("key is required for kv_put"))
	}
	b, err := payload("value", keyNames(toolkind.NATS, "value"))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"status": "success", "bucket": bucket, "key": key}
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		ttl, terr := durationField(cfg, keyNames(toolkind.NATS, "ttl")...)
		if terr != nil {
			return nil, terr
		}
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, TTL: ttl, MaxValueSize: MaxNATSPayload})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket) // made by a step running beside this one
		}
		out["bucket_created"] = err == nil
	}
	if err != nil {
		return nil, fmt.Errorf("KV bucket %s: %w", bucket, err)
	}
	rev, err := kv.Put(ctx, key, b)
	if err != nil {
		return nil, err
	}
	out["revision"] = int64(rev)
	return out, nil
}

func natsKeys(ctx context.Context, kv jetstream.KeyValue, cfg map[string]any, bucket string) (map[string]any, error) {
	pattern, err := stringField(cfg, keyNames(toolkind.NATS, "pattern")...)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]any{"status": "success", "bucket": bucket, "keys": []any{}, "count": int64(0)}, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	keys, truncated := []any{}, false
	for k := range lister.Keys() {
		if pattern != "" {
			if ok, _ := path.Match(pattern, k); !ok {
				continue
			}
		}
		if len(keys) == maxNATSKeys {
			truncated = true
			break
		}
		keys = append(keys, k)
	}
	out := map[string]any{"status": "success", "bucket": bucket, "keys": keys, "count": int64(len(keys))}
	if truncated {
		out["truncated"] = true
	}
	return out, nil
}

// natsValue is a stored value as NoETL returns it: JSON when it parses, else text.
func natsValue(b []byte) any {
	if v, err := jsonx.Decode(b); err == nil {
		return v
	}
	return string(b)
}

// natsDialError is a failure to reach the server: a connection error, which
// a retry policy may retry, unlike a refused configuration.
type natsDialError struct{ err error }

func (e *natsDialError) Error() string { return "connect: " + e.err.Error() }
func (e *natsDialError) Unwrap() error { return e.err }

// natsServerURL reads one server of a NATS url list as the client will dial
// it: without a scheme it is nats://, as nats.go reads it. A server whose
// host cannot be read is an error, so no server escapes the credential's
// host check.
func natsServerURL(server string) (*neturl.URL, error) {
	server = strings.TrimSpace(server)
	if !strings.Contains(server, "://") {
		server = "nats://" + server
	}
	u, err := neturl.Parse(server)
	if err != nil {
		return nil, err
	}
	if u.Hostname() == "" {
		return nil, errors.New("it names no host (give nats://host:port)")
	}
	return u, nil
}
