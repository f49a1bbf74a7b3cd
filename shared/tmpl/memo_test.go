package tmpl

import (
	"errors"
	"strings"
	"testing"
)

// TestMemo: a text is compiled once and shared; a failed text gives each
// caller its own error; past Limit every new text fails naming the limit and
// is not compiled.
func TestMemo(t *testing.T) {
	m := NewMemo()
	a, _ := m.Compile("{{ x + 1 }}")
	b, _ := m.Compile("{{ x + 1 }}")
	if a != b || m.Compiles != 1 || m.Cost != a.Cost() {
		t.Fatalf("compiled %d times, cost %d", m.Compiles, m.Cost)
	}
	_, e1 := m.Compile("{{ x + }}")
	_, e2 := m.Compile("{{ x + }}")
	if e1 == nil || e1 == e2 || e1.Error() != e2.Error() {
		t.Fatalf("errors %v, %v", e1, e2)
	}
	m = NewMemo()
	m.Limit, m.LimitName = a.Cost(), "the test's"
	if _, err := m.Compile("{{ x + 1 }}"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := m.Compile("{{ y }}")
		if !errors.Is(err, ErrCostLimit) || !strings.Contains(err.Error(), "(limit the test's)") {
			t.Fatalf("past the limit: %v", err)
		}
	}
	if m.Compiles != 2 {
		t.Fatalf("compiled %d texts; the one past the limit is compiled once, nothing after", m.Compiles)
	}
}
