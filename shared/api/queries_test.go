package api

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestQueryLimits: a bound a query type's tags declare (what readQuery
// enforces and the document states) is the one the rest of the code knows.
func TestQueryLimits(t *testing.T) {
	for _, c := range []struct {
		typ   reflect.Type
		field string
		want  int64
	}{
		{reflect.TypeFor[catalogQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[workerPoolsQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[eventsQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[readsQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[doctorQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[pageQuery](), "Limit", MaxListLimit},
		{reflect.TypeFor[executionQuery](), "PageSize", MaxEventsPageSize},
	} {
		f, _ := c.typ.FieldByName(c.field)
		if got := bound(f, "max"); got != c.want {
			t.Errorf("%s.%s: max %d, want %d", c.typ.Name(), c.field, got, c.want)
		}
	}
}

// TestReadQuery: each kind of parameter is read as its handler had it: a
// string as given, an integer within its bounds (the 422 names it), an id
// from its decimal text, an empty one as absent; the first bad one in
// declaration order is the error.
func TestReadQuery(t *testing.T) {
	q, err := readQuery[executionsQuery](url.Values{"path": {"a/b"}, "catalog_id": {"42"}, "limit": {" 7 "}, "offset": {""}})
	if err != nil || q.Path != "a/b" || q.CatalogID != 42 || q.Limit != 7 || q.Offset != 0 {
		t.Fatalf("got %+v, %v", q, err)
	}
	for _, c := range []struct {
		query url.Values
		want  string
	}{
		{url.Values{"limit": {"0"}}, "limit: "},
		{url.Values{"limit": {"x"}}, `limit: expected integer, got "x"`},
		{url.Values{"catalog_id": {"-1"}, "limit": {"x"}}, "catalog_id: "},
	} {
		_, err := readQuery[executionsQuery](c.query)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error starting %q", c.query, err, c.want)
		}
	}
}
