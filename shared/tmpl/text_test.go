package tmpl

import (
	"errors"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// TestRenderRefusesUnstorableText: output holding a NUL, made by a literal's
// escape, a helper or a value passed through, fails the render with an error
// naming where it sits, and no message carries the NUL itself.
func TestRenderRefusesUnstorableText(t *testing.T) {
	// fromref stands for a value from outside (a result read back by reference).
	vars := map[string]any{"fromref": map[string]any{"stdout": "a\x00b"}, "s": "ok"}
	for _, tc := range []struct{ src, want string }{
		{`{{ 'a\x00b' }}`, `output: contains a NUL character (\u0000) at byte 1, which cannot be stored`},
		{`x{{ s ~ '\x00' }}`, `output: contains a NUL character (\u0000) at byte 3`},
		{`{{ {'k\x00': 1} }}`, `output["k\x00"]: the key contains a NUL character (\u0000) at byte 1`},
		{`{{ [s, {'v': '\x00'}] }}`, `output[1].v: contains a NUL character`},
		{`{{ fromref }}`, `output.stdout: contains a NUL character (\u0000) at byte 1`},
		{`{{ fromref.stdout|upper }}`, `output: contains a NUL character (\u0000) at byte 1`},
		{`{{ 'x'|replace('x', '\x00') }}`, `output: contains a NUL character (\u0000) at byte 0`},
		{`{{ 2.5|round(0, 'c\x00') }}`, `got c\x00`},
	} {
		tp, err := Compile(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = tp.Render(Env{Vars: vars})
		var te *Error
		if !errors.As(err, &te) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a template error holding %q", tc.src, err, tc.want)
			continue
		}
		if strings.ContainsRune(err.Error(), 0) {
			t.Errorf("%s: the message carries a NUL: %q", tc.src, err.Error())
		}
	}
	// What the store can keep renders as before, NUL-free text around it included.
	tp, _ := Compile(`{{ fromref.stdout|replace('\x00', '') }}`)
	if out, err := tp.Render(Env{Vars: vars}); err != nil || out != "ab" {
		t.Fatalf("replace: %v %v", out, err)
	}
	var te *jsonx.TextError
	tp, _ = Compile(`{{ '\x00' }}`)
	if _, err := tp.Render(Env{}); !errors.As(err, &te) || !te.NUL {
		t.Fatalf("the cause is not a *jsonx.TextError: %v", err)
	}
}
