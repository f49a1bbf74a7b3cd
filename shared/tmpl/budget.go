package tmpl

import (
	"fmt"
	"reflect"
)

// A render's budget bounds what its templates build, so a hostile or mistaken
// template fails with an error instead of exhausting memory: text multiplies
// (three chained replaces of a long string grow it a thousandfold), lists and maps
// multiply (repetition, nesting) and loops and scans multiply work.
//
// The limits are about a hundred times what real templates build (a rendered
// SQL statement, a request body, a list of a few thousand rows) and small enough
// that a server rendering for many executions at once stays within memory: a
// render holds at most its inputs plus MaxRenderBytes of text and
// MaxRenderElements values.
const (
	// MaxRenderBytes bounds the text a budget's renders build: every string a
	// helper returns, the strings inside every list or map it returns, and map keys.
	MaxRenderBytes = 16 << 20
	// MaxRenderElements bounds the list items and map entries they build, counted
	// deep: a list of lists counts the inner items too.
	MaxRenderElements = 1_000_000
	// MaxLoopIterations bounds {% for %} iterations, nested loops counted in full.
	// A count, not a clock, so a render succeeds or fails the same way on every
	// machine (the engine is deterministic).
	MaxLoopIterations = 1_000_000
	// MaxRenderWork bounds a render's work, what its helpers read: every list
	// item and map entry visited and every byte of text scanned (`in`, `==`,
	// `<`, length, min, max, sum, sort, unique, join, a filter reading a
	// string, a computed key's bytes), and each helper call a loop iteration
	// makes. Reading a value builds nothing, so without this limit a loop
	// testing `x in big` is quadratic within the others. A count, not a clock,
	// like MaxLoopIterations: scans of 1e8 take well under a second, a loop of
	// 1e8 cheap calls several; real templates read thousands.
	MaxRenderWork = 100_000_000
)

// Budget is what renders may still build. Every helper the generated code calls
// draws from it through one function, Budget.call, which charges the helper's
// result; a helper is exempt only if it is marked free in its table entry
// (it returns an argument, a part of one, a number or a bool), and a test holds
// that list. So a filter added later is charged without doing anything.
//
// What a helper reads it charges itself (Budget.read), since only it knows what
// it scanned; every helper but the flat ones (constant work, listed by a test)
// is handed the Budget to do so.
//
// A value counts its size as it would be serialized: a string its bytes, a list
// or map its items plus everything they hold, however shared (repeating one list
// a thousand times builds a thousand copies once stored or sent). Values built
// inside values count again at each level that builds them, intermediate results
// count too, and a render that hands back a value it was given, unchanged, builds
// nothing.
//
// One Budget covers one Template.Render or Value.Render when Env.Budget is nil;
// a caller that renders many templates for one decision (the engine for one
// event) passes one Budget to all of them, so a playbook cannot multiply its
// allowance by writing many templates. A Budget is not safe for concurrent use.
type Budget struct {
	maxBytes, maxElems int64
	bytes, elems       int64 // built so far
	iterations         int
	work, maxWork      int64 // read so far (MaxRenderWork)
}

// NewBudget returns a full budget: MaxRenderBytes, MaxRenderElements,
// MaxLoopIterations and MaxRenderWork.
func NewBudget() *Budget { return newBudget(MaxRenderBytes, MaxRenderElements) }

// newBudget is a budget of other sizes, for tests.
func newBudget(maxBytes, maxElems int64) *Budget {
	return &Budget{maxBytes: maxBytes, maxElems: maxElems, maxWork: MaxRenderWork}
}

// Built reports what the budget's renders have built so far: bytes of text and
// list items and map entries.
func (b *Budget) Built() (bytes, elements int64) { return b.bytes, b.elems }

// Read reports the work the budget's renders have done so far: list items and
// map entries visited and bytes scanned (MaxRenderWork).
func (b *Budget) Read() int64 { return b.work }

// BudgetError is a render stopped by its budget. Limit names the constant.
type BudgetError struct {
	Limit string
	Max   int64
}

func (e *BudgetError) Error() string {
	switch e.Limit {
	case "MaxRenderBytes":
		return fmt.Sprintf("render budget exceeded: this would build more than %d MiB of text (limit MaxRenderBytes = %d bytes per render); build less, or pass large values on unchanged", e.Max>>20, e.Max)
	case "MaxRenderElements":
		return fmt.Sprintf("render budget exceeded: this would build more than %d list items and map entries (limit MaxRenderElements per render); build less, or pass large values on unchanged", e.Max)
	case "MaxRenderWork":
		return fmt.Sprintf("render budget exceeded: this would read more than %d list items, map entries and bytes of text (limit MaxRenderWork per render); scan large values fewer times: test membership in a map instead of a list, or compute once outside the loop", e.Max)
	}
	return fmt.Sprintf("render budget exceeded: loops would run more than %d iterations (limit %s per render)", e.Max, e.Limit)
}

// extent is a value's size as the budget counts it.
type extent struct{ bytes, elems int64 }

// room is what is left.
func (b *Budget) room() extent { return extent{b.maxBytes - b.bytes, b.maxElems - b.elems} }

// fits checks that e could still be built, without charging it: for helpers that
// can compute their result's size before building it, so one step never
// allocates past the budget.
func (b *Budget) fits(e extent) error {
	r := b.room()
	switch {
	case e.bytes > r.bytes:
		return &BudgetError{Limit: "MaxRenderBytes", Max: b.maxBytes}
	case e.elems > r.elems:
		return &BudgetError{Limit: "MaxRenderElements", Max: b.maxElems}
	}
	return nil
}

// charge draws e, or refuses without drawing anything.
func (b *Budget) charge(e extent) error {
	if err := b.fits(e); err != nil {
		return err
	}
	b.bytes += e.bytes
	b.elems += e.elems
	return nil
}

// iterate counts one loop iteration.
func (b *Budget) iterate() error {
	if b.iterations >= MaxLoopIterations {
		return &BudgetError{Limit: "MaxLoopIterations", Max: MaxLoopIterations}
	}
	b.iterations++
	return nil
}

// read charges n units of work (MaxRenderWork): items and entries visited,
// bytes scanned. Helpers charge what they are about to read when they know it,
// and what a deep comparison read once it is done: one step reads at most its
// inputs, so it overshoots at most once.
func (b *Budget) read(n int64) error {
	b.work += n
	if b.work > b.maxWork {
		return &BudgetError{Limit: "MaxRenderWork", Max: b.maxWork}
	}
	return nil
}

// readText charges the bytes of s.
func (b *Budget) readText(s string) error { return b.read(int64(len(s))) }

// helper is one function the generated code calls.
type helper struct {
	fn func(b *Budget, a []any) (any, error)
	// free marks a helper whose result costs nothing: an argument, a part of one, a
	// number, a bool, or bookkeeping bounded elsewhere. TestFreeHelpers lists them
	// and checks their results. A free helper still gets the Budget, to charge
	// what it reads (MaxRenderWork).
	free bool
	// flat marks a free helper whose work does not grow with its arguments (a
	// number's arithmetic, truthiness): it gets no Budget, so a template of
	// nothing else does not bind one. TestFlatHelpers lists them.
	flat bool
}

// call runs h and charges what it built: the one place results are counted.
func (b *Budget) call(h helper, args []any) (any, error) {
	if h.flat {
		return h.fn(nil, args)
	}
	out, err := h.fn(b, args)
	if err != nil || h.free {
		return out, err
	}
	return out, b.built(out, args)
}

// built charges v, a helper's result, unless it is one of the helper's arguments
// (handed back unchanged: nothing was built).
func (b *Budget) built(v any, args []any) error {
	switch v.(type) {
	case string, []any, map[string]any:
	default:
		return nil // numbers, bools and null build nothing that grows
	}
	for _, a := range args {
		if same(v, a) {
			return nil
		}
	}
	e, ok := measure(v, b.room())
	if !ok {
		return b.fits(e) // past the room: names the limit
	}
	return b.charge(e)
}

// measure sizes v, stopping as soon as it passes room (ok false), so measuring
// costs at most what the budget still allows.
func measure(v any, room extent) (e extent, ok bool) {
	ok = e.add(v, room)
	return e, ok
}

func (e *extent) add(v any, room extent) bool {
	switch x := v.(type) {
	case string:
		e.bytes += int64(len(x))
	case []any:
		e.elems += int64(len(x))
		for _, c := range x {
			if e.elems > room.elems || e.bytes > room.bytes || !e.add(c, room) {
				return false
			}
		}
	case map[string]any:
		e.elems += int64(len(x))
		for k, c := range x {
			e.bytes += int64(len(k))
			if e.elems > room.elems || e.bytes > room.bytes || !e.add(c, room) {
				return false
			}
		}
	}
	return e.elems <= room.elems && e.bytes <= room.bytes
}

// same reports that v is a itself: the same string, or the same list or map.
func same(v, a any) bool {
	switch x := v.(type) {
	case string:
		y, ok := a.(string)
		return ok && x == y
	case []any:
		y, ok := a.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := a.(map[string]any)
		return ok && reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer()
	}
	return false
}

func (e extent) plus(f extent) extent { return extent{e.bytes + f.bytes, e.elems + f.elems} }

// times is n copies of e, saturating instead of overflowing.
func (e extent) times(n int64) extent {
	mul := func(a int64) int64 {
		if a != 0 && n > (1<<62)/a {
			return 1 << 62
		}
		return a * n
	}
	return extent{mul(e.bytes), mul(e.elems)}
}
