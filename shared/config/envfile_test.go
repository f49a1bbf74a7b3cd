package config

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// envFile is config-env.json at the repository root.
type envFile struct {
	Functions map[string][]string `json:"functions"`
	SAMOnly   []string            `json:"sam_only"`
	Local     []string            `json:"local"`
	Runtime   []string            `json:"runtime"`
}

var functionNames = []string{"catalog", "claim", "execute", "ingest", "keychain", "outbox", "replay", "schedules", "status"}

func readEnvFile(t *testing.T) envFile {
	t.Helper()
	b, err := os.ReadFile("../../config-env.json")
	if err != nil {
		t.Fatal(err)
	}
	var f envFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("config-env.json: %v", err)
	}
	return f
}

func category(where string) string { return strings.SplitN(where, ".", 2)[0] }

// recorder is a getenv that remembers every name asked for.
type recorder struct {
	mu    sync.Mutex
	env   map[string]string
	names map[string]bool
}

func (r *recorder) getenv(k string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[k] = true
	return r.env[k]
}

// TestConfigEnvFile fails when Load reads a name config-env.json does not
// list, or config-env.json lists a name Load never reads.
func TestConfigEnvFile(t *testing.T) {
	f := readEnvFile(t)
	read := map[string]bool{}
	// Several shapes of environment so a name read only on some branch is seen.
	for _, env := range []map[string]string{
		{},
		{EnvDatabaseURL: localDB, EnvShardURLs: localDB + "2", EnvAPIToken: "a", EnvNATSURL: "nats://n:4222"},
		{EnvLambdaFunctionName: "f", EnvDatabaseURL: localDB, EnvAllowOpen: "true"},
		{EnvLambdaFunctionName: "f", EnvDBSecretARN: "arn:x", EnvShardMapParam: "/m", EnvAWSRegion: "eu-west-1",
			EnvAWSEndpointURL: "http://127.0.0.1:1", EnvAPITokensSecretARN: "arn:t", EnvNATSURL: "nats://n:4222", EnvNATSCredsSecretARN: "arn:n"},
	} {
		r := &recorder{env: env, names: map[string]bool{}}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the AWS branch must fail fast, not reach the network
		_, _ = Load(ctx, r.getenv)
		maps.Copy(read, r.names)
	}

	listed := map[string]string{}
	addAll := func(where string, names []string) {
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Errorf("config-env.json %s: keep the list sorted and without duplicates: %q", where, names)
		}
		for _, n := range names {
			// A name may be set on several functions, but belongs to one category.
			if prev, ok := listed[n]; ok && category(prev) != category(where) {
				t.Errorf("config-env.json lists %s under both %s and %s", n, prev, where)
			}
			listed[n] = where
		}
	}
	if got := slices.Sorted(maps.Keys(f.Functions)); !slices.Equal(got, functionNames) {
		t.Errorf("config-env.json functions %q, want %q", got, functionNames)
	}
	for _, fn := range functionNames {
		addAll("functions."+fn, f.Functions[fn])
		for _, n := range f.Functions[fn] {
			if !strings.HasPrefix(n, "NOETL_") {
				t.Errorf("functions.%s lists %s: only NOETL_* names are ours to set on a Lambda", fn, n)
			}
		}
	}
	addAll("sam_only", f.SAMOnly)
	addAll("local", f.Local)
	addAll("runtime", f.Runtime)

	var missing, unread []string
	for n := range read {
		if _, ok := listed[n]; !ok {
			missing = append(missing, n)
		}
	}
	for n := range listed {
		if !read[n] {
			unread = append(unread, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(unread)
	if len(missing) > 0 {
		t.Errorf("Load reads %q but config-env.json does not list them: add each under functions (set on the Lambda), local, sam_only or runtime", missing)
	}
	if len(unread) > 0 {
		t.Errorf("config-env.json lists %q but Load never reads them: remove them", unread)
	}

	// Functions that publish commands need NATS and the lease (keychain,
	// catalog and replay never do); the others
	// must not get NATS credentials they never use (least privilege).
	for _, fn := range functionNames {
		has := slices.Contains(f.Functions[fn], EnvNATSCredsSecretARN)
		if want := fn != "catalog" && fn != "replay" && fn != "keychain"; has != want {
			t.Errorf("functions.%s: NATS creds listed = %v, want %v", fn, has, want)
		}
		// Only ingest reads results stored by reference, so only its role
		// may read the results bucket.
		if has, want := slices.Contains(f.Functions[fn], EnvResultStore), fn == "ingest"; has != want {
			t.Errorf("functions.%s: %s listed = %v, want %v", fn, EnvResultStore, has, want)
		}
		// Only the keychain function seals and opens credentials, so only its
		// role may use the keychain's KMS key.
		if has, want := slices.Contains(f.Functions[fn], EnvKeychainKMSKeyID), fn == "keychain"; has != want {
			t.Errorf("functions.%s: %s listed = %v, want %v", fn, EnvKeychainKMSKeyID, has, want)
		}
		// Only the schedules function writes scheduler entries.
		if has, want := slices.Contains(f.Functions[fn], EnvSchedulerGroup), fn == "schedules"; has != want {
			t.Errorf("functions.%s: %s listed = %v, want %v", fn, EnvSchedulerGroup, has, want)
		}
		for _, must := range []string{EnvDBSecretARN, EnvShardMapParam, EnvAPITokensSecretARN, EnvAllowOpen, EnvStage} {
			if !slices.Contains(f.Functions[fn], must) {
				t.Errorf("functions.%s lacks %s, which every function needs", fn, must)
			}
		}
	}
}
