package bench

import (
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Shape: "500x10", Rep: 1, StepsPerSecond: 900, StepCycleP50Ms: f(7), ServerCPUMsPerStep: f(0.6)},
		{Shape: "50x10", Rep: 1, StepsPerSecond: 800},
		{Shape: "500x10", Rep: 2, StepsPerSecond: 1100, StepCycleP50Ms: f(5)},
		{Shape: "50x10", Rep: 2, StepsPerSecond: 700},
		{Shape: "500x10", Rep: 3, StepsPerSecond: 1000, StepCycleP50Ms: f(6)},
	}
	want := []Summary{
		// Odd runs: the middle one; a figure only one run measured is its own spread.
		{Shape: "500x10", Runs: 3, StepsPerSecond: Spread{1000, 900, 1100}, StepCycleP50Ms: &Spread{6, 5, 7},
			ServerCPUMsPerStep: &Spread{0.6, 0.6, 0.6}},
		// Even runs: the mean of the middle two; unmeasured figures stay nil.
		{Shape: "50x10", Runs: 2, StepsPerSecond: Spread{750, 700, 800}},
	}
	if got := Summarize(rs); !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize:\n got %+v\nwant %+v", got, want)
	}
}

func TestRounds(t *testing.T) {
	a, b := Shape{W: 50, K: 10}, Shape{W: 1, K: 200}
	want := []measurement{{a, 1}, {b, 1}, {a, 2}, {b, 2}}
	if got := rounds([]Shape{a, b}, 2); !reflect.DeepEqual(got, want) {
		t.Errorf("rounds of two shapes, twice: %v, want %v", got, want)
	}
	if got := rounds([]Shape{a}, 0); !reflect.DeepEqual(got, []measurement{{a, 1}}) {
		t.Errorf("no reps given: %v, want one run", got)
	}
}
