package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/wire"
)

// recorded is one exchange of ../shared/conformance/noetl-worker/*.jsonl.
type recorded struct {
	T      float64 `json:"t"`
	Method string  `json:"method"`
	Path   string  `json:"path"`
	Status int     `json:"status"`
	Req    string  `json:"req"`
	Resp   string  `json:"resp"`
}

// replayRecorded replays every request NoETL's Python worker sent in
// wire.jsonl (the whole recorded run) against d, with the recorded ids
// rewritten to those of fresh executions, in the recorded order. Each recorded
// execution is re-created as a playbook of noop steps named as the commands it
// claimed (a looped step loops over three items), started when its first
// request comes. Batches with the same body share an Idempotency-Key, as the
// worker's retries of one batch do (headers were not recorded). Pool routes
// are left out (another issue serves them). It returns each request's path
// template and the status we answered.
func replayRecorded(t *testing.T, d *devStack) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(conformance.Dir(t), "noetl-worker", "wire.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []recorded
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r recorded
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// Lines are in the order the answers came; t is when each request was sent.
	slices.SortStableFunc(recs, func(a, b recorded) int { return cmp.Compare(a.T, b.T) })
	// What each recorded execution claimed, in order: its steps and loops.
	type claim struct {
		step      string
		loop      bool
		commandID string
		eventID   int64
	}
	claims := map[int64][]claim{}
	for _, r := range recs {
		if !strings.HasSuffix(r.Path, "/claim") || r.Status != 200 {
			continue
		}
		var c struct {
			EventID     int64          `json:"event_id"`
			ExecutionID int64          `json:"execution_id"`
			NodeName    string         `json:"node_name"`
			CommandID   string         `json:"command_id"`
			Meta        map[string]any `json:"meta"`
		}
		if err := json.Unmarshal([]byte(r.Resp), &c); err != nil {
			t.Fatal(err)
		}
		claims[c.ExecutionID] = append(claims[c.ExecutionID], claim{c.NodeName, c.Meta["iteration_total"] != nil, c.CommandID, c.EventID})
	}
	execOf := regexp.MustCompile(`"execution_id":\s*"?(\d+)`)
	newExec := map[int64]int64{}
	rewrite := map[string]string{} // recorded id text → new
	seen := map[int64]map[string]int{}
	start := func(old int64) int64 {
		if id, ok := newExec[old]; ok {
			return id
		}
		var steps []string
		loops := map[string]bool{}
		for _, c := range claims[old] {
			if !containsString(steps, c.step) {
				steps = append(steps, c.step)
			}
			loops[c.step] = loops[c.step] || c.loop
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: replay_%d, path: tests/noetl_wire/replay_%d}\nworkload: {items: [10, 20, 30]}\nworkflow:\n", old, old)
		for i, s := range steps {
			fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: noop}\n", s)
			if loops[s] {
				b.WriteString("    loop: {in: \"{{ items }}\", iterator: num, spec: {mode: sequential}}\n")
			}
			if i+1 < len(steps) {
				fmt.Fprintf(&b, "    next: %s\n", steps[i+1])
			}
		}
		id, err := d.cl.Execute(context.Background(), wire.ExecuteRequest{Path: d.register(t, b.String())})
		if err != nil {
			t.Fatal(err)
		}
		newExec[old], seen[old] = id, map[string]int{}
		rewrite[strconv.FormatInt(old, 10)] = strconv.FormatInt(id, 10)
		return id
	}
	// mapClaim finds the command a recorded claim names in the new execution:
	// the same step's next command.issued.
	// The recording logs an exchange when its answer came: a claim can be
	// logged before the batch that issued its command. Such a claim waits
	// until its command is issued.
	mapClaim := func(old int64, c claim) bool {
		id := start(old)
		n := seen[old][c.step]
		for _, e := range d.events(t, id) {
			if e.EventType == "command.issued" && string(e.NodeName) == c.step {
				if n == 0 {
					rewrite[strconv.FormatInt(c.eventID, 10)] = strconv.FormatInt(int64(e.EventID), 10)
					rewrite[c.commandID] = string(e.CommandID)
					seen[old][c.step]++
					return true
				}
				n--
			}
		}
		return false
	}
	claimIdx := map[int64]int{}
	// unmapped reports whether a request names a recorded command not yet
	// issued here.
	unmapped := func(old int64, body string) bool {
		for _, c := range claims[old] {
			if _, ok := rewrite[c.commandID]; !ok && strings.Contains(body, `"`+c.commandID+`"`) {
				return true
			}
		}
		return false
	}
	var answers []string
	held := map[int64][]recorded{}
	var queue []recorded
	for i := 0; i < len(recs) || len(queue) > 0; {
		var r recorded
		fromQueue := len(queue) > 0
		if fromQueue {
			r, queue = queue[0], queue[1:]
		} else {
			r = recs[i]
			i++
		}
		// The pool calls (register, the pool status) name no execution: they
		// are replayed as sent.
		pool := strings.Contains(r.Path, "/pool/")
		var old int64
		if m := execOf.FindStringSubmatch(r.Req); m != nil {
			old, _ = strconv.ParseInt(m[1], 10, 64)
		}
		isClaim := strings.HasSuffix(r.Path, "/claim")
		if isClaim {
			var c struct {
				ExecutionID int64  `json:"execution_id"`
				CommandID   string `json:"command_id"`
			}
			_ = json.Unmarshal([]byte(r.Resp), &c)
			old = c.ExecutionID
			if _, done := rewrite[c.CommandID]; !done {
				// The recording logs an exchange when its answer came: a claim
				// can be logged before the batch that issued its command, and
				// what follows the claim waits with it.
				if i := claimIdx[old]; i >= len(claims[old]) || !mapClaim(old, claims[old][i]) {
					held[old] = append(held[old], r)
					continue
				}
				claimIdx[old]++
			}
		} else if old != 0 && (len(held[old]) > 0 && !fromQueue || unmapped(old, r.Req)) {
			held[old] = append(held[old], r)
			continue
		}
		if old == 0 && !pool {
			continue
		}
		if !pool {
			start(old)
		}
		path, body := substitute(r.Path, rewrite), substitute(r.Req, rewrite)
		req, _ := http.NewRequest(r.Method, d.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if strings.HasSuffix(path, "/events/batch") {
			sum := sha256.Sum256([]byte(body))
			req.Header.Set("Idempotency-Key", "replay:"+hex.EncodeToString(sum[:8]))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tmpl := regexp.MustCompile(`\d+`).ReplaceAllString(r.Path, "N")
		answers = append(answers, fmt.Sprintf("%s %s %d (recorded %d)", r.Method, tmpl, resp.StatusCode, r.Status))
		// NoETL's server refuses a claim of a command its holder runs (409
		// active_claim) or of one that is over (409 already_terminal): the
		// recorded run claimed a command again after its lease expired under
		// heartbeats we ignored then; replayed, the heartbeats kept the lease
		// and the first attempt completed.
		noetlRefuses := isClaim && resp.StatusCode == http.StatusConflict &&
			(strings.Contains(string(out), `"code":"active_claim"`) || strings.Contains(string(out), `"code":"already_terminal"`))
		if resp.StatusCode/100 != 2 && !noetlRefuses {
			t.Errorf("replayed %s %s → %d %s\nbody %s", r.Method, path, resp.StatusCode, out, cut(body, 400))
		}
		// What waited on this execution is tried again, in its order.
		if w := held[old]; len(w) > 0 && !fromQueue {
			delete(held, old)
			queue = append(queue, w...)
		}
	}
	for old, w := range held {
		t.Errorf("recorded execution %d: %d requests named commands never issued", old, len(w))
	}
	return answers
}

// substitute rewrites recorded ids: whole numbers and command ids.
func substitute(s string, ids map[string]string) string {
	// Longest first, so a command id is rewritten before the numbers in it.
	keys := make([]string, 0, len(ids))
	for k := range ids {
		keys = append(keys, k)
	}
	sortByLen(keys)
	var b bytes.Buffer
	for i := 0; i < len(s); {
		matched := false
		for _, k := range keys {
			if strings.HasPrefix(s[i:], k) && boundary(s, i-1) && boundary(s, i+len(k)) {
				b.WriteString(ids[k])
				i += len(k)
				matched = true
				break
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// boundary: s[i] does not continue a number (or i is outside s).
func boundary(s string, i int) bool {
	return i < 0 || i >= len(s) || s[i] < '0' || s[i] > '9'
}

func sortByLen(keys []string) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && len(keys[j]) > len(keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
