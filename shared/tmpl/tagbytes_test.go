package tmpl

import (
	"strings"
	"testing"
)

// TestTagBytes: only tag bytes count, read as Compile reads them (a "}}" inside
// a string does not end the tag early); text that does not lex counts nothing.
func TestTagBytes(t *testing.T) {
	for src, want := range map[string]int{
		"":                                     0,
		"plain } {":                            0,
		strings.Repeat("x", 1<<20) + "{{ a }}": 7,
		"a {{- b -}} c {% if x %}d{% endif %}": len("{{- b -}}") + len("{% if x %}") + len("{% endif %}"),
		"{{ '}}' ~ x ~ '}}' }} tail":           len("{{ '}}' ~ x ~ '}}' }}"),
		"print('{%d}' % 1)":                    0,
		"{{ unterminated":                      0,
	} {
		if got := TagBytes(src); got != want {
			t.Errorf("TagBytes(%.40q) = %d, want %d", src, got, want)
		}
	}
}
