package controlplane

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// bookWithTemplate parses a playbook whose one template is a list of n items
// (n*2 bytes long), which compiles to a program of about 80 bytes per byte.
func bookWithTemplate(t *testing.T, i, n int) *playbook.Playbook {
	t.Helper()
	tmpl := "{{ [" + strings.Repeat("1,", n) + "1] }}"
	src := fmt.Sprintf("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p%d, path: tests/p%d}\nworkflow:\n"+
		"  - step: start\n    tool: {kind: noop, result: \"%s\"}\n", i, i, tmpl)
	pb, diags := parser.Parse([]byte(src))
	if pb == nil {
		t.Fatal(diags.Err())
	}
	return pb
}

// TestPlaybookCacheBoundedByWeight: the parsed playbooks a process keeps are
// bounded by their estimated memory, not only by count: 30 playbooks with a
// 60 KB template each (about 4 MB each once compiled) would have taken over
// 128 MB.
func TestPlaybookCacheBoundedByWeight(t *testing.T) {
	small, big := bookWithTemplate(t, 0, 10), bookWithTemplate(t, 1, 30_000)
	if small.Weight() >= big.Weight() || big.Weight() < 4<<20 {
		t.Fatalf("weights: small %d, big %d", small.Weight(), big.Weight())
	}
	const budget = 128 << 20
	c := newPlaybookCache(256, budget)
	for i := range 30 {
		c.put(int64(i), big)
		if c.used > budget || len(c.books) > 256 {
			t.Fatalf("after %d puts: %d bytes in %d playbooks, over the budget of %d", i+1, c.used, len(c.books), budget)
		}
	}
	if len(c.books) == 0 || len(c.books) > budget/big.Weight() || c.get(29) == nil || c.get(0) != nil {
		t.Fatalf("%d playbooks kept: want the newest, within the budget", len(c.books))
	}
	for i := 100; i < 500; i++ {
		c.put(int64(i), small)
	}
	if len(c.books) != 256 || c.used > budget {
		t.Fatalf("%d small playbooks kept, %d bytes; want the count bound of 256", len(c.books), c.used)
	}
	huge := newPlaybookCache(256, big.Weight()-1)
	if huge.put(1, big); huge.get(1) != nil {
		t.Fatal("a playbook heavier than the whole budget was kept")
	}
}
