package corpus

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestFHIRRecords: /api/v1/patient-records pages a patient's bundle as
// test_fetch_load reads it (meta.page, meta.totalPages, entry), 2 to 5 pages
// fixed per patient, 404 past the last page, 429 with Retry-After over the
// rate limit.
func TestFHIRRecords(t *testing.T) {
	srv := httptest.NewServer(NewFixture())
	defer srv.Close()
	get := func(query string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/v1/patient-records?min_delay=0&max_delay=0&" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, body
	}
	seen := map[int]bool{}
	for i := 1; i <= 40; i++ {
		seen[FHIRPages(fmt.Sprintf("P-%04d", i))] = true
	}
	for n := range seen {
		if n < 2 || n > 5 {
			t.Fatalf("a patient has %d pages, want 2 to 5", n)
		}
	}
	if len(seen) < 3 {
		t.Errorf("40 patients give page counts %v: want them spread over 2 to 5", seen)
	}
	pages := FHIRPages("P-0001")
	code, _, b := get(fmt.Sprintf("patientId=P-0001&page=%d&pageSize=10&payload_kb=2", pages))
	meta, _ := b["meta"].(map[string]any)
	entries, _ := b["entry"].([]any)
	links, _ := b["link"].([]any)
	if code != 200 || fmt.Sprint(meta["page"]) != fmt.Sprint(pages) || fmt.Sprint(meta["totalPages"]) != fmt.Sprint(pages) ||
		len(entries) != 10 || len(links) != 1 || fmt.Sprint(b["total"]) != fmt.Sprint(pages*10) {
		t.Fatalf("last page: %d, meta %v, %d entries, links %v, total %v", code, meta, len(entries), links, b["total"])
	}
	if code, _, b = get("patientId=P-0001&page=1&pageSize=10&payload_kb=2"); code != 200 || len(b["link"].([]any)) != 2 {
		t.Fatalf("first page: %d, links %v: want self and next", code, b["link"])
	}
	if code, _, _ = get(fmt.Sprintf("patientId=P-0001&page=%d", pages+1)); code != http.StatusNotFound {
		t.Fatalf("past the last page: %d, want 404", code)
	}
	limited := 0
	for range 3 {
		code, h, _ := get("patientId=P-0002&page=1&payload_kb=1&rate_limit=1")
		if code == http.StatusTooManyRequests {
			limited++
			if h.Get("Retry-After") != "1" {
				t.Errorf("429 without Retry-After: 1 (%q)", h.Get("Retry-After"))
			}
		}
	}
	if limited == 0 {
		t.Error("three requests within a second at rate_limit=1 were all answered")
	}
}
