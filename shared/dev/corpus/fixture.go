package corpus

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
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

	mu        sync.Mutex
	flaky     map[int]int // page → attempts
	lastRated time.Time   // the rate-limited endpoint's last answered request
	probe     probeStats
	objects   map[string][]string // fake Cloud Storage: bucket → object names
	fhirSeen  []time.Time         // /api/v1/patient-records requests of the last second (its rate limit)
}

// probeStats are the concurrency probe's counters.
type probeStats struct {
	Started   int `json:"started"`
	Completed int `json:"completed"`
	Active    int `json:"active"`
	MaxActive int `json:"max_active"`
}

// NewFixture returns the fixture's handler.
func NewFixture() *Fixture {
	f := &Fixture{mux: http.NewServeMux(), flaky: map[int]int{}, objects: map[string][]string{}}
	f.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]any{"status": "ok"}) })
	f.mux.HandleFunc("GET /api/v1/users", f.users)
	f.mux.HandleFunc("GET /api/v1/assessments", f.assessments)
	f.mux.HandleFunc("GET /api/v1/events", f.events)
	f.mux.HandleFunc("GET /api/v1/flaky", f.getFlaky)
	f.mux.HandleFunc("POST /api/v1/flaky/reset", f.resetFlaky)
	f.mux.HandleFunc("GET /api/v1/rate-limited", f.rateLimited)
	f.mux.HandleFunc("GET /api/v1/errors", f.errors)
	f.mux.HandleFunc("GET /api/v1/heavy", f.heavy)
	f.mux.HandleFunc("POST /api/v1/concurrency/reset", f.probeReset)
	f.mux.HandleFunc("GET /api/v1/concurrency/stats", f.probeStatsOf)
	f.mux.HandleFunc("GET /api/v1/concurrency/probe", f.probeRun)
	f.mux.HandleFunc("GET /api/v1/reference-chain/items", f.referenceChain)
	f.mux.HandleFunc("GET /api/v1/patient/demographics", f.demographics)
	f.mux.HandleFunc("GET /api/v1/patient/{type}", f.patientRecords)
	f.mux.HandleFunc("GET /api/v1/patient-records", f.fhirRecords)
	f.mux.HandleFunc("GET /api/v1/mds/assessment/{id}", f.mdsAssessment)
	f.mux.HandleFunc("GET /api/v1/pft/batch/{type}", f.pftBatch)
	f.mux.HandleFunc("GET /api/v1/pft/mds/details", f.mdsDetails)
	// Cloud Storage's JSON API, the part NoETL's fake-gcs-server serves the corpus.
	f.mux.HandleFunc("POST /upload/storage/v1/b/{bucket}/o", f.gcsUpload)
	f.mux.HandleFunc("GET /storage/v1/b/{bucket}/o", f.gcsList)
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

// window is one page of ids 1..n: those after start, at most size of them
// (clamped), each made by item; more is true when ids follow the page.
func window(start, size, n int, item func(id int) any) (items []any, more bool) {
	lo := max(0, min(start, n))
	hi := max(lo, min(lo+max(size, 0), n))
	items = []any{}
	for id := lo + 1; id <= hi; id++ {
		items = append(items, item(id))
	}
	return items, hi < n
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
	users, _ := window(offset, limit, fixtureItems, func(id int) any {
		return map[string]any{"id": id, "username": fmt.Sprintf("user%d", id), "email": fmt.Sprintf("user%d@example.com", id)}
	})
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

// intQuery is a query integer and its default.
type intQuery struct {
	name string
	def  int
}

// pageAndInts reads pageParams and then each of qs (intParam); ok false once
// one does not parse (its 422 written).
func pageAndInts(w http.ResponseWriter, r *http.Request, qs ...intQuery) (page, size int, ints []int, ok bool) {
	if page, size, ok = pageParams(w, r); !ok {
		return
	}
	ints = make([]int, len(qs))
	for i, q := range qs {
		if ints[i], ok = intParam(w, r, q.name, q.def); !ok {
			return
		}
	}
	return page, size, ints, true
}

// assessments: page-number pagination, {data, paging: {hasMore, page, pageSize, total}}.
func (f *Fixture) assessments(w http.ResponseWriter, r *http.Request) {
	page, size, ok := pageParams(w, r)
	if !ok {
		return
	}
	writeAssessments(w, page, size)
}

// writeAssessments answers one page of assessments.
func writeAssessments(w http.ResponseWriter, page, size int) {
	items, more := window((page-1)*size, size, fixtureItems, func(id int) any {
		return map[string]any{"id": id, "name": fmt.Sprintf("Assessment %d", id), "score": 50 + id%50}
	})
	writeJSON(w, 200, map[string]any{"data": items, "paging": map[string]any{"hasMore": more, "page": page, "pageSize": size, "total": fixtureItems}})
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
	evs, more := window((page-1)*limit, limit, fixtureItems, func(id int) any {
		return map[string]any{"id": id, "type": "user_action",
			"timestamp": fmt.Sprintf("2024-01-%02dT12:00:00Z", id%28+1), "data": map[string]any{"action": fmt.Sprintf("event_%d", id)}}
	})
	var next any
	if more {
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
	items, more := window((page-1)*size, size, fixtureItems, func(id int) any {
		return map[string]any{"id": id, "value": fmt.Sprintf("item_%d", id)}
	})
	writeJSON(w, 200, map[string]any{"data": items, "paging": map[string]any{"hasMore": more, "page": page, "pageSize": size}})
}

func (f *Fixture) resetFlaky(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	clear(f.flaky)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"status": "reset", "message": "Flaky endpoint counters cleared"})
}

// rateLimited answers like assessments, but a request sooner than
// 1/requests_per_second after the last answered one gets 429 with Retry-After.
func (f *Fixture) rateLimited(w http.ResponseWriter, r *http.Request) {
	page, size, ints, ok := pageAndInts(w, r, intQuery{"requests_per_second", 1})
	if !ok {
		return
	}
	gap := time.Second / time.Duration(max(ints[0], 1))
	f.mu.Lock()
	now := time.Now()
	limited := !f.lastRated.IsZero() && now.Sub(f.lastRated) < gap
	if !limited {
		f.lastRated = now
	}
	f.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"detail": "rate limit exceeded"})
		return
	}
	writeAssessments(w, page, size)
}

// errors answers the error a test asks for: error_type auth (401), forbidden
// (403), not_found (404), bad_request (400), rate_limit (429), server (500),
// unavailable (503).
func (f *Fixture) errors(w http.ResponseWriter, r *http.Request) {
	status := map[string]int{"auth": 401, "forbidden": 403, "not_found": 404, "bad_request": 400,
		"rate_limit": 429, "server": 500, "unavailable": 503}[r.URL.Query().Get("error_type")]
	if status == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": "error_type: expected auth, forbidden, not_found, bad_request, rate_limit, server or unavailable"})
		return
	}
	writeJSON(w, status, map[string]any{"detail": http.StatusText(status)})
}

// heavy: assessments whose items carry payload_kb KiB of text each.
func (f *Fixture) heavy(w http.ResponseWriter, r *http.Request) {
	page, size, ints, ok := pageAndInts(w, r, intQuery{"payload_kb", 10})
	if !ok {
		return
	}
	kb := min(max(ints[0], 0), 1024)
	items, more := window((page-1)*size, size, fixtureItems, func(id int) any {
		return map[string]any{"id": id, "name": fmt.Sprintf("Assessment %d", id), "score": 50 + id%50,
			"category": []string{"a", "b", "c"}[id%3], "payload": strings.Repeat("x", kb*1024)}
	})
	writeJSON(w, 200, map[string]any{"data": items,
		"paging": map[string]any{"hasMore": more, "page": page, "pageSize": size, "total": fixtureItems},
		"meta":   map[string]any{"payload_kb_per_item": kb}})
}

func (f *Fixture) probeReset(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.probe = probeStats{}
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"status": "reset"})
}

func (f *Fixture) probeStatsOf(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	st := f.probe
	f.mu.Unlock()
	writeJSON(w, 200, st)
}

// probeRun holds the request delay_seconds (at most 30) and counts how many were
// in flight at once.
func (f *Fixture) probeRun(w http.ResponseWriter, r *http.Request) {
	delay, err := strconv.ParseFloat(r.URL.Query().Get("delay_seconds"), 64)
	if err != nil {
		delay = 0
	}
	f.mu.Lock()
	f.probe.Started++
	f.probe.Active++
	f.probe.MaxActive = max(f.probe.MaxActive, f.probe.Active)
	f.mu.Unlock()
	select {
	case <-time.After(time.Duration(min(max(delay, 0), 30) * float64(time.Second))):
	case <-r.Context().Done():
	}
	f.mu.Lock()
	f.probe.Active--
	f.probe.Completed++
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"status": "ok", "delay_seconds": delay, "label": r.URL.Query().Get("label")})
}

// referenceChain: total records (default 100) paged, each {record_id,
// record_ref: record-<id>, payload}; refs {mode, chain} links the page to its
// neighbours only (at most two refs with ref_mode linked).
func (f *Fixture) referenceChain(w http.ResponseWriter, r *http.Request) {
	page, size, ints, ok := pageAndInts(w, r, intQuery{"total", 100}, intQuery{"payload_kb", 1})
	if !ok {
		return
	}
	total, kb := ints[0], min(max(ints[1], 0), 256)
	items, more := window((page-1)*size, size, total, func(id int) any {
		return map[string]any{"record_id": id, "record_ref": fmt.Sprintf("record-%d", id), "payload": strings.Repeat("r", kb*1024/max(size, 1))}
	})
	chain := []any{}
	if page > 1 {
		chain = append(chain, fmt.Sprintf("page-%d", page-1))
	}
	if more {
		chain = append(chain, fmt.Sprintf("page-%d", page+1))
	}
	mode := r.URL.Query().Get("ref_mode")
	if mode == "" {
		mode = "linked"
	}
	writeJSON(w, 200, map[string]any{"data": items, "refs": map[string]any{"mode": mode, "chain": chain},
		"paging": map[string]any{"hasMore": more, "page": page, "pageSize": size, "total": total}})
}

// demographics: {data: {patient_id, first_name, last_name, birth_date, gender}}.
func (f *Fixture) demographics(w http.ResponseWriter, r *http.Request) {
	id, ok := patientID(w, r)
	if !ok {
		return
	}
	writeJSON(w, 200, map[string]any{"data": patient(id)})
}

// patientID reads the query's patientId, a positive integer; ok false (and a
// 422 or 400 written) otherwise.
func patientID(w http.ResponseWriter, r *http.Request) (int, bool) {
	id, ok := intParam(w, r, "patientId", 0)
	if ok && id <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": "patientId: required, a positive integer"})
		return 0, false
	}
	return id, ok
}

func patient(id int) map[string]any {
	return map[string]any{"patient_id": id, "first_name": fmt.Sprintf("First%d", id), "last_name": fmt.Sprintf("Last%d", id),
		"birth_date": fmt.Sprintf("19%02d-%02d-%02d", 40+id%60, id%12+1, id%28+1), "gender": []string{"F", "M"}[id%2]}
}

// patientRecords: one patient's records of a data type (assessments,
// conditions, medications, vital_signs), page-number pagination as
// assessments: {data, paging: {hasMore, isLastPage, page, pageSize, total,
// totalPages}}; an assessment names its MDS assessment (mdsAssessmentIds).
// With pageSize 1 the PFT playbooks follow hasMore across pages.
func (f *Fixture) patientRecords(w http.ResponseWriter, r *http.Request) {
	typ := r.PathValue("type")
	switch typ {
	case "assessments", "conditions", "medications", "vital_signs":
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "data type: expected assessments, conditions, medications, vital_signs or demographics"})
		return
	}
	id, ok := patientID(w, r)
	if !ok {
		return
	}
	page, size, ok := pageParams(w, r)
	if !ok {
		return
	}
	size = max(size, 1)
	total := recordsOf(typ, id)
	items, more := window((page-1)*size, size, total, func(n int) any {
		item := map[string]any{"patient_id": id, "type": typ, "record": n}
		if typ == "assessments" {
			item["mdsAssessmentIds"] = []any{fmt.Sprintf("mds-%d-%d", id, n)}
		}
		return item
	})
	pages := (total + size - 1) / size
	writeJSON(w, 200, map[string]any{"data": items, "paging": map[string]any{"hasMore": more, "isLastPage": !more,
		"page": page, "pageSize": size, "total": total, "totalPages": pages}})
}

// recordsOf is how many records of a type a patient has, as test_pft_flow_v2
// describes NoETL's fixture: assessments 2-4 pages, conditions 1-3,
// medications 2-3, vital_signs 1.
func recordsOf(typ string, id int) int {
	switch typ {
	case "assessments":
		return 2 + id%3
	case "conditions":
		return 1 + id%3
	case "medications":
		return 2 + id%2
	}
	return 1
}

// mdsDetails: {rows: [{assessment_id, payload}]} for one assessmentId.
func (f *Fixture) mdsDetails(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("assessmentId"))
	if id == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"detail": "assessmentId: required"})
		return
	}
	writeJSON(w, 200, map[string]any{"rows": []any{map[string]any{"assessment_id": id,
		"payload": map[string]any{"assessment_id": id, "type": "MDS 3.0", "items": []any{map[string]any{"code": "A0310A", "value": "01"}}}}}})
}

// mdsAssessment: {data: {assessment_id, items}}; an id that is not text gets 404.
func (f *Fixture) mdsAssessment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if strings.TrimSpace(id) == "" {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "no such assessment"})
		return
	}
	writeJSON(w, 200, map[string]any{"data": map[string]any{"assessment_id": id, "type": "MDS 3.0",
		"items": []any{map[string]any{"code": "A0310A", "value": "01"}, map[string]any{"code": "B0100", "value": "0"}}}})
}

// pftBatch answers one batch of patients (patientIds, comma-separated) for a
// data type: {rows, rowCount}, one row per patient (assessments,
// conditions, medications and vital_signs as page 1 of 1), each with the
// facility its id falls in: facility N holds ids (N-1)*1000+1 … N*1000, as the PFT
// playbooks seed them (patientsPerFacility of each block are used).
func (f *Fixture) pftBatch(w http.ResponseWriter, r *http.Request) {
	typ := r.PathValue("type")
	const per = 1000
	rows := []any{}
	for _, s := range strings.Split(r.URL.Query().Get("patientIds"), ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		id, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"detail": fmt.Sprintf("patientIds: %q is not an integer", s)})
			return
		}
		row := map[string]any{"patient_id": id, "facility_mapping_id": (id-1)/per + 1}
		switch typ {
		case "assessments", "conditions", "medications", "vital_signs":
			row["page_number"], row["is_last_page"] = 1, true
			row["payload"] = map[string]any{"type": typ, "patient_id": id}
		case "demographics":
			row["payload"] = patient(id)
		case "mds":
			row["assessment_id"] = fmt.Sprintf("mds-%d", id)
			row["payload"] = map[string]any{"type": "MDS 3.0", "patient_id": id}
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"detail": "data type: expected assessments, conditions, medications, vital_signs, demographics or mds"})
			return
		}
		rows = append(rows, row)
	}
	writeJSON(w, 200, map[string]any{"rows": rows, "rowCount": len(rows)})
}

// gcsUpload stores an object's name (uploadType=media; the body is read and
// dropped).
func (f *Fixture) gcsUpload(w http.ResponseWriter, r *http.Request) {
	name, bucket := r.URL.Query().Get("name"), r.PathValue("bucket")
	if name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": "name: required"}})
		return
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
	f.mu.Lock()
	f.objects[bucket] = append(f.objects[bucket], name)
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"kind": "storage#object", "bucket": bucket, "name": name, "size": strconv.FormatInt(n, 10)})
}

func (f *Fixture) gcsList(w http.ResponseWriter, r *http.Request) {
	bucket, prefix := r.PathValue("bucket"), r.URL.Query().Get("prefix")
	items := []any{}
	f.mu.Lock()
	for _, name := range f.objects[bucket] {
		if strings.HasPrefix(name, prefix) {
			items = append(items, map[string]any{"kind": "storage#object", "bucket": bucket, "name": name})
		}
	}
	f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"kind": "storage#objects", "items": items})
}

// fhirRecords is the FHIR-like bundle endpoint of test_fetch_load
// (/api/v1/patient-records?patientId&page&pageSize): 2 to 5 pages per patient
// (fixed per patientId, FHIRPages), pageSize entries each padded to about
// payload_kb KB per page (default 100), a delay drawn between min_delay and
// max_delay seconds (default 2 and 4), a global cap of rate_limit requests a
// second (default 50) answered 429 with Retry-After: 1, and 404 past the last
// page. The bundle: {resourceType, type, total, link: [self, next on all but the
// last page], entry, meta: {patientId, page, pageSize, totalPages, delaySeconds,
// estimatedResponseKB}}.
func (f *Fixture) fhirRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	patient := q.Get("patientId")
	if patient == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": "query patientId is required"})
		return
	}
	page, size, ints, ok := pageAndInts(w, r, intQuery{"rate_limit", 50}, intQuery{"payload_kb", 100})
	if !ok {
		return
	}
	limit, payloadKB := ints[0], ints[1]
	minDelay, maxDelay := floatQuery(q.Get("min_delay"), 2), floatQuery(q.Get("max_delay"), 4)
	f.mu.Lock()
	now := time.Now()
	recent := f.fhirSeen[:0]
	for _, t := range f.fhirSeen {
		if now.Sub(t) < time.Second {
			recent = append(recent, t)
		}
	}
	f.fhirSeen = recent
	limited := len(recent) >= max(limit, 1)
	if !limited {
		f.fhirSeen = append(f.fhirSeen, now)
	}
	f.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "Too Many Requests", "message": "Rate limit exceeded"})
		return
	}
	delay := minDelay
	if maxDelay > minDelay {
		delay += rand.Float64() * (maxDelay - minDelay)
	}
	select {
	case <-time.After(time.Duration(delay * float64(time.Second))):
	case <-r.Context().Done():
		return
	}
	pages := FHIRPages(patient)
	if page > pages {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": fmt.Sprintf("Page %d does not exist for patient %s", page, patient)})
		return
	}
	size = max(size, 1)
	padding := max(100, payloadKB*1024/size-600)
	entries := make([]any, size)
	for i := range entries {
		id := fmt.Sprintf("%s-p%d-e%d", patient, page, (page-1)*size+i)
		entries[i] = map[string]any{"fullUrl": "MedicationStatement/" + id, "resource": map[string]any{
			"resourceType": "MedicationStatement", "id": id, "status": "active",
			"subject": map[string]any{"reference": "Patient/" + patient}, "_payload": strings.Repeat("M", padding)}}
	}
	self := fmt.Sprintf("http://%s/api/v1/patient-records?patientId=%s&page=%d&pageSize=%d", r.Host, patient, page, size)
	links := []any{map[string]any{"relation": "self", "url": self}}
	if page < pages {
		links = append(links, map[string]any{"relation": "next",
			"url": fmt.Sprintf("http://%s/api/v1/patient-records?patientId=%s&page=%d&pageSize=%d", r.Host, patient, page+1, size)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"resourceType": "Bundle", "type": "searchset", "total": pages * size,
		"link": links, "entry": entries, "meta": map[string]any{"patientId": patient, "page": page, "pageSize": size,
			"totalPages": pages, "delaySeconds": math.Round(delay*100) / 100, "estimatedResponseKB": padding * size / 1024}})
}

// FHIRPages is how many pages /api/v1/patient-records has for a patient: 2 to 5,
// fixed per id (from its MD5, as NoETL's fixture draws it).
func FHIRPages(patient string) int {
	sum := md5.Sum([]byte(patient))
	return 2 + int(sum[len(sum)-1]%4) // the 128-bit number mod 4
}

// floatQuery reads a query number, def when absent or not a number.
func floatQuery(s string, def float64) float64 {
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && v >= 0 {
		return v
	}
	return def
}
