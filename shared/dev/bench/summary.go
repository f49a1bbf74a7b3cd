package bench

import "slices"

// Spread is one figure over a shape's runs: the median (of an even count, the
// mean of the middle two) and the range, as ../shared/bench/river-bench.sh
// prints River's, so the two are compared median to median.
type Spread struct{ Median, Min, Max float64 }

// Summary is one shape's figures over its runs (named as Result's). A pointer
// is nil when no run measured the figure.
type Summary struct {
	Shape                                                        string
	Runs                                                         int
	StepsPerSecond                                               Spread
	StepCycleP50Ms, StepCycleP99Ms                               *Spread
	ServerCPUMsPerStep, WorkerCPUMsPerStep, PostgresCPUMsPerStep *Spread
}

// Summarize groups results by shape, in the order the shapes first ran.
func Summarize(rs []Result) []Summary {
	var order []string
	byShape := map[string][]Result{}
	for _, r := range rs {
		if _, ok := byShape[r.Shape]; !ok {
			order = append(order, r.Shape)
		}
		byShape[r.Shape] = append(byShape[r.Shape], r)
	}
	out := make([]Summary, 0, len(order))
	for _, shape := range order {
		runs := byShape[shape]
		s := Summary{Shape: shape, Runs: len(runs)}
		s.StepsPerSecond = *spreadOf(runs, func(r Result) *float64 { return &r.StepsPerSecond })
		s.StepCycleP50Ms = spreadOf(runs, func(r Result) *float64 { return r.StepCycleP50Ms })
		s.StepCycleP99Ms = spreadOf(runs, func(r Result) *float64 { return r.StepCycleP99Ms })
		s.ServerCPUMsPerStep = spreadOf(runs, func(r Result) *float64 { return r.ServerCPUMsPerStep })
		s.WorkerCPUMsPerStep = spreadOf(runs, func(r Result) *float64 { return r.WorkerCPUMsPerStep })
		s.PostgresCPUMsPerStep = spreadOf(runs, func(r Result) *float64 { return r.PostgresCPUMsPerStep })
		out = append(out, s)
	}
	return out
}

// spreadOf is the spread of the runs that measured a figure; nil if none did.
func spreadOf(runs []Result, figure func(Result) *float64) *Spread {
	var vs []float64
	for _, r := range runs {
		if v := figure(r); v != nil {
			vs = append(vs, *v)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	slices.Sort(vs)
	n := len(vs)
	median := vs[n/2]
	if n%2 == 0 {
		median = (vs[n/2-1] + vs[n/2]) / 2
	}
	return &Spread{Median: median, Min: vs[0], Max: vs[n-1]}
}
