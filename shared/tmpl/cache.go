package tmpl

import (
	"container/list"
	"sync"
)

// Cache is a bounded compile cache keyed by template text, for callers that render
// ad-hoc strings (the worker renders pipeline items it receives as raw values). It
// evicts the least recently used entry. Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *cacheEntry, most recent first
	entries map[string]*list.Element
}

type cacheEntry struct {
	src string
	t   *Template
	err *Error
}

// NewCache makes a cache holding at most maxEntries compiled templates (at least one).
func NewCache(maxEntries int) *Cache {
	return &Cache{max: max(maxEntries, 1), order: list.New(), entries: map[string]*list.Element{}}
}

// Compile returns the cached compile of src, compiling it on a miss. Compile errors
// are cached too, so a bad template is not re-parsed on every render; each caller gets
// its own copy of the *Error.
func (c *Cache) Compile(src string) (*Template, error) {
	if !HasTemplate(src) {
		// Literals cost nothing to compile; keep them from evicting real templates.
		return Compile(src)
	}
	if t, err, ok := c.lookup(src); ok {
		return t, err
	}
	t, err := Compile(src)
	ent := &cacheEntry{src: src, t: t}
	if err != nil {
		ent.err = err.(*Error)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[src]; ok {
		// Another goroutine compiled it meanwhile; keep one.
		c.order.MoveToFront(el)
		ent = el.Value.(*cacheEntry)
	} else {
		c.entries[src] = c.order.PushFront(ent)
		if c.order.Len() > c.max {
			last := c.order.Back()
			c.order.Remove(last)
			delete(c.entries, last.Value.(*cacheEntry).src)
		}
	}
	return ent.result()
}

func (c *Cache) lookup(src string) (*Template, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[src]
	if !ok {
		return nil, nil, false
	}
	c.order.MoveToFront(el)
	t, err := el.Value.(*cacheEntry).result()
	return t, err, true
}

func (e *cacheEntry) result() (*Template, error) {
	if e.err != nil {
		cp := *e.err
		return nil, &cp
	}
	return e.t, nil
}
