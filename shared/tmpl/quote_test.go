package tmpl

import (
	"os/exec"
	"strings"
	"testing"
)

// TestQuoteFilter (issue 33, finding 11): `quote` makes any value one word
// of a sh command line, as Python's shlex.quote writes it; sh reads each back
// exactly (quotes, newlines, the empty string, expansions that must not run).
func TestQuoteFilter(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"empty", "", `''`},
		{"null", nil, `''`},
		{"safe word", "abc-1.2_x@y%z+w=v:u,t/s", "abc-1.2_x@y%z+w=v:u,t/s"},
		{"number", int64(42), "42"},
		{"space", "a b", `'a b'`},
		{"single quote", "it's", `'it'"'"'s'`},
		{"only a quote", "'", `''"'"''`},
		{"double quotes", `say "hi"`, `'say "hi"'`},
		{"newline", "line1\nline2", "'line1\nline2'"},
		{"command substitution", "$(rm -rf /)", `'$(rm -rf /)'`},
		{"backticks and variables", "`id` $HOME ${X}", "'`id` $HOME ${X}'"},
		{"separators", "a; b && c | d > e", `'a; b && c | d > e'`},
		{"glob", "*.csv", `'*.csv'`},
		{"backslash", `a\b`, `'a\b'`},
		{"tab and unicode", "é\tü", "'é\tü'"},
		{"leading dash", "-rf", "-rf"},
		{"map", map[string]any{"k": "v w"}, `'{"k":"v w"}'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, err := Compile("printf '%s' {{ v | quote }}")
			if err != nil {
				t.Fatal(err)
			}
			cmd, err := tp.Render(Env{Vars: map[string]any{"v": c.in}})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.TrimPrefix(cmd.(string), "printf '%s' ")
			if got != c.want {
				t.Fatalf("quote(%q) = %q, want %q", c.in, got, c.want)
			}
			// sh reads the word back as the value's text, nothing run.
			out, err := exec.Command("/bin/sh", "-c", cmd.(string)).Output()
			if err != nil {
				t.Fatalf("sh -c printf %s: %v", got, err)
			}
			if string(out) != Text(c.in) {
				t.Fatalf("sh read %q back as %q, want %q", got, out, Text(c.in))
			}
		})
	}
}
