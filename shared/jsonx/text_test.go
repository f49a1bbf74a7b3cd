package jsonx

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCheckText: every NUL is found, key or value, at any depth, and named by
// its path; the message never repeats the bad bytes. Bytes that are not UTF-8
// are CheckString's alone (encoding/json replaces them in values).
func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string // "" for none
	}{
		{"clean", map[string]any{"a": []any{"x", int64(1), nil, map[string]any{"b": "ü"}}}, ""},
		{"value", map[string]any{"stdout": "a\x00b"}, `p.stdout: contains a NUL character (\u0000) at byte 1, which cannot be stored`},
		{"deep", map[string]any{"a": []any{"ok", map[string]any{"b c": "\x00"}}}, `p.a[1]["b c"]: contains a NUL character (\u0000) at byte 0`},
		{"key", map[string]any{"k\x00": "v"}, `p["k\x00"]: the key contains a NUL character (\u0000) at byte 1`},
		{"not UTF-8", []any{"ok", "ab\xff"}, ""},
		{"first in key order", map[string]any{"z": "\x00", "a": "\x00", "m": "\x00"}, `p.a: contains`},
		{"string", "x\x00", `p: contains a NUL character (\u0000) at byte 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText("p", tc.v)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckText: %v", err)
				}
				return
			}
			var te *TextError
			if !errors.As(err, &te) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("CheckText = %v, want prefix %q", err, tc.want)
			}
			if strings.ContainsRune(err.Error(), 0) || !utf8.ValidString(err.Error()) {
				t.Fatalf("the message carries the bad bytes: %q", err.Error())
			}
		})
	}
	if err := CheckString("q", "ok"); err != nil {
		t.Fatal(err)
	}
	if err := CheckString("", "\x00"); err == nil || !strings.HasPrefix(err.Error(), "contains a NUL") {
		t.Fatalf("CheckString: %v", err)
	}
	if err := CheckString("q", "ab\xff"); err == nil || !strings.HasPrefix(err.Error(), "q: is not valid UTF-8 at byte 2, which cannot be stored") {
		t.Fatalf("CheckString: %v", err)
	}
	if err := CheckString("q", "\xc3x\x00"); err == nil || !strings.HasPrefix(err.Error(), "q: is not valid UTF-8 at byte 0") {
		t.Fatalf("CheckString, bad UTF-8 before a NUL: %v", err)
	}
}

func TestPathKey(t *testing.T) {
	for _, tc := range []struct{ path, key, want string }{
		{"", "a", "a"},
		{"a", "b_c-1", "a.b_c-1"},
		{"a", "b.c", `a["b.c"]`},
		{"a", "", `a[""]`},
		{"a", "x y", `a["x y"]`},
		{"a", "ü", "a.ü"},
	} {
		if got := PathKey(tc.path, tc.key); got != tc.want {
			t.Errorf("PathKey(%q, %q) = %s, want %s", tc.path, tc.key, got, tc.want)
		}
	}
}
