package api

import (
	"fmt"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/redact"
)

// What users are served never carries a secret (worker.md: "the server never
// returns secret values in any API response or event"). Where each rule runs:
//
//   - Worker-supplied results and meta get the key rule when they are
//     stored (shared/controlplane, events.md §7); the worker has already
//     masked every value it resolved (shared/worker).
//   - The workload, the durable context and the command bodies are stored
//     as they are: templates read the workload at run time, and the claiming
//     worker must receive the rendered password its step needs (the claim
//     response is therefore never masked). They are masked here, when they
//     are served: every value under a secret-named key (redact.Value), and
//     every occurrence of the execution's secret workload values (strings
//     under secret-named workload keys, redact.Collect) anywhere in the
//     answer, so a password templated into a shell command or echoed by a
//     step is masked too.
//   - The execution view, the events, GET /api/commands/{event_id} and the
//     replay document are masked; so are verify's differences. The replay
//     document gets the value rule only: its projections carry ids,
//     statuses, counts and digests, keyed by names the user chose (a step
//     called get_token must keep its entry). Replay, verify and checksums
//     are computed from the stored values, so they are not changed by
//     masking; a log exported through the events API is masked, and folding
//     it offline gives digests of the masked values.
//   - The catalog serves a playbook's source as registered: it is the
//     author's text, and changing it would break a round trip through
//     register. Secrets belong in auth: aliases or the execute payload, not
//     in playbooks.

// maskerFor is the masker of an execution's secret workload values.
func maskerFor(workload map[string]any) *redact.Masker {
	return redact.NewMasker(redact.Collect(workload)...)
}

// maskedObject masks a JSON object (nil stays nil).
func maskedObject(m *redact.Masker, v map[string]any) map[string]any {
	if v == nil {
		return nil
	}
	return m.Redact(v).(map[string]any)
}

// maskedString masks a message (a step's or event's error).
func maskedString(m *redact.Masker, s string) string {
	return m.Redact(s).(string)
}

// plain is v as JSON values (structs become objects), so masking reaches
// everything the answer will contain.
func plain(v any) (any, error) {
	b, err := jsonx.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the answer: %w", err)
	}
	return jsonx.Decode(b)
}
