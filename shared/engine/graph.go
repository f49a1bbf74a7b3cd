package engine

// graph is the per-playbook analysis the orchestrator needs, computed once at
// Parse (R-J1) so no event ever walks the whole playbook.
type graph struct {
	succ [][]int // distinct arc targets, in arc order
	// fwdPreds are the reachable predecessors through forward arcs; predecessors
	// through back edges (cycles) do not count toward joins (dsl.md §4.8).
	fwdPreds [][]int
	// anc[s] holds the steps that have a path to a predecessor of s not passing
	// through s (R-J1). A step is never in its own set.
	anc []bitset
	// rank is the depth-first preorder position from start (R-J6); unreachable
	// steps rank after all reachable ones.
	rank      []int
	reachable []bool
}

type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

func analyse(pb *Playbook) *graph {
	n := len(pb.Steps)
	g := &graph{
		succ:      make([][]int, n),
		fwdPreds:  make([][]int, n),
		anc:       make([]bitset, n),
		rank:      make([]int, n),
		reachable: make([]bool, n),
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
				g.succ[s.Index] = append(g.succ[s.Index], t)
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
	g.rank[start] = next
	next++
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.child == len(g.succ[top.node]) {
			onStack[top.node] = false
			stack = stack[:len(stack)-1]
			continue
		}
		v := g.succ[top.node][top.child]
		top.child++
		if onStack[v] {
			back[[2]int{top.node, v}] = true
			continue
		}
		if !visited[v] {
			visited[v], onStack[v] = true, true
			g.rank[v] = next
			next++
			stack = append(stack, frame{v, 0})
		}
	}
	for i := range n {
		g.reachable[i] = visited[i]
		if !visited[i] {
			g.rank[i] = next
			next++
		}
	}

	for s := range n {
		for _, p := range preds[s] {
			if g.reachable[p] && !back[[2]int{p, s}] {
				g.fwdPreds[s] = append(g.fwdPreds[s], p)
			}
		}
		// Reverse search from s's predecessors that never enters s.
		a := newBitset(n)
		var queue []int
		for _, p := range preds[s] {
			if p != s && g.reachable[p] && !a.has(p) {
				a.set(p)
				queue = append(queue, p)
			}
		}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, p := range preds[x] {
				if p != s && g.reachable[p] && !a.has(p) {
					a.set(p)
					queue = append(queue, p)
				}
			}
		}
		g.anc[s] = a
	}
	return g
}
