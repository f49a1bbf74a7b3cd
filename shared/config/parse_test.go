package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/commandbus"
)

func TestParseDBSecret(t *testing.T) {
	s, err := parseDBSecret([]byte(`{"username":"u","password":"p","host":"h","port":5432,"dbname":"d","engine":"aurora-postgresql","dbClusterIdentifier":"c"}`))
	if err != nil || s.Username != "u" || s.Password != "p" || s.Host != "h" || s.Port != 5432 || s.DBName != "d" {
		t.Fatalf("RDS shape: %+v %v", s, err)
	}
	s, err = parseDBSecret([]byte(`{"username":"u","password":"p","port":"6432"}`))
	if err != nil || s.Port != 6432 {
		t.Fatalf("port as a string: %+v %v", s, err)
	}
	for in, want := range map[string]string{
		`not json`:         "not the RDS secret JSON",
		`{"username":"u"}`: "username or password is empty",
		`{"username":"u","password":"p","port":70000}`:       "not a TCP port",
		`{"username":"u","password":"p","port":"x"}`:         "not a TCP port",
		`{"username":"u","password":"p","engine":"mysql"}`:   `engine is "mysql"`,
		`{"username":"u","password":"p","host":["h1","h2"]}`: "not the RDS secret JSON",
	} {
		if _, err := parseDBSecret([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDBSecret(%s): %v, want %q", in, err, want)
		}
	}
}

func TestParseShardMap(t *testing.T) {
	m, err := parseShardMap([]byte(`{"cluster":{"host":"c","port":5432,"dbname":"noetl"},
		"shards":[{"host":"c","port":5432,"dbname":"noetl"},{"host":"s1","dbname":"noetl","secret_arn":"arn:s1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Cluster.Host != "c" || len(m.Shards) != 2 || m.Shards[1].SecretARN != "arn:s1" || m.Shards[1].Port != 0 {
		t.Errorf("parsed %+v", m)
	}
	if m, err := parseShardMap([]byte(`{"cluster":{"host":"c","dbname":"noetl"}}`)); err != nil || len(m.Shards) != 0 {
		t.Errorf("cluster only: %+v %v", m, err)
	}
	for in, want := range map[string]string{
		`[]`:            "not the shard map JSON",
		`{"shards":[]}`: `no "cluster" entry`,
		`{"cluster":{"host":"c","dbname":"d","db_name":"x"}}`:                                                  `unknown field "db_name"`,
		`{"cluster":{"dbname":"d"}}`:                                                                           "cluster: host and dbname are required",
		`{"cluster":{"host":"c","dbname":"d"},"shards":[{"host":"s"}]}`:                                        "shards[0]: host and dbname are required",
		`{"cluster":{"host":"c","dbname":"d"},"shards":[{"host":"s","dbname":"d"},{"host":"s","dbname":"d"}]}`: "shards[0] and shards[1] are the same database",
		`{"cluster":{"host":"c","dbname":"d","port":0.5}}`:                                                     "not a TCP port",
	} {
		if _, err := parseShardMap([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseShardMap(%s): %v, want %q", in, err, want)
		}
	}
	many := `{"cluster":{"host":"c","dbname":"d"},"shards":[` + strings.Repeat(`{"host":"s","dbname":"d"},`, MaxShards) + `{"host":"s","dbname":"e"}]}`
	if _, err := parseShardMap([]byte(many)); err == nil || !strings.Contains(err.Error(), "1025 shards: at most 1024") {
		t.Errorf("1025 shards: %v", err)
	}
}

func TestParseTokensSecret(t *testing.T) {
	tok, err := parseTokensSecret([]byte(`{"api":"a1","worker":["w1"," w2 ",""],"internal":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tok.API, []string{"a1"}) || !slices.Equal(tok.Worker, []string{"w1", "w2"}) || tok.Internal != nil {
		t.Errorf("tokens %+v (blanks must be dropped so an empty token never authenticates)", tok)
	}
	if tok, _ := parseTokensSecret([]byte(`{}`)); !tok.Empty() {
		t.Errorf("empty secret gave %+v", tok)
	}
	for in, want := range map[string]string{
		`"a"`:              "not the tokens JSON",
		`{"apis":"a"}`:     `unknown key "apis"`,
		`{"api":1}`:        `key "api": must be a string or a list of strings`,
		`{"worker":[1,2]}`: `key "worker": must be a string or a list`,
	} {
		if _, err := parseTokensSecret([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTokensSecret(%s): %v, want %q", in, err, want)
		}
	}
}

const testCreds = `-----BEGIN NATS USER JWT-----
eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.e30.c2ln
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.

-----BEGIN USER NKEY SEED-----
SUAEXAMPLESEEDEXAMPLESEEDEXAMPLESEEDEXAMPLESEEDEXAMPLESE
------END USER NKEY SEED------
`

func TestParseNATSCreds(t *testing.T) {
	n, err := parseNATSCreds([]byte("\n" + testCreds))
	if err != nil || n.AuthKind() != "creds" || !strings.HasPrefix(string(n.Creds), "-----BEGIN NATS USER JWT-----") {
		t.Errorf("creds file: %v %v", n.AuthKind(), err)
	}
	if n, err := parseNATSCreds([]byte(`{"user":"u","password":"p"}`)); err != nil || n.User != "u" || n.Password != "p" || n.AuthKind() != "user" {
		t.Errorf("user/password: %+v %v", n, err)
	}
	if n, err := parseNATSCreds([]byte(` {"token":"t"}`)); err != nil || n.Token != "t" || n.AuthKind() != "token" {
		t.Errorf("token: %+v %v", n, err)
	}
	for in, want := range map[string]string{
		`{"user":"u","password":"p","token":"t"}`: `either "user" and "password", or "token" alone`,
		`{"user":"u"}`:                      `either "user" and "password"`,
		`{"username":"u","password":"p"}`:   `unknown field "username"`,
		`hunter2`:                           "neither a NATS creds file",
		"-----BEGIN NATS USER JWT-----\nxx": "neither a NATS creds file",
	} {
		if _, err := parseNATSCreds([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseNATSCreds(%q): %v, want %q", in, err, want)
		}
	}
}

// TestKeychainSettings: one key ring at most, a key file only outside Lambda
// and by an absolute path.
func TestKeychainSettings(t *testing.T) {
	base := env{EnvDatabaseURL: "postgres://u@h/d"}
	with := func(kv ...string) env {
		e := env{}
		for k, v := range base {
			e[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			e[kv[i]] = kv[i+1]
		}
		return e
	}
	c, _, err := parseEnv(with(EnvKeychainKMSKeyID, "alias/noetl-keychain"))
	if err != nil || c.KeychainKMSKeyID != "alias/noetl-keychain" {
		t.Fatalf("KMS key: %+v %v", c, err)
	}
	c, _, err = parseEnv(with(EnvKeychainKeyFile, "/var/lib/noetl/keychain.json"))
	if err != nil || c.KeychainKeyFile != "/var/lib/noetl/keychain.json" {
		t.Fatalf("key file: %+v %v", c, err)
	}
	for _, tc := range []struct {
		e    env
		want string
	}{
		{with(EnvKeychainKMSKeyID, "k", EnvKeychainKeyFile, "/k.json"), "one key ring"},
		{with(EnvKeychainKeyFile, "/k.json", EnvLambdaFunctionName, "noetl-keychain", EnvAllowOpen, "true"), "do not last"},
		{with(EnvKeychainKeyFile, "k.json"), "absolute path"},
	} {
		if _, _, err := parseEnv(tc.e); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.e, err, tc.want)
		}
	}
}

// TestCommandBusSettings: NoETL's three variables reach Config.CommandBus;
// unset is NATS only; a bus mode is refused in Lambda, and its errors name
// the variable.
func TestCommandBusSettings(t *testing.T) {
	base := env{EnvDatabaseURL: "postgres://u@h/d"}
	c, _, err := parseEnv(base)
	if err != nil || c.CommandBus.Mode != commandbus.ModeNATS || c.CommandBus.ShardCount != 1 {
		t.Fatalf("default: %+v %v", c.CommandBus, err)
	}
	e := env{EnvDatabaseURL: "postgres://u@h/d", EnvCommandBus: "ehdb", EnvCommandBusWriters: "0@127.0.0.1:9100,1@127.0.0.1:9200", EnvCommandBusShardCount: "2"}
	c, _, err = parseEnv(e)
	if err != nil || c.CommandBus.Mode != commandbus.ModeBus || c.CommandBus.ShardCount != 2 || len(c.CommandBus.Writers) != 2 || c.CommandBus.Writers[1].Addr != "127.0.0.1:9200" {
		t.Fatalf("ehdb: %+v %v", c.CommandBus, err)
	}
	e[EnvLambdaFunctionName], e[EnvAllowOpen] = "noetl-execute", "true"
	if _, _, err := parseEnv(e); err == nil || !strings.Contains(err.Error(), "NOETL_COMMAND_BUS=ehdb is set in Lambda") {
		t.Errorf("in Lambda: %v", err)
	}
	if _, _, err := parseEnv(env{EnvDatabaseURL: "postgres://u@h/d", EnvCommandBus: "shadow"}); err == nil || !strings.Contains(err.Error(), "needs NOETL_COMMAND_BUS_WRITER_ADDRS") {
		t.Errorf("shadow without writers: %v", err)
	}
}
