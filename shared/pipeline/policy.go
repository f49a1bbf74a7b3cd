package pipeline

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// This file owns the policy grammar (R-R6, R-W6) and the retry-delay rule (R-L6).
// The worker's pipeline reads rules with it when a step runs; the engine validates
// rules through CheckRule when a playbook is registered, and computes step retries
// with RetryDelaySeconds. A new policy action or action key is added here (and run
// in pipeline.go); the engine picks it up without an edit.

// Policy actions (R-R6).
const (
	DoContinue = "continue"
	DoRetry    = "retry"
	DoFail     = "fail"
	DoBreak    = "break"
	DoJump     = "jump"
)

// Defaults for a retry rule that leaves fields out. The rulings are silent; these match
// the step-level retry defaults of dsl.md §2 where there is one.
const (
	DefaultRetryAttempts = 3                 // total tries
	DefaultRetryDelay    = time.Second       // dsl.md §2 retry.delay default
	MaxRetryDelay        = 300 * time.Second // R-L6's max_delay default, applied to policy delays too
)

// Finding is one thing the policy grammar says about a rule. Path leads from the rule
// to the offending value, one element per key ("then", "attempts"); it is not joined
// here because set keys hold dots. A warning does not refuse the rule.
type Finding struct {
	Path    []string
	Message string
	Warning bool
}

// RuleCheck is what CheckRule found.
type RuleCheck struct {
	Findings []Finding
	// Action is the path of the rule's action: ["then"], ["else", "then"] or ["else"]
	// (the R-W6 shorthand); nil when the rule is refused before one is found.
	Action []string
}

// err is the first error, its path joined the way the pipeline's messages read
// ("then: attempts: expected …").
func (c RuleCheck) err() error {
	for _, f := range c.Findings {
		if !f.Warning {
			if len(f.Path) == 0 {
				return fmt.Errorf("%s", f.Message)
			}
			return fmt.Errorf("%s: %s", strings.Join(f.Path, ": "), f.Message)
		}
	}
	return nil
}

func (c *RuleCheck) errf(path []string, format string, args ...any) {
	c.Findings = append(c.Findings, Finding{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *RuleCheck) warnf(path []string, format string, args ...any) {
	c.Findings = append(c.Findings, Finding{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
}

// CheckRule validates one policy rule, a value in the jsonx convention, exactly as the
// pipeline will read it when the step runs. Templates (when, set values) are not
// checked here: the engine compiles them at register, the pipeline renders them at
// run time.
func CheckRule(v any) RuleCheck {
	_, c := parseRule(v)
	return c
}

// ruleKeys and actionKeys are the keys the grammar reads; others draw a warning.
var (
	ruleKeys   = []string{"when", "then", "else"}
	actionKeys = []string{"do", "set", "attempts", "delay", "backoff", "to"}
)

// parseRule reads {when, then}, {else: {then}}, {else: null, then} or the R-W6
// shorthand {else: {do, set}}.
func parseRule(v any) (rule, RuleCheck) {
	var c RuleCheck
	m, ok := v.(map[string]any)
	if !ok {
		c.errf(nil, "expected an object {when, then} or {else}, got %s", jsonx.TypeName(v))
		return rule{}, c
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(ruleKeys, k) {
			c.warnf([]string{k}, "unknown key %q in a policy rule is ignored", k)
		}
	}
	var r rule
	var then any
	elseV, hasElse := m["else"]
	when, hasWhen := m["when"]
	thenV, hasThen := m["then"]
	switch {
	case hasElse && elseV == nil && hasThen && !hasWhen:
		// `- else:` with `then:` beside it: the same rule as {else: {then: …}}
		// (NoETL's v10 example writes it so).
		r.always, then, c.Action = true, thenV, []string{"then"}
	case hasElse && (hasWhen || hasThen):
		c.errf(nil, "else cannot be combined with when/then in one rule")
		return rule{}, c
	case hasElse:
		r.always = true
		em, ok := elseV.(map[string]any)
		if !ok {
			c.errf([]string{"else"}, "expected an object, got %s", jsonx.TypeName(elseV))
			return rule{}, c
		}
		if t, ok := em["then"]; ok {
			if len(em) != 1 {
				c.errf([]string{"else"}, "give either {then: …} or the shorthand {do, set, …}, not both")
				return rule{}, c
			}
			then, c.Action = t, []string{"else", "then"}
		} else {
			then, c.Action = em, []string{"else"} // R-W6 shorthand
		}
	case hasThen:
		// then without when always matches: the worker has run such rules so since
		// its first release and NoETL's servers may send them, so refusing would break
		// running playbooks. R-R6 has no such form, though, and a forgotten when fires
		// on every outcome: the engine registers it with this warning.
		r.when, r.always, then, c.Action = when, !hasWhen, thenV, []string{"then"}
		if !hasWhen {
			c.warnf(nil, "a rule with then and no when always matches; write it as else: {then: …} if that is meant, or add when")
		}
	default:
		c.errf(nil, "a rule needs then (with when) or else")
		return rule{}, c
	}
	r.action = parseAction(then, c.Action, &c)
	return r, c
}

func parseAction(v any, path []string, c *RuleCheck) action {
	at := func(k string) []string { return append(append([]string(nil), path...), k) }
	m, ok := v.(map[string]any)
	if !ok {
		c.errf(path, "expected an object {do, …}, got %s", jsonx.TypeName(v))
		return action{}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(actionKeys, k) {
			c.warnf(at(k), "unknown key %q in a policy action is ignored", k)
		}
	}
	a := action{do: DoContinue, attempts: DefaultRetryAttempts, delay: DefaultRetryDelay, backoff: "none"}
	switch d := m["do"].(type) {
	case nil:
		// A rule that only sets values lets the item go on; one that neither acts nor
		// sets is a mistake, not a no-op.
		if m["set"] == nil {
			c.errf(path, "a policy action needs do (continue, retry, fail, break or jump) or set")
		}
	case string:
		switch d {
		case DoContinue, DoRetry, DoFail, DoBreak, DoJump:
			a.do = d
		default:
			c.errf(at("do"), "unknown action %q (want continue, retry, fail, break or jump)", d)
		}
	default:
		c.errf(at("do"), "expected a string, got %s", jsonx.TypeName(d))
	}
	if s, ok := m["set"]; ok && s != nil {
		sm, ok := s.(map[string]any)
		if !ok {
			c.errf(at("set"), "expected an object, got %s", jsonx.TypeName(s))
		} else {
			var err error
			if a.set, err = parseSet(sm); err != nil {
				c.errf(at("set"), "%s", err)
			}
		}
	}
	if v, ok := m["attempts"]; ok && v != nil {
		n, ok := jsonx.Whole(v)
		if !ok || n < 1 {
			c.errf(at("attempts"), "expected a whole number ≥ 1 (total tries), got %s", show(v))
		}
		a.attempts = int(min(max(n, 1), math.MaxInt32))
	}
	if v, ok := m["delay"]; ok && v != nil {
		f, ok := number(v)
		if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			c.errf(at("delay"), "expected seconds ≥ 0, got %s", show(v))
		} else {
			a.delay = seconds(f)
		}
	}
	if v, ok := m["backoff"]; ok && v != nil {
		s, _ := v.(string)
		switch s {
		case "none", "fixed":
			a.backoff = "none"
		case "linear", "exponential":
			a.backoff = s
		default:
			c.errf(at("backoff"), "expected none, linear or exponential, got %s", show(v))
		}
	}
	if a.do == DoJump {
		to, ok := m["to"].(string)
		if !ok || to == "" {
			c.errf(at("do"), "jump needs to: <item label>, got %s", describe(m["to"]))
		}
		a.to = to
	}
	return a
}

// seconds converts, capped at MaxRetryDelay so large values cannot overflow.
func seconds(f float64) time.Duration {
	if f >= MaxRetryDelay.Seconds() {
		return MaxRetryDelay
	}
	return time.Duration(f * float64(time.Second))
}

// RetryDelaySeconds is the wait before retry k (k ≥ 1, the k-th re-run), for step
// retries (R-L6) and policy retries alike: backoff linear gives delay·k, exponential
// delay·2^(k−1), anything else (fixed, none) delay; the result is capped at maxDelay.
func RetryDelaySeconds(delay float64, backoff string, k int, maxDelay float64) float64 {
	switch backoff {
	case "linear":
		delay *= float64(k)
	case "exponential":
		delay *= float64(uint64(1) << min(max(k-1, 0), 62))
	}
	return min(delay, maxDelay)
}

// retryDelay is a policy action's wait before its k-th retry.
func retryDelay(a action, k int) time.Duration {
	return seconds(RetryDelaySeconds(a.delay.Seconds(), a.backoff, k, MaxRetryDelay.Seconds()))
}

// ruleOutput is `output` inside policy rules (R-R6, R-W6): {status, data, error:
// {message, kind, status, retryable} | null, http: {status}}, and response, the
// data again (NoETL's name for a tool's output, which its playbooks read).
// For an http tool, data also reads the parsed body's members (httpBodyView).
func ruleOutput(env toolresult.Envelope, httpStatus int) map[string]any {
	var hs any
	data := env.Data
	if httpStatus != 0 {
		hs = int64(httpStatus)
		data = httpBodyView(data)
	}
	var errMap any
	if env.Error != nil {
		errMap = env.Error.Map()
	}
	return map[string]any{"status": env.Status, "data": data, "response": data, "error": errMap, "http": map[string]any{"status": hs}}
}

// httpBodyView is an http answer ({status_code, headers, body, data, url,
// elapsed}) as policy rules read it: the answer's members, plus each member of a
// JSON object body the answer does not have itself. NoETL's playbooks read both
// `output.data.data` (the body, as the answer's `data`) and `output.data.meta` or
// `output.data.entry` (members of the body: test_fetch_load); the answer's own
// members win. A shallow copy: the body's values are shared, not copied.
func httpBodyView(data any) any {
	answer, ok := data.(map[string]any)
	if !ok {
		return data
	}
	body, ok := answer["body"].(map[string]any)
	if !ok {
		return data
	}
	view := make(map[string]any, len(answer)+len(body))
	maps.Copy(view, body)
	maps.Copy(view, answer)
	return view
}
