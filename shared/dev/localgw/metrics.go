package localgw

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/store"
)

// Metrics counts what the local server sees and serves it as Prometheus text
// (api.md: /metrics). It only reports what it measures: requests by route and
// status, ingested events by type and status, time spent ingesting, time spent
// orchestrating by trigger event type, claims by status, and, read from the
// databases at scrape time, the outbox (pending rows and lag) and commands by
// status. In AWS these come from CloudWatch instead (Lambda metrics and the
// outbox EMF).
type Metrics struct {
	stats  Stats
	tokens config.Tokens

	mu        sync.Mutex
	requests  map[[2]string]int64 // route, status
	events    map[[2]string]int64 // event type, status
	ingestSum map[string]float64  // event type or "batch" → seconds
	ingestN   map[string]int64
	orchSum   map[string]float64 // trigger event type → seconds
	orchN     map[string]int64
	claims    map[string]int64 // status
}

// Stats is what /metrics reads from the databases at scrape time
// (*controlplane.Service has both).
type Stats interface {
	OutboxStats(ctx context.Context) (controlplane.OutboxStats, error)
	CommandCounts(ctx context.Context) (map[string]int64, error)
}

// DBWork is what Stats may also tell: the work sent to Postgres so far (a
// store.Counter's counts), read before the scrape's own queries.
type DBWork interface {
	DBWork() store.CounterSnapshot
}

// NewMetrics returns empty metrics. stats is read at scrape time (nil: those
// gauges are not reported). With tokens configured, /metrics needs a token
// with the api or internal scope (Authorization: Bearer), like the API's routes.
func NewMetrics(stats Stats, tokens config.Tokens) *Metrics {
	return &Metrics{stats: stats, tokens: tokens, requests: map[[2]string]int64{}, events: map[[2]string]int64{},
		ingestSum: map[string]float64{}, ingestN: map[string]int64{}, orchSum: map[string]float64{}, orchN: map[string]int64{},
		claims: map[string]int64{}}
}

// eventLabel bounds the label's values: clients choose event types freely,
// and each label value is a time series.
func eventLabel(t string) string {
	switch c := eventtype.Canonical(t); c {
	case eventtype.CommandClaimed, eventtype.CommandStarted, eventtype.CallDone, eventtype.CallError,
		eventtype.CommandCompleted, eventtype.CommandFailed,
		// triggers the server itself writes (execute, the sweeper, cancel)
		eventtype.PlaybookStarted, eventtype.CommandExpired, eventtype.PlaybookCancelled:
		return c
	}
	return "other"
}

// Orchestrated implements controlplane.Observer.
func (m *Metrics) Orchestrated(eventType string, d time.Duration) {
	l := eventLabel(eventType)
	m.mu.Lock()
	m.orchSum[l] += d.Seconds()
	m.orchN[l]++
	m.mu.Unlock()
}

// Request implements api.Recorder.
func (m *Metrics) Request(route string, status int, _ time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.mu.Lock()
	m.requests[[2]string{route, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

// Ingest implements api.Recorder.
func (m *Metrics) Ingest(types []string, status int, d time.Duration) {
	label := "batch"
	if len(types) == 1 {
		label = eventLabel(types[0])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range types {
		m.events[[2]string{eventLabel(t), strconv.Itoa(status)}]++
	}
	m.ingestSum[label] += d.Seconds()
	m.ingestN[label]++
}

// Claim implements api.Recorder.
func (m *Metrics) Claim(status int) {
	m.mu.Lock()
	m.claims[strconv.Itoa(status)]++
	m.mu.Unlock()
}

// ServeHTTP writes the Prometheus text exposition format (version 0.0.4).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, w.Header().Get("X-Request-Id"), http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on /metrics; use GET")
		return
	}
	if !m.tokens.Empty() {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s := m.tokens.Scopes(strings.TrimSpace(tok))
		switch {
		case !ok || s == 0:
			writeError(w, w.Header().Get("X-Request-Id"), http.StatusUnauthorized, "/metrics needs Authorization: Bearer <token>")
			return
		case !s.Has(config.ScopeAPI) && !s.Has(config.ScopeInternal):
			writeError(w, w.Header().Get("X-Request-Id"), http.StatusForbidden, "/metrics needs a token with the api or internal scope")
			return
		}
	}
	var b bytes.Buffer
	m.write(&b)
	if dw, ok := m.stats.(DBWork); ok {
		c := dw.DBWork()
		header(&b, "noetl_db_round_trips_total", "counter", "Round trips to Postgres: statements sent alone and pipelined batches.")
		fmt.Fprintf(&b, "noetl_db_round_trips_total %d\n", c.RoundTrips)
		header(&b, "noetl_db_statements_total", "counter", "Statements sent to Postgres.")
		fmt.Fprintf(&b, "noetl_db_statements_total %d\n", c.Statements)
		header(&b, "noetl_db_commits_total", "counter", "Transactions committed: COMMITs sent, and statements or batches sent outside a transaction.")
		fmt.Fprintf(&b, "noetl_db_commits_total %d\n", c.Commits)
		header(&b, "noetl_db_transactions_total", "counter", "Of the commits, the transactions: BEGIN … COMMIT, which hold their locks across round trips.")
		fmt.Fprintf(&b, "noetl_db_transactions_total %d\n", c.Transactions)
	}
	if m.stats != nil {
		st, err := m.stats.OutboxStats(r.Context())
		if err == nil {
			header(&b, "noetl_outbox_pending", "gauge", "Outbox rows not yet published, all shards (read at scrape time).")
			fmt.Fprintf(&b, "noetl_outbox_pending %d\n", st.Pending)
			header(&b, "noetl_outbox_lag_seconds", "gauge", "Age of the oldest outbox row not yet published, all shards; 0 when none.")
			fmt.Fprintf(&b, "noetl_outbox_lag_seconds %s\n", formatFloat(st.Lag.Seconds()))
		}
		up := 1
		if err != nil {
			up = 0
		}
		header(&b, "noetl_outbox_scrape_ok", "gauge", "1 when the outbox could be read at this scrape.")
		fmt.Fprintf(&b, "noetl_outbox_scrape_ok %d\n", up)
		counts, err := m.stats.CommandCounts(r.Context())
		if err == nil {
			header(&b, "noetl_commands", "gauge", "Command rows by status, all shards (read at scrape time).")
			for _, status := range slices.Sorted(maps.Keys(counts)) {
				fmt.Fprintf(&b, "noetl_commands{status=%s} %d\n", quote(status), counts[status])
			}
		}
		up = 1
		if err != nil {
			up = 0
		}
		header(&b, "noetl_commands_scrape_ok", "gauge", "1 when the commands could be counted at this scrape.")
		fmt.Fprintf(&b, "noetl_commands_scrape_ok %d\n", up)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// write renders the metrics. The ingest series carry NoETL's names
// (noetl_events_ingested_total{event_type,status},
// noetl_event_ingest_duration_seconds) so NoETL's dashboards read them.
func (m *Metrics) write(b *bytes.Buffer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	header(b, "noetl_http_requests_total", "counter", "API requests by route and response status.")
	for _, k := range slices.SortedFunc(maps.Keys(m.requests), comparePair) {
		fmt.Fprintf(b, "noetl_http_requests_total{route=%s,status=%s} %d\n", quote(k[0]), quote(k[1]), m.requests[k])
	}
	header(b, "noetl_events_ingested_total", "counter", "Events posted to /api/events, /api/events/batch and /api/worker/report by event type and response status.")
	for _, k := range slices.SortedFunc(maps.Keys(m.events), comparePair) {
		fmt.Fprintf(b, "noetl_events_ingested_total{event_type=%s,status=%s} %d\n", quote(k[0]), quote(k[1]), m.events[k])
	}
	summary(b, "noetl_event_ingest_duration_seconds", "Time in the service (storage and orchestration) per ingest request; single events by type, batches as \"batch\".", m.ingestSum, m.ingestN)
	summary(b, "noetl_orchestration_duration_seconds", "Time the engine took to decide what follows one event (stored values it asked for included), by trigger event type.", m.orchSum, m.orchN)
	header(b, "noetl_claims_total", "counter", "Claim requests that reached the service, by response status.")
	for _, s := range slices.Sorted(maps.Keys(m.claims)) {
		fmt.Fprintf(b, "noetl_claims_total{status=%s} %d\n", quote(s), m.claims[s])
	}
}

// summary writes a summary by event type: its sums (seconds) and counts.
func summary(b *bytes.Buffer, name, help string, sum map[string]float64, n map[string]int64) {
	header(b, name, "summary", help)
	for _, l := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(b, "%s_sum{event_type=%s} %s\n", name, quote(l), formatFloat(sum[l]))
		fmt.Fprintf(b, "%s_count{event_type=%s} %d\n", name, quote(l), n[l])
	}
}

func header(b *bytes.Buffer, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// quote escapes a label value (backslash, double quote, newline).
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// comparePair orders metric label pairs, so the exposition is stable.
func comparePair(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}
