package redact

import (
	"reflect"
	"testing"
)

func TestValueRedacts(t *testing.T) {
	in := map[string]any{
		"password": "hunter2", "DB-Password": "x", "x_api_key": "k", "apiKey": "k2", "client_secret": "s",
		"Authorization": "anything", "connection_string": "postgres://u:p@h/db", "refresh_token": "r",
		"nested":               []any{map[string]any{"token": "t"}, "Bearer abc.def", "Basic dXNlcjpwYXNz"},
		"jwt":                  "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
		"pem":                  "-----BEGIN RSA PRIVATE KEY-----\nMIIE...\n-----END RSA PRIVATE KEY-----",
		"nil_secret_stays_nil": nil, "password_hint": "kept? no: hint is not a secret name",
	}
	got := Value(in).(map[string]any)
	for _, k := range []string{"password", "DB-Password", "x_api_key", "apiKey", "client_secret", "Authorization", "connection_string", "refresh_token", "jwt", "pem"} {
		if got[k] != Mask {
			t.Errorf("%s = %v, want masked", k, got[k])
		}
	}
	nested := got["nested"].([]any)
	if nested[0].(map[string]any)["token"] != Mask || nested[1] != Mask || nested[2] != Mask {
		t.Errorf("nested = %v", nested)
	}
	if got["password_hint"] != in["password_hint"] {
		t.Errorf("password_hint is not a secret name: %v", got["password_hint"])
	}
	if in["password"] != "hunter2" {
		t.Error("input modified")
	}
}

// TestValueKeeps: what NoETL wrongly destroys must survive.
func TestValueKeeps(t *testing.T) {
	in := map[string]any{
		"author":     "Ada",
		"max_tokens": int64(512),
		"tokens":     []any{"a", "b"},
		"sha256":     "1111111111111111111111111111111111111111111111111111111111111111",
		"digest":     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef",
		"secretary":  "Bob",
		"tokenizer":  "bpe",
		"message":    "the Bearer of good news", // not a prefix
		"count":      int64(3),
	}
	got := Value(in)
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("changed: %v", got)
	}
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(in).Pointer() {
		t.Error("an untouched map should not be copied")
	}
}

// TestSecretKey: a secret's name alone or as the last part of a name after
// an underscore (or a hyphen), in any case; a name that only ends in the
// letters is not one.
func TestSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"password": true, "DB-Password": true, "db_password": true, "_token": true, "x_api_key": true,
		"apikey": true, "Authorization": true, "xpassword": false, "subtoken": false, "password_hint": false,
		"": false, "_": false, "token_": false,
	} {
		if got := SecretKey(key); got != want {
			t.Errorf("SecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}
