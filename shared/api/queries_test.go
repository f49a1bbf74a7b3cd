package api

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestQueryLimits: a bound a query type's tags declare (what readParams
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

// TestReadParams: each kind of parameter is read as its handler had it: a
// string as given, an integer within its bounds (the 422 names it), an id
// from its decimal text, an empty one as absent; the first bad one is the
// error, the query's in declaration order before the path's.
func TestReadParams(t *testing.T) {
	read := func(query url.Values, path map[string]string) *call {
		return &call{req: &Request{Query: query}, params: path, attrs: &logAttrs{}}
	}
	c := read(url.Values{"path": {"a/b"}, "catalog_id": {"42"}, "limit": {" 7 "}, "offset": {""}}, nil)
	q, err := readParams[executionsQuery](paramFields[executionsQuery](), c)
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
		call := read(c.query, nil)
		_, err := readParams[executionsQuery](paramFields[executionsQuery](), call)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error starting %q", c.query, err, c.want)
		}
	}

	// A path id is named in messages by its name tag, after the query's
	// refusals; an execution's names the request's log lines.
	c = read(url.Values{"page": {"2"}}, map[string]string{"id": "17"})
	e, err := readParams[executionQuery](paramFields[executionQuery](), c)
	if err != nil || e.ID != 17 || e.Page != 2 || c.attrs.executionID != 17 {
		t.Fatalf("got %+v, %v, log execution %d", e, err, c.attrs.executionID)
	}
	for _, c := range []struct {
		query url.Values
		want  string
	}{
		{nil, "execution_id: "},
		{url.Values{"page": {"0"}}, "page: "},
	} {
		call := read(c.query, map[string]string{"id": "x"})
		_, err := readParams[executionQuery](paramFields[executionQuery](), call)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || call.attrs.executionID != 0 {
			t.Errorf("%v: %v (log execution %d), want an error starting %q", c.query, err, call.attrs.executionID, c.want)
		}
	}
	c = read(nil, map[string]string{"id": "x"})
	if _, err := readParams[schedulePath](paramFields[schedulePath](), c); err == nil || !strings.HasPrefix(err.Error(), "schedule_id: ") {
		t.Errorf("schedule {id} x: %v, want an error naming schedule_id", err)
	}
	c = read(nil, map[string]string{"execution_id": "5", "var_name": "n"})
	if v, err := readParams[variablePath](paramFields[variablePath](), c); err != nil || v.ExecutionID != 5 || v.Name != "n" {
		t.Errorf("vars path: got %+v, %v", v, err)
	}
}

// TestRoutesReadTheirPath: every route's handler reads each of its path's
// parameters from its parameter type, and no other: a path parameter is
// declared once, on the type, and read by readParams.
func TestRoutesReadTheirPath(t *testing.T) {
	for _, r := range Routes() {
		var want, got []string
		for _, s := range strings.Split(r.Path, "/") {
			if isParam(s) {
				want = append(want, paramName(s))
			}
		}
		for _, f := range r.handler.params {
			if f.path {
				got = append(got, f.key)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the handler reads path parameters %v, the path has %v", r.Key(), got, want)
		}
	}
}

// TestReadParamsAllocs: reading a claim's {event_id} allocates no more than
// parsing it in the handler did (the claim is on NoETL's workers' step path).
func TestReadParamsAllocs(t *testing.T) {
	c := &call{req: &Request{}, params: map[string]string{"event_id": "12345"}, attrs: &logAttrs{}}
	fields := paramFields[commandPath]()
	got := testing.AllocsPerRun(100, func() {
		if _, err := readParams[commandPath](fields, c); err != nil {
			t.Fatal(err)
		}
	})
	want := testing.AllocsPerRun(100, func() {
		if _, err := parseID("event_id", c.params["event_id"]); err != nil {
			t.Fatal(err)
		}
	})
	if got > want {
		t.Errorf("readParams[commandPath]: %v allocations, parseID alone %v", got, want)
	}
}
