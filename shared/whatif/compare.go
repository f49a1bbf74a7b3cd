package whatif

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/wire"
)

// compare sets the steps' verdicts and the outcome from the simulated run
// against the record.
func (s *sim) compare(out wire.WhatIfExecution) (wire.WhatIfExecution, error) {
	mine := index(Record{Events: s.log})
	changed := false
	add := func(step, verdict, diff string) {
		out.Steps = append(out.Steps, wire.WhatIfStep{Step: step, Verdict: verdict, Diff: diff})
		if (verdict == wire.VerdictChanged || verdict == wire.VerdictNoRecord) && out.DivergesAt == "" {
			out.DivergesAt = wire.OptString(step)
		}
		changed = changed || verdict == wire.VerdictChanged
	}
	for _, step := range mine.order {
		if s.live != nil && step == s.live.step {
			add(step, wire.VerdictNoRecord, s.live.why)
			continue
		}
		if s.live != nil && len(mine.exits[step]) == 0 {
			continue // still running where the run stopped: unknown
		}
		if skippedOnly(mine.exits[step]) && skippedOnly(s.rc.exits[step]) && len(mine.exits[step]) > 0 {
			continue // a branch not taken, on both sides
		}
		diff, err := s.diffExits(mine.exits[step], s.rc.exits[step])
		if err != nil {
			return out, err
		}
		verdict := s.answered[step]
		if verdict == "" {
			verdict = wire.VerdictEngine // skipped, or failed before a command
		}
		if diff != "" {
			verdict = wire.VerdictChanged
		}
		add(step, verdict, diff)
	}
	if s.live != nil {
		out.Outcome = wire.OutcomeNeedsLive
		out.NeedsLiveAt = wire.OptString(s.live.step)
		if s.live.step == "" {
			out.Error = s.live.why
		}
		return out, nil
	}
	for _, step := range s.rc.order {
		if !skippedOnly(s.rc.exits[step]) && !slices.Contains(mine.order, step) {
			add(step, wire.VerdictChanged, "not reached by the new version (recorded: "+statuses(s.rc.exits[step])+")")
		}
	}
	status := s.snap.Status
	var result any
	if mine.final != nil {
		result = mine.final.Context["result"]
	}
	sameEnd := status == s.rec.Status
	if sameEnd && s.rc.final != nil && status == lifecycle.ExecutionCompleted {
		sameEnd = firstDiff("result", s.rc.final.Context["result"], result) == ""
	}
	switch {
	case !changed && sameEnd:
		out.Outcome = wire.OutcomeSame
	case status == lifecycle.ExecutionCompleted:
		out.Outcome = wire.OutcomeWouldComplete
	default:
		out.Outcome = wire.OutcomeWouldFail
		out.Error = s.snap.Error
		if out.Error == "" {
			out.Error = "the execution would end " + status
		}
	}
	if out.Outcome == wire.OutcomeWouldComplete {
		out.Result = redact.Value(result) // a same one's is the recorded result
	}
	return out, nil
}

// diffExits says how a step's visits under the new version differ from the
// recorded ones: "" when they do not.
func (s *sim) diffExits(mine, rec []exit) (string, error) {
	if skippedOnly(mine) && skippedOnly(rec) {
		return "", nil // not run on either side: the same path
	}
	if len(mine) != len(rec) {
		if len(rec) == 0 {
			return "not in the recorded run (now " + statuses(mine) + ")", nil
		}
		return fmt.Sprintf("visits: recorded %d (%s), now %d (%s)", len(rec), statuses(rec), len(mine), statuses(mine)), nil
	}
	for i := range mine {
		a, b := rec[i], mine[i]
		at := ""
		if len(mine) > 1 {
			at = fmt.Sprintf("visit %d: ", i+1)
		}
		if a.status != b.status {
			d := fmt.Sprintf("%sstatus: recorded %s, now %s", at, a.status, b.status)
			if b.err != "" {
				d += " (" + jsonx.Cut(b.err, 120) + ")"
			}
			return d, nil
		}
		if a.err != b.err {
			return fmt.Sprintf("%serror: recorded %q, now %q", at, jsonx.Cut(a.err, 80), jsonx.Cut(b.err, 80)), nil
		}
		if a.ref != nil && b.ref != nil && *a.ref == *b.ref && a.ref.Kind == engine.KindReference {
			continue // the same stored object
		}
		ra, err := s.value(a, true)
		if err != nil {
			return "", err
		}
		rb, err := s.value(b, false)
		if err != nil {
			return "", err
		}
		if d := firstDiff("result", ra, rb); d != "" {
			return at + d, nil
		}
	}
	return "", nil
}

// value is an exit's result, read when it is stored outside the log.
func (s *sim) value(x exit, recorded bool) (any, error) {
	if x.ref == nil {
		return x.result, nil
	}
	k := x.ref.Stored()
	if !recorded || k.Kind == engine.KindReference {
		if v, ok := s.values[k]; ok {
			return v, nil
		}
	}
	if s.r.Load == nil {
		return nil, fmt.Errorf("the record keeps %s outside its log and nothing reads it", k)
	}
	got, err := s.r.Load(s.ctx, s.rec.ExecutionID, []engine.ResultKey{k})
	if err != nil {
		return nil, err
	}
	v, ok := got[k]
	if !ok {
		return nil, fmt.Errorf("recorded %s is missing", k)
	}
	return v, nil
}

// skippedOnly: a step never run (absent, or only skipped).
func skippedOnly(xs []exit) bool {
	for _, x := range xs {
		if x.status != engine.StepSkipped {
			return false
		}
	}
	return true
}

func statuses(xs []exit) string {
	var out []string
	for _, x := range xs {
		out = append(out, x.status)
	}
	if len(out) == 0 {
		return "not reached"
	}
	return strings.Join(out, ", ")
}

// firstDiff names the first place two values differ ("" when equal), in
// key order, quoting both sides with secrets masked.
func firstDiff(path string, a, b any) string {
	if reflect.DeepEqual(a, b) {
		return "" // the common case, without sorting or encoding; an int64 and a float64 of one value compare below
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				return fmt.Sprintf("%s: added %s", join(path, k), quote(k, bv))
			case !bin:
				return fmt.Sprintf("%s: removed (was %s)", join(path, k), quote(k, av))
			}
			if d := firstDiff(join(path, k), av, bv); d != "" {
				return d
			}
		}
		return ""
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			if d := firstDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i]); d != "" {
				return d
			}
		}
		return ""
	}
	ja, _ := jsonx.Marshal(a)
	jb, _ := jsonx.Marshal(b)
	if string(ja) == string(jb) {
		return ""
	}
	last := path[strings.LastIndexAny(path, ".]")+1:]
	return fmt.Sprintf("%s: recorded %s, now %s", path, quote(last, a), quote(last, b))
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// quote is a value as a diff shows it: short, a secret's masked.
func quote(key string, v any) string {
	if redact.SecretKey(key) && v != nil {
		v = redact.Mask
	}
	return jsonx.Cut(string(jsonx.MustMarshal(redact.Value(v))), 80)
}
