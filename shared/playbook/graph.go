package playbook

// Graph is the per-playbook analysis the orchestrator needs, computed once at
// Parse (R-J1) so no event ever walks the whole playbook. Steps are numbered by
// their Index.
type Graph struct {
	Succ [][]int // distinct arc targets, in arc order
	// fwdPreds are the reachable predecessors through forward arcs; predecessors
	// through back edges (cycles) do not count toward joins (dsl.md §4.8).
	FwdPreds [][]int
	// anc[s] holds the steps that have a path to a predecessor of s not passing
	// through s (R-J1). A step is never in its own set.
	Anc []Bitset
	// rank is the depth-first preorder position from start (R-J6); unreachable
	// steps rank after all reachable ones.
	Rank      []int
	Reachable []bool
}

// MaxSteps bounds a workflow's steps. The analysis below keeps, for every step,
// a set over all steps (n²/8 bytes) and fills each with a search of its own, so
// its time and memory grow with the square of the count: 2,000 steps parse in
// about 70 ms and keep 2.6 MB. NoETL's public corpus has at most 56 steps.
const MaxSteps = 2_000

// Bitset is a set of step indexes.
type Bitset []uint64

// NewBitset is an empty set for n steps.
func NewBitset(n int) Bitset { return make(Bitset, (n+63)/64) }

// Set adds step i.
func (b Bitset) Set(i int) { b[i/64] |= 1 << (i % 64) }

// Has reports whether step i is in the set.
func (b Bitset) Has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// Analyse indexes the steps by name and computes the graph (R-J1). The parser
// calls it once, last, on a playbook without errors: step names are unique,
// every arc names a step and Entry names one.
func (p *Playbook) Analyse() {
	p.byName = make(map[string]*Step, len(p.Steps))
	for _, s := range p.Steps {
		p.byName[s.Name] = s
	}
	p.graph = analyse(p)
}

// Graph is the playbook's analysis, computed by Analyse.
func (p *Playbook) Graph() *Graph { return p.graph }

func analyse(pb *Playbook) *Graph {
	n := len(pb.Steps)
	g := &Graph{
		Succ:      make([][]int, n),
		FwdPreds:  make([][]int, n),
		Anc:       make([]Bitset, n),
		Rank:      make([]int, n),
		Reachable: make([]bool, n),
	}
	preds := make([][]int, n)
	for _, s := range pb.Steps {
		if s.Next == nil {
			continue
		}
		seen := map[int]bool{}
		for _, a := range s.Next.Arcs {
			t := pb.byName[a.To].Index
			if !seen[t] {
				seen[t] = true
				g.Succ[s.Index] = append(g.Succ[s.Index], t)
				preds[t] = append(preds[t], s.Index)
			}
		}
	}

	// Depth-first from start in arc order: preorder ranks, reachability, back edges.
	back := map[[2]int]bool{}
	onStack := make([]bool, n)
	visited := make([]bool, n)
	next := 0
	type frame struct{ node, child int }
	start := pb.Start().Index
	stack := []frame{{start, 0}}
	visited[start], onStack[start] = true, true
	g.Rank[start] = next
	next++
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.child == len(g.Succ[top.node]) {
			onStack[top.node] = false
			stack = stack[:len(stack)-1]
			continue
		}
		v := g.Succ[top.node][top.child]
		top.child++
		if onStack[v] {
			back[[2]int{top.node, v}] = true
			continue
		}
		if !visited[v] {
			visited[v], onStack[v] = true, true
			g.Rank[v] = next
			next++
			stack = append(stack, frame{v, 0})
		}
	}
	for i := range n {
		g.Reachable[i] = visited[i]
		if !visited[i] {
			g.Rank[i] = next
			next++
		}
	}

	queue := make([]int, 0, n) // one search at a time: reused
	for s := range n {
		for _, p := range preds[s] {
			if g.Reachable[p] && !back[[2]int{p, s}] {
				g.FwdPreds[s] = append(g.FwdPreds[s], p)
			}
		}
		// Reverse search from s's predecessors that never enters s.
		a := NewBitset(n)
		queue = queue[:0]
		for _, p := range preds[s] {
			if p != s && g.Reachable[p] && !a.Has(p) {
				a.Set(p)
				queue = append(queue, p)
			}
		}
		for head := 0; head < len(queue); head++ {
			x := queue[head]
			for _, p := range preds[x] {
				if p != s && g.Reachable[p] && !a.Has(p) {
					a.Set(p)
					queue = append(queue, p)
				}
			}
		}
		g.Anc[s] = a
	}
	return g
}
