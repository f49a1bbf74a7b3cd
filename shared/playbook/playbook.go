package playbook

import (
	"fmt"

	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// APIVersion is the only playbook dialect accepted.
const APIVersion = "noetl.io/v2"

// Playbook is a parsed, validated and analysed playbook. It is immutable after
// Parse and safe to share between goroutines; compile it once per catalog version.
type Playbook struct {
	Metadata Metadata
	// Workload holds the defaults; the execute payload overrides keys (shallow).
	Workload map[string]any
	// Keychain is kept as written and passed to workers.
	Keychain []any
	Steps    []*Step
	// Source is the YAML the playbook was parsed from.
	Source []byte
	// Expanded is its size with aliases, merge keys and workbook references
	// expanded, which MaxExpandedNodes and MaxExpandedBytes bound.
	Expanded Expansion
	// Compiled is what its templates cost once compiled.
	Compiled Compiled

	byName map[string]*Step
	// Entry names the step every execution begins with (the parser's workflow
	// says how it is chosen).
	Entry string
	graph *Graph
	// WorkloadTemplates are the string workload values holding {{, compiled:
	// PrepareWorkload renders them once at start (R-W5).
	WorkloadTemplates map[string]*tmpl.Template
}

// Weight estimates the memory a parsed playbook holds, in bytes, for caches
// that bound it: its source, its expanded text, its compiled templates
// (Compiled.Cost: each distinct text once, however often aliases repeat it;
// a program holds up to 660 times its text), the values and arcs its nodes
// became (about 64 bytes each),
// and its graph: a set over all steps for every step (n²/8 bytes) and about
// 1 KB per step besides.
func (p *Playbook) Weight() int {
	x := p.Expanded
	n := len(p.Steps)
	graph := n*(24+8*((n+63)/64)) + 1024*n
	return len(p.Source) + x.Bytes + 64*x.Nodes + p.Compiled.Cost + graph
}

// Metadata is the playbook's metadata block (R-N4).
type Metadata struct {
	Name        string
	Path        string
	Version     string // opaque
	Description string
	Labels      map[string]any
}

// Step returns the named step, or nil.
func (p *Playbook) Step(name string) *Step { return p.byName[name] }

// Start is the entry step: executor.spec.entry_step, else the step named start,
// else the first step.
func (p *Playbook) Start() *Step { return p.byName[p.Entry] }

// Step is one workflow step (dsl.md §2).
type Step struct {
	Name  string
	Index int    // position in workflow, the key for the graph's bitsets
	Path  string // YAML path, e.g. workflow[3]
	Desc  string
	When  *tmpl.Template // nil: always true
	// Admit holds NoETL's spec.policy.admit rules, a second guard checked after
	// When: the first rule whose When holds decides.
	Admit []AdmitRule
	Input *tmpl.Value // step-level input (alias args), merged under the tool's own input
	// Tool is set for a single tool; Pipeline for a list of tools. Exactly one is set.
	Tool     *Tool
	Pipeline []*PipelineItem
	Loop     *Loop
	Set      []SetEntry
	Next     *Next // nil: a leaf
	Retry    Retry
	Timeout  int // seconds (R-L2)
	OnError  string
	// MaxVisits bounds how often the step may be entered (R-J8).
	MaxVisits int
}

// ToolKind is the kind workers see as the command's action: the tool's kind, or
// task_sequence (NoETL's name, so its workers recognise it) for a pipeline and for
// a single tool with spec.policy, which ships as a one-item pipeline.
func (s *Step) ToolKind() string {
	if s.UsesPolicy() {
		return toolkind.TaskSequence
	}
	return s.Tool.Kind
}

// UsesPolicy reports whether the worker must run the step as a pipeline: a list of
// tools, or a single tool with spec.policy (worker.md §3).
func (s *Step) UsesPolicy() bool { return s.Tool == nil || s.Tool.HasPolicy }

// Tool is a tool invocation after workbook references were resolved.
type Tool struct {
	Kind string
	// Raw is the config as written (workbook merged), `kind` excluded. Pipelines and
	// policies ship it raw for the worker to render item by item (R-S3).
	Raw map[string]any
	// Config is Raw compiled for rendering at dispatch, without `spec` (policy rules
	// render on the worker) and without a python `code` that is no template.
	Config *tmpl.Value
	// Code is the python body as written (rendered with Config when it is a
	// template, as NoETL renders it).
	Code      string
	HasPolicy bool
	// Supported is false for kinds NoETL defines but this project does not run
	// (R-N1): they register with a warning and fail at dispatch.
	Supported bool
	// Roots lists the names the raw config's templates read (item set and policy
	// included), computed once: pipelines ship those values to the worker (R-S2, R-S3).
	Roots []string
	// CodeNames are the words a python code mentions: the render context names
	// its `context` global may read (see codeWords).
	CodeNames []string
}

// Label is the pipeline label of a single tool shipped as a one-item pipeline
// (spec.policy): its name, else the step's.
func (t *Tool) Label(step string) string {
	if n, ok := t.Raw["name"].(string); ok && n != "" {
		return n
	}
	return step
}

// AdmitRule is one step admission rule.
type AdmitRule struct {
	When  *tmpl.Template // nil: always holds (an else rule)
	Allow bool
}

// PipelineItem is one tool of a pipeline.
type PipelineItem struct {
	Label string
	Tool  *Tool
}

// Loop is a step's loop block.
type Loop struct {
	In          *tmpl.Value // a template string or a literal list/map
	Iterator    string
	Mode        string // sequential | parallel | cursor
	MaxInFlight int    // parallel and cursor only (R-A9)
	// MaxInFlightT, when set, replaces MaxInFlight: it is rendered once when the loop
	// starts and must give a whole number ≥ 1.
	MaxInFlightT *tmpl.Template
	// Cursor is set for a cursor loop (loop.cursor, mode cursor): its items are rows
	// claimed from a database while the loop runs (docs/noetl-playbooks.md).
	Cursor *Cursor
	// Unsupported names a loop form NoETL has but we do not run (R-N1): a cursor
	// of a kind whose claims this project does not run.
	Unsupported string
}

// Cursor is a cursor loop's source, NoETL's loop.cursor: a claim statement that
// marks rows of a work table as taken and returns them. The engine issues it as a
// command of the cursor's kind whenever the rows it holds run out, turns the rows
// into iterations (max_in_flight at a time), and ends the loop when a claim
// issued with no iteration in flight returns no row. Rows live in the event log
// and the stored items like any loop's, so a worker that dies mid-row loses no
// row: its iteration is issued again (R-L3).
type Cursor struct {
	Kind  string         // the claim's database: postgres
	Auth  *tmpl.Template // credential alias
	Claim *tmpl.Template // rendered at each claim; __frame_max_rows is Batch
	// Batch is the rows one claim asks for: spec.frame.max_rows, else the
	// loop's limit (0: the limit, rendered at entry when templated).
	Batch int
	// PerFrame (spec.frame.process: frame) makes each claim's rows one iteration,
	// the iterator bound to the list; otherwise each row is one.
	PerFrame bool
	// RowConcurrency (spec.frame.row_concurrency, default 1) multiplies the
	// loop's limit: NoETL runs that many rows of each slot's frame at once.
	RowConcurrency int
	// Options is loop.cursor.options as written, shipped with the claim.
	Options map[string]any
}

// SetEntry is one `set:` key: the path after the first ctx./iter./step. prefix is
// dropped (R-T9), and its compiled value.
type SetEntry struct {
	Key   string // as written
	Path  string // dotted path in ctx, e.g. config.timeout
	Value *tmpl.Value
}

// Next is a step's routing (dsl.md §3).
type Next struct {
	Mode string // exclusive | inclusive
	Arcs []*Arc
}

// Arc is one outgoing arc.
type Arc struct {
	To   string
	When *tmpl.Template // nil: true
	// Set holds the arc's set and args values (args are a transient set, R-J9).
	Set []SetEntry
}

// Retry is a step's retry policy (dsl.md §2, R-L3, R-L6).
type Retry struct {
	MaxAttempts int
	Delay       float64 // seconds
	Backoff     string  // fixed | linear | exponential
	MaxDelay    float64 // seconds
	On          []string
	// OnStatus, from NoETL's retry_on_status, narrows error-class retries to these
	// HTTP statuses when set.
	OnStatus []int64
}

// Failure classes of a command (R-L3).
const (
	ClassError   = "error"
	ClassTimeout = "timeout"
	ClassExpired = "expired"
)

// Step defaults (dsl.md §2, R-J8, R-A9).
const (
	DefaultTimeout     = 3600
	DefaultMaxVisits   = 1000
	DefaultMaxInFlight = 100
	DefaultRetryDelay  = 1.0
	DefaultMaxDelay    = 300.0
	OnErrorFail        = "fail"
	OnErrorContinue    = "continue"
	ModeExclusive      = "exclusive"
	ModeInclusive      = "inclusive"
	ModeSequential     = "sequential"
	ModeParallel       = "parallel"
	ModeCursor         = "cursor"
	// DefaultCursorInFlight is a cursor loop's max_in_flight when none is given:
	// NoETL's one worker slot.
	DefaultCursorInFlight = 1
)

// MaxLoopInFlight bounds a loop's max_in_flight (times a cursor's
// row_concurrency), written or rendered: each command in flight is kept in
// the execution's state, which every event rewrites, so a loop's first
// decision issues that many commands and each later event costs in
// proportion. NoETL's public corpus uses at most 200.
const MaxLoopInFlight = 1_000

// InFlightError is the refusal of a loop whose commands in flight, n, pass
// MaxLoopInFlight; what names the setting.
func InFlightError(what string, n int) string {
	return fmt.Sprintf("%s is %d, more than %d (limit playbook.MaxLoopInFlight): every command in flight is kept in the execution's state, which each event rewrites; set it to %d or less",
		what, n, MaxLoopInFlight, MaxLoopInFlight)
}
