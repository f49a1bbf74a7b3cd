package controlplane

import (
	"sync"

	"github.com/noetl-go/noetl/shared/playbook"
)

// playbookCache keeps parsed playbooks by catalog id (a catalog entry never
// changes, so entries never go stale): at most max of them, and at most
// budget of their estimated weight, since a compiled playbook can hold many
// times its text and a few large ones must not exhaust the process. The
// oldest go first.
type playbookCache struct {
	mu     sync.Mutex
	max    int
	budget int
	used   int
	books  map[int64]*playbook.Playbook
	order  []int64
}

func newPlaybookCache(n, budget int) *playbookCache {
	return &playbookCache{max: n, budget: budget, books: map[int64]*playbook.Playbook{}}
}

func (c *playbookCache) get(id int64) *playbook.Playbook {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.books[id]
}

// put keeps a playbook unless it alone weighs more than the budget (it is
// then parsed again when next needed).
func (c *playbookCache) put(id int64, pb *playbook.Playbook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := pb.Weight()
	if _, ok := c.books[id]; ok || w > c.budget {
		return
	}
	for len(c.order) > 0 && (len(c.order) >= c.max || c.used+w > c.budget) {
		oldest := c.order[0]
		c.used -= c.books[oldest].Weight()
		delete(c.books, oldest)
		c.order = c.order[1:]
	}
	c.books[id] = pb
	c.order = append(c.order, id)
	c.used += w
}
