package playbook

// Outline is a playbook's shape for display: its steps in workflow order and
// their arcs. The dashboard draws its step graph from it, so the graph shows
// the playbook exactly as the parser read it (workbook references, aliases,
// every `next` spelling) without a second YAML reader in the browser.
type Outline struct {
	Steps []OutlineStep `json:"steps"`
}

// OutlineStep is one step of an Outline.
type OutlineStep struct {
	Name string `json:"name"`
	// Path is the step's YAML path (workflow[3]).
	Path string `json:"path"`
	Desc string `json:"desc,omitempty"`
	// Tool is the kind workers see (task_sequence for a pipeline).
	Tool string `json:"tool"`
	// Loop is the loop mode (sequential, parallel) when the step loops.
	Loop     string `json:"loop,omitempty"`
	Iterator string `json:"iterator,omitempty"`
	// MaxAttempts is the retry policy's bound (1: no retry).
	MaxAttempts int `json:"max_attempts"`
	// Mode is the next block's routing mode (exclusive, inclusive); empty for a leaf.
	Mode string       `json:"mode,omitempty"`
	Next []OutlineArc `json:"next"`
}

// OutlineArc is one outgoing arc; When is its condition as written, empty
// when it always fires.
type OutlineArc struct {
	To   string `json:"to"`
	When string `json:"when,omitempty"`
}

// Outline returns the playbook's outline.
func (p *Playbook) Outline() Outline {
	o := Outline{Steps: make([]OutlineStep, 0, len(p.Steps))}
	for _, s := range p.Steps {
		os := OutlineStep{Name: s.Name, Path: s.Path, Desc: s.Desc, Tool: s.ToolKind(),
			MaxAttempts: s.Retry.MaxAttempts, Next: []OutlineArc{}}
		if s.Loop != nil {
			os.Loop, os.Iterator = s.Loop.Mode, s.Loop.Iterator
		}
		if s.Next != nil {
			os.Mode = s.Next.Mode
			for _, a := range s.Next.Arcs {
				arc := OutlineArc{To: a.To}
				if a.When != nil {
					arc.When = a.When.Source()
				}
				os.Next = append(os.Next, arc)
			}
		}
		o.Steps = append(o.Steps, os)
	}
	return o
}
