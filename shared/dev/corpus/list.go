package corpus

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Classes of offline.json: what a playbook needs besides this stack.
const (
	ClassLocal     = "local"      // Postgres through credential aliases, python's standard library
	ClassLocalHTTP = "local+http" // also the HTTP fixture standing in for NoETL's test API
	classNeeds     = "needs:"     // a tool kind or feature named after the colon
)

// Entry is one playbook of offline.json.
type Entry struct {
	File  string // relative to the corpus's playbooks/ folder
	Class string // local, local+http or needs:<feature>
}

// Ours reports an entry this project must pass: local and local+http.
func (e Entry) Ours() bool { return e.Class == ClassLocal || e.Class == ClassLocalHTTP }

// List reads offline.json in dir (the corpus folder, holding playbooks/), in file
// order.
func List(dir string) ([]Entry, error) {
	b, err := os.ReadFile(filepath.Join(dir, "offline.json"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Playbooks map[string]string `json:"playbooks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "offline.json"), err)
	}
	if len(doc.Playbooks) == 0 {
		return nil, fmt.Errorf("%s lists no playbooks", filepath.Join(dir, "offline.json"))
	}
	out := make([]Entry, 0, len(doc.Playbooks))
	for f, c := range doc.Playbooks {
		if c != ClassLocal && c != ClassLocalHTTP && !strings.HasPrefix(c, classNeeds) {
			return nil, fmt.Errorf("offline.json: %s: unknown class %q (want local, local+http or needs:<feature>)", f, c)
		}
		out = append(out, Entry{File: f, Class: c})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.File, b.File) })
	return out, nil
}
