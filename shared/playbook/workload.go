package playbook

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/tmpl"
)

// PrepareWorkload merges the execute payload over the playbook's workload
// (shallow: payload keys replace defaults) and renders, once, the default string
// values that hold templates (R-W5). Payload values are data and never rendered.
// The templates share one render budget (tmpl.Budget), so a workload of many
// templates builds no more than one could.
func (p *Playbook) PrepareWorkload(executionID, catalogID int64, payload map[string]any, now time.Time) (map[string]any, error) {
	out := maps.Clone(p.Workload)
	if out == nil {
		out = map[string]any{}
	}
	id := strconv.FormatInt(executionID, 10)
	vars := map[string]any{
		"execution_id":  id,
		"catalog_id":    strconv.FormatInt(catalogID, 10),
		"playbook_path": p.Metadata.Path,
		"payload":       payload,
		"job":           map[string]any{"uuid": JobUUID(executionID), "execution_id": id},
	}
	budget := tmpl.NewBudget()
	for _, k := range slices.Sorted(maps.Keys(p.WorkloadTemplates)) {
		if _, overridden := payload[k]; overridden {
			continue
		}
		v, err := p.WorkloadTemplates[k].Render(tmpl.Env{Vars: vars, Now: now, Budget: budget})
		if err != nil {
			return nil, fmt.Errorf("workload.%s: %w", k, err)
		}
		out[k] = v
	}
	maps.Copy(out, payload)
	return out, nil
}

// RendersAtStart reports whether the workload key's default is a template
// PrepareWorkload renders for each execution.
func (p *Playbook) RendersAtStart(key string) bool {
	_, ok := p.WorkloadTemplates[key]
	return ok
}

// JobUUID derives NoETL's job.uuid from the execution id, so it is stable across
// replays (R-W5): a version-5-shaped UUID over a sha256 of the id.
func JobUUID(executionID int64) string {
	h := sha256.Sum256([]byte("noetl-job:" + strconv.FormatInt(executionID, 10)))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
