package replay

import (
	"errors"
	"fmt"
	"strings"
)

// StatusUnknown is the execution status of a fold that read no events
// (replay.md "Output"); the others are lifecycle's execution statuses.
const StatusUnknown = "UNKNOWN"

// DefaultLimit is the number of events folded when the caller sets no limit.
const DefaultLimit = 100000

// MaxLimit is the most events one replay request folds, its limit and
// verify's fold of the whole log alike: a fold keeps its projection in
// memory and answers it whole, so a larger one would not fit a server's
// memory or one answer (a Lambda's 512 MB and 6 MB).
const MaxLimit = 100000

// Projection selects what the fold keeps (the `projection` query parameter).
type Projection string

// The projections of replay.md "Parameters".
const (
	ProjectionAll            Projection = "all"
	ProjectionExecution      Projection = "execution"
	ProjectionStage          Projection = "stage"
	ProjectionFrame          Projection = "frame"
	ProjectionCommand        Projection = "command"
	ProjectionBusinessObject Projection = "business_object"
	ProjectionLoop           Projection = "loop"
	ProjectionStep           Projection = "step"
)

// projectionKey pairs a single projection with its output key.
type projectionKey struct {
	P   Projection
	Key string
}

// projections lists the single projections in output order. A function,
// not a package variable, so nothing package-level is mutable.
func projections() []projectionKey {
	return []projectionKey{
		{ProjectionExecution, "execution"},
		{ProjectionStep, "steps"},
		{ProjectionStage, "stages"},
		{ProjectionFrame, "frames"},
		{ProjectionCommand, "commands"},
		{ProjectionBusinessObject, "business_objects"},
		{ProjectionLoop, "loops"},
	}
}

func allowedProjections() string {
	names := make([]string, 0, 8)
	for _, p := range projections() {
		names = append(names, string(p.P))
	}
	return strings.Join(append(names, string(ProjectionAll)), ", ")
}

// ParseProjection validates the projection parameter; "" means all.
func ParseProjection(s string) (Projection, error) {
	if s == "" {
		return ProjectionAll, nil
	}
	p := Projection(s)
	if p == ProjectionAll {
		return p, nil
	}
	for _, q := range projections() {
		if q.P == p {
			return p, nil
		}
	}
	return "", &ParamError{Param: "projection",
		Msg: fmt.Sprintf("Unknown projection %q: use one of %s", s, allowedProjections())}
}

func (p Projection) includes(q Projection) bool {
	return p == ProjectionAll || p == "" || p == q
}

// StepProjector is the extension point for the `steps` projection: the
// engine's own fold plugs in here so replay and the live snapshot share one
// implementation. Add sees every folded row in seq order; Value returns the
// projection as a JSON value (it is deep-copied and normalised to the jsonx
// convention before it is hashed or returned).
type StepProjector interface {
	Add(r Row) error
	Value() any
}

// Options configure a Folder.
type Options struct {
	// Projection selects the projections kept; "" means all. Unselected
	// projections are neither folded nor emitted, so memory stays
	// O(selected projection).
	Projection Projection
	// TenantID and OrganizationID label the output; "" becomes "default"
	// (NoETL's single-tenant default).
	TenantID       string
	OrganizationID string
	ExecutionID    string
	// Cutoff stops the fold before the first row it does not admit.
	Cutoff Cutoff
	// Limit is the most events folded; <= 0 means DefaultLimit. Feed up to
	// Limit+1 rows: the extra one is what tells the fold the log was
	// truncated (R-X4: never truncate silently).
	Limit int
	// Steps folds the `steps` projection; nil leaves it an empty object.
	Steps StepProjector
}

// ErrCutoffReached is returned by Add for the first row beyond the cutoff
// (and every row after it): the caller stops streaming. The row is not folded.
var ErrCutoffReached = errors.New("replay: cutoff reached")

// ErrLimitReached is returned by Add for a row past the limit: the row is not
// folded and the state reports truncated=true.
var ErrLimitReached = errors.New("replay: limit reached")

// IsStop reports whether err means "stop streaming, the fold is complete"
// rather than a failure.
func IsStop(err error) bool {
	return errors.Is(err, ErrCutoffReached) || errors.Is(err, ErrLimitReached)
}

// Folder folds an execution's events, one at a time in seq order, into the
// replay projections. It keeps only the projections (never the log), so its
// memory is O(projection size). A Folder is not safe for concurrent use.
type Folder struct {
	opts  Options
	limit int
	stop  error

	count         int64
	lastSeq       int64
	lastEventID   int64
	lastEventType string
	truncated     bool

	exec     executionState
	stages   map[string]*stageState
	frames   map[string]*frameState
	commands map[string]*commandState
	objects  map[string]*objectState
	loops    map[string]*loopState
	// iterations maps our loop iteration commands to their loop (R-X3); kept
	// only while the loop projection is selected.
	iterations map[string]*iteration
}

// NewFolder returns an empty fold. Options are taken as given; use
// ParseProjection / ParseQuery to validate user input first.
func NewFolder(opts Options) *Folder {
	if opts.Projection == "" {
		opts.Projection = ProjectionAll
	}
	if opts.TenantID == "" {
		opts.TenantID = "default"
	}
	if opts.OrganizationID == "" {
		opts.OrganizationID = "default"
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	return &Folder{
		opts:       opts,
		limit:      limit,
		exec:       executionState{status: StatusUnknown},
		stages:     map[string]*stageState{},
		frames:     map[string]*frameState{},
		commands:   map[string]*commandState{},
		objects:    map[string]*objectState{},
		loops:      map[string]*loopState{},
		iterations: map[string]*iteration{},
	}
}

// Add folds one row. Rows must arrive in strictly increasing Seq order.
// It returns ErrCutoffReached or ErrLimitReached (see IsStop) when the row is
// beyond the fold's end; any other error leaves the fold unchanged.
func (f *Folder) Add(r Row) error {
	if f.stop != nil {
		return f.stop
	}
	if r.Seq <= 0 {
		return fmt.Errorf("replay: event %d has no seq", r.EventID)
	}
	if r.Seq <= f.lastSeq {
		return fmt.Errorf("replay: event %d has seq %d after seq %d: rows must arrive in increasing seq order",
			r.EventID, r.Seq, f.lastSeq)
	}
	if !f.opts.Cutoff.Admits(r) {
		f.stop = ErrCutoffReached
		return f.stop
	}
	if f.count >= int64(f.limit) {
		f.truncated = true
		f.stop = ErrLimitReached
		return f.stop
	}
	p := f.opts.Projection
	// The plug-in goes first so that its error leaves our state untouched.
	if f.opts.Steps != nil && p.includes(ProjectionStep) {
		if err := f.opts.Steps.Add(r); err != nil {
			return fmt.Errorf("replay: steps projection at seq %d: %w", r.Seq, err)
		}
	}

	f.count++
	f.lastSeq = r.Seq
	f.lastEventID = r.EventID
	f.lastEventType = r.EventType
	typ := canonicalType(r.EventType)

	if p.includes(ProjectionExecution) {
		f.foldExecution(&r, typ)
	} else {
		f.exec.status = nextStatus(f.exec.status, typ)
	}
	if p.includes(ProjectionStage) {
		if s := track(f.stages, stageIDOf(&r), r.EventID); s != nil {
			s.fold(&r, typ)
		}
	}
	if p.includes(ProjectionFrame) {
		if fr := track(f.frames, frameIDOf(&r), r.EventID); fr != nil {
			fr.fold(&r, typ)
		}
	}
	if p.includes(ProjectionCommand) {
		if c := track(f.commands, commandIDOf(&r), r.EventID); c != nil {
			c.fold(&r, typ)
		}
	}
	if p.includes(ProjectionBusinessObject) {
		f.foldBusinessObject(&r)
	}
	if p.includes(ProjectionLoop) {
		f.foldLoop(&r, typ)
	}
	return nil
}
