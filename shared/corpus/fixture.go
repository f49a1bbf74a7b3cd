package corpus

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// fixtureItems is the size of every paginated collection of the fixture (NoETL's
// test API serves 35: four pages of ten).
const fixtureItems = 35

// Fixture stands in for NoETL's test API (the "paginated-api" service of NoETL's
// test cluster) with the endpoints the offline corpus calls. It is written from what
// the playbooks send and read; state (the flaky endpoint's attempts, the probe
// counters) is per Fixture.
type Fixture struct {
	mux *http.ServeMux

	mu    sync.Mutex
	flaky map[int]int // page → attempts
}

// NewFixture returns the fixture's handler.
func NewFixture() *Fixture {
	f := &Fixture{mux: http.NewServeMux(), flaky: map[int]int{}}
	f.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]any{"status": "ok"}) })
	f.mux.HandleFunc("GET /api/v1/users", f.users)
	f.mux.HandleFunc("GET /api/v1/assessments", f.assessments)
	f.mux.HandleFunc("GET /api/v1/events", f.events)
	f.mux.HandleFunc("GET /api/v1/flaky", f.getFlaky)
	f.mux.HandleFunc("POST /api/v1/flaky/reset", f.resetFlaky)
	return f
}

func (f *Fixture) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// intParam reads a query integer, def when absent; ok false (and a 422 written)
// when it does not parse.
func intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		// Templates may send 1.0 for 1.
		if fl, ferr := strconv.ParseFloat(s, 64); ferr == nil && fl == float64(int(fl)) {
			return int(fl), true
		}
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": fmt.Sprintf("query %s: expected an integer, got %q", name, s)})
		return 0, false
	}
	return n, true
}

// window is [start, end) of a page over n items, clamped.
func window(start, size, n int) (int, int) {
	start = max(0, min(start, n))
	return start, max(start, min(start+max(size, 0), n))
}

// users: offset pagination, {users, has_more, offset, limit, total}.
func (f *Fixture) users(w http.ResponseWriter, r *http.Request) {
	offset, ok1 := intParam(w, r, "offset", 0)
	if !ok1 {
		return
	}
	limit, ok2 := intParam(w, r, "limit", 10)
	if !ok2 {
		return
	}
	lo, hi := window(offset, limit, fixtureItems)
	users := []any{}
	for id := lo + 1; id <= hi; id++ {
		users = append(users, map[string]any{"id": id, "username": fmt.Sprintf("user%d", id), "email": fmt.Sprintf("user%d@example.com", id)})
	}
	writeJSON(w, 200, map[string]any{"users": users, "has_more": offset+limit < fixtureItems, "offset": offset, "limit": limit, "total": fixtureItems})
}

// pageParams reads page (1-based) and pageSize (alias page_size).
func pageParams(w http.ResponseWriter, r *http.Request) (page, size int, ok bool) {
	if page, ok = intParam(w, r, "page", 1); !ok {
		return
	}
	sizeName := "pageSize"
	if r.URL.Query().Get(sizeName) == "" && r.URL.Query().Get("page_size") != "" {
		sizeName = "page_size"
	}
	size, ok = intParam(w, r, sizeName, 10)
	return max(page, 1), size, ok
}

// assessments: page-number pagination, {data, paging: {hasMore, page, pageSize, total}}.
func (f *Fixture) assessments(w http.ResponseWriter, r *http.Request) {
	page, size, ok := pageParams(w, r)
	if !ok {
		return
	}
	lo, hi := window((page-1)*size, size, fixtureItems)
	items := []any{}
	for id := lo + 1; id <= hi; id++ {
		items = append(items, map[string]any{"id": id, "name": fmt.Sprintf("Assessment %d", id), "score": 50 + id%50})
	}
	writeJSON(w, 200, map[string]any{"data": items, "paging": map[string]any{"hasMore": hi < fixtureItems, "page": page, "pageSize": size, "total": fixtureItems}})
}

// events: cursor pagination, {events, next_cursor, limit}; the cursor is the next
// page number in base64.
func (f *Fixture) events(w http.ResponseWriter, r *http.Request) {
	limit, ok := intParam(w, r, "limit", 10)
	if !ok {
		return
	}
	page := 1
	if c := r.URL.Query().Get("cursor"); c != "" {
		if b, err := base64.StdEncoding.DecodeString(c); err == nil {
			if n, err := strconv.Atoi(string(b)); err == nil && n > 0 {
				page = n
			}
		}
	}
	lo, hi := window((page-1)*limit, limit, fixtureItems)
	evs := []any{}
	for id := lo + 1; id <= hi; id++ {
		evs = append(evs, map[string]any{"id": id, "type": "user_action",
			"timestamp": fmt.Sprintf("2024-01-%02dT12:00:00Z", id%28+1), "data": map[string]any{"action": fmt.Sprintf("event_%d", id)}})
	}
	var next any
	if hi < fixtureItems {
		next = base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(page + 1)))
	}
	writeJSON(w, 200, map[string]any{"events": evs, "next_cursor": next, "limit": limit})
}

// getFlaky fails the first request for each page listed in fail_on with a 500, then
// answers like assessments ({data: [{id, value}], paging}).
func (f *Fixture) getFlaky(w http.ResponseWriter, r *http.Request) {
	page, size, ok := pageParams(w, r)
	if !ok {
		return
	}
	fail := false
	for _, p := range strings.Split(r.URL.Query().Get("fail_on"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil && n == page {
			fail = true
		}
	}
	f.mu.Lock()
	f.flaky[page]++
	first := f.flaky[page] == 1
	f.mu.Unlock()
	if fail && first {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Simulated failure"})
		return
	}
	lo, hi := window((page-1)*size, size, fixtureItems)
	items := []any{}
	for id := lo + 1; id <= hi; id++ {
		items = append(items, map[string]any{"id": id, "value": fmt.Sprintf("item_%d", id)})
	}
	writeJSON(w, 200, map[string]any{"data": items, "paging": map[string]any{"hasMore": hi < fixtureItems, "page": page, "pageSize": size}})
}

func (f *Fixture) resetFlaky(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	clear(f.flaky)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"status": "reset", "message": "Flaky endpoint counters cleared"})
}
