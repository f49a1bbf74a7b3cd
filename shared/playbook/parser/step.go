package parser

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
)

// step reads one step. Its next block is returned unread, with the step's
// spec.next_mode, because arcs can only be checked once every step is known.
func (p *parser) step(n *yaml.Node, path string, idx int) (*playbook.Step, *yaml.Node, string) {
	es := p.fields(n, path, "a step")
	if es == nil {
		return nil, nil, ""
	}
	s := &playbook.Step{Index: idx, Path: path, OnError: playbook.OnErrorFail, MaxVisits: playbook.DefaultMaxVisits}
	var next, toolN, retryN, timeoutN, toolRetryN *yaml.Node
	var nextMode string
	for _, e := range es {
		if e.key == "step" {
			s.Name, _ = p.str(e.value, join(path, "step"), "step")
		}
	}
	if s.Name == "" {
		p.errf(n, join(path, "step"), "every step needs a name in `step:`")
		return nil, nil, ""
	}
	// NoETL accepts any step name (its regression playbooks name steps after the
	// playbook paths they run, and name a step error), so this server does too: such
	// a step is not a top-level template name, and templates reach it through steps,
	// e.g. {{ steps['a/b'].result }}. This supersedes R-T7/R-W7's refusal (issue 12).
	switch {
	case !playbook.ValidName(s.Name):
		p.warnf(n, join(path, "step"), "step name %q is not a template name: templates reach its result as {{ steps[%s].result }}", s.Name, quoteTemplate(s.Name))
	case playbook.Reserved(s.Name):
		p.warnf(n, join(path, "step"), "step name %q is also a template binding, which wins in templates: reach the step's result as {{ steps.%s.result }}", s.Name, s.Name)
	}
	inputKey := ""
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "step":
		case "desc", "description":
			s.Desc, _ = p.literal(e.value, fp, e.key)
		case "when":
			s.When = p.template(e.value, fp, "when")
		case "input", "args":
			if inputKey != "" {
				p.errf(e.keyN, fp, "give step input once: both %s and %s are set (args is an alias of input)", inputKey, e.key)
				continue
			}
			inputKey = e.key
			v := p.value(e.value, fp)
			if _, ok := v.(map[string]any); !ok && v != nil {
				p.errf(e.value, fp, "%s must be a mapping of names to values, got %s", e.key, kindName(resolve(e.value)))
				continue
			}
			s.Input = p.compile(e.value, fp, v)
		case "tool":
			toolN = e.value
		case "loop":
			s.Loop = p.loop(e.value, fp)
		case "set":
			s.Set = p.set(e.value, fp)
		case "next":
			next = e.value
		case "retry":
			retryN = e.value
		case "timeout", "timeout_seconds":
			if timeoutN != nil {
				p.errf(e.keyN, fp, "give the step timeout once (timeout_seconds is an alias of timeout)")
				continue
			}
			timeoutN = e.value
			if t, ok := p.integer(e.value, fp, "timeout (seconds)", 1); ok {
				s.Timeout = t
			}
		case "spec":
			for _, se := range p.fields(e.value, fp, "step spec") {
				sp := join(fp, se.key)
				switch se.key {
				case "next_mode":
					if m, ok := p.literal(se.value, sp, "spec.next_mode"); ok {
						if m != playbook.ModeExclusive && m != playbook.ModeInclusive {
							p.errf(se.value, sp, "spec.next_mode must be exclusive or inclusive, got %q", m)
						}
						nextMode = m
					}
				case "on_error":
					if m, ok := p.literal(se.value, sp, "spec.on_error"); ok {
						if m != playbook.OnErrorFail && m != playbook.OnErrorContinue {
							p.errf(se.value, sp, "spec.on_error must be fail or continue, got %q", m)
						}
						s.OnError = m
					}
				case "max_visits":
					if v, ok := p.integer(se.value, sp, "spec.max_visits", 1); ok {
						s.MaxVisits = v
					}
				case "policy":
					for _, pe := range p.fields(se.value, sp, "step spec.policy") {
						if pe.key != "admit" {
							p.warnf(pe.keyN, join(sp, pe.key), "unknown key %q in step spec.policy is ignored", pe.key)
							continue
						}
						s.Admit = p.admit(pe.value, join(sp, "admit"))
					}
				default:
					p.warnf(se.keyN, sp, "unknown key %q in step spec is ignored", se.key)
				}
			}
		case "case":
			p.legacyRouting(e, fp)
		default:
			p.warnf(e.keyN, fp, "unknown key %q in step %q is ignored", e.key, s.Name)
		}
	}
	if toolN == nil {
		p.errf(n, join(path, "tool"), "step %q has no tool; every step runs one (use kind: noop for a step that only routes) (R-W7)", s.Name)
	} else {
		toolRetryN = p.tools(toolN, join(path, "tool"), s)
	}
	switch {
	case retryN != nil && toolRetryN != nil:
		p.errf(toolRetryN, join(path, "tool.retry"), "retry is set both on the step and inside tool; keep one")
	case retryN != nil:
		s.Retry = p.retry(retryN, join(path, "retry"))
	case toolRetryN != nil:
		s.Retry = p.retry(toolRetryN, join(path, "tool.retry"))
	default:
		s.Retry = p.retry(nil, "")
	}
	if s.Timeout == 0 {
		s.Timeout = playbook.DefaultTimeout
		if s.Tool != nil {
			if t, ok := toolTimeout(s.Tool.Raw); ok {
				s.Timeout = t
			}
		}
	}
	return s, next, nextMode
}

// admit reads NoETL's step admission rules (spec.policy.admit, v10's replacement
// for step when): {mode: exclusive, rules: [{when, then: {allow}}, {else: {then:
// {allow}}}]}. They are the step's guard: the first rule whose when holds decides
// (an else always holds); allow: false skips the step as a false when does; when
// no rule matches the step is admitted.
func (p *parser) admit(n *yaml.Node, path string) []playbook.AdmitRule {
	var out []playbook.AdmitRule
	for _, e := range p.fields(n, path, "admit") {
		fp := join(path, e.key)
		switch e.key {
		case "mode":
			if m, ok := p.literal(e.value, fp, "admit mode"); ok && m != playbook.ModeExclusive {
				p.errf(e.value, fp, "admit mode must be exclusive (the first matching rule decides), got %q", m)
			}
		case "rules":
			rules := resolve(e.value)
			if rules.Kind != yaml.SequenceNode {
				p.errf(rules, fp, "admit rules must be a list, got %s", kindName(rules))
				continue
			}
			for i, r := range rules.Content {
				if rule, ok := p.admitRule(r, index(fp, i)); ok {
					out = append(out, rule)
				}
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in admit is ignored", e.key)
		}
	}
	return out
}

func (p *parser) admitRule(n *yaml.Node, path string) (playbook.AdmitRule, bool) {
	var when, then, els *yaml.Node
	for _, e := range p.fields(n, path, "an admit rule") {
		switch e.key {
		case "when":
			when = e.value
		case "then":
			then = e.value
		case "else":
			els = e.value
		default:
			p.warnf(e.keyN, join(path, e.key), "unknown key %q in an admit rule is ignored", e.key)
		}
	}
	var r playbook.AdmitRule
	thenPath := join(path, "then")
	switch {
	case els != nil && when == nil && then == nil && resolve(els).Kind == yaml.MappingNode:
		then, thenPath = findKey(p.fields(els, join(path, "else"), "else"), "then"), join(path, "else.then")
	case els != nil && when == nil && then != nil && resolve(els).ShortTag() == "!!null":
	case els == nil && when != nil && then != nil:
		r.When = p.template(when, join(path, "when"), "admit when")
	default:
		p.errf(n, path, "an admit rule is {when, then: {allow}} or {else: {then: {allow}}}")
		return r, false
	}
	if then == nil {
		p.errf(n, thenPath, "an admit rule needs then: {allow: true|false}")
		return r, false
	}
	for _, e := range p.fields(then, thenPath, "admit then") {
		if e.key != "allow" {
			p.warnf(e.keyN, join(thenPath, e.key), "unknown key %q in admit then is ignored", e.key)
			continue
		}
		b, ok := p.value(e.value, join(thenPath, "allow")).(bool)
		if !ok {
			p.errf(e.value, join(thenPath, "allow"), "allow must be true or false")
			return r, false
		}
		r.Allow = b
		return r, true
	}
	p.errf(then, thenPath, "an admit rule needs then: {allow: true|false}")
	return r, false
}

// set reads a step's or arc's set block (R-T9).
func (p *parser) set(n *yaml.Node, path string) []playbook.SetEntry {
	es := p.fields(n, path, "set")
	var out []playbook.SetEntry
	seen := map[string]string{}
	for _, e := range es {
		fp := join(path, e.key)
		key, err := playbook.ContextKey(e.key)
		valid := err == nil
		if err != nil {
			p.errf(e.keyN, fp, "set key %s", err)
		}
		if valid {
			for other, otherKey := range seen {
				if other == key || strings.HasPrefix(other, key+".") || strings.HasPrefix(key, other+".") {
					p.errf(e.keyN, fp, "set keys %q and %q write the same name %q (R-T9)", otherKey, e.key, key)
					valid = false
					break
				}
			}
		}
		if !valid {
			continue
		}
		seen[key] = e.key
		out = append(out, playbook.SetEntry{Key: e.key, Path: key, Value: p.compile(e.value, fp, p.value(e.value, fp))})
	}
	return out
}

func (p *parser) retry(n *yaml.Node, path string) playbook.Retry {
	r := playbook.Retry{MaxAttempts: 1, Delay: playbook.DefaultRetryDelay, Backoff: "fixed", MaxDelay: playbook.DefaultMaxDelay, On: []string{playbook.ClassError, playbook.ClassTimeout, playbook.ClassExpired}}
	if n == nil {
		return r
	}
	for _, e := range p.fields(n, path, "retry") {
		fp := join(path, e.key)
		switch e.key {
		case "max_attempts", "attempts":
			if v, ok := p.integer(e.value, fp, "retry.max_attempts", 1); ok {
				r.MaxAttempts = v
			}
		case "delay", "backoff_seconds":
			if v, ok := p.number(e.value, fp, "retry.delay (seconds)"); ok && v >= 0 {
				r.Delay = v
			} else if ok {
				p.errf(e.value, fp, "retry.delay must be ≥ 0 seconds")
			}
		case "backoff":
			b, _ := p.literal(e.value, fp, "retry.backoff")
			switch b {
			case "fixed", "linear", "exponential":
				r.Backoff = b
			case "none":
				r.Backoff = "fixed"
			default:
				p.errf(e.value, fp, "retry.backoff must be fixed, linear or exponential, got %q", b)
			}
		case "max_delay":
			if v, ok := p.number(e.value, fp, "retry.max_delay (seconds)"); ok && v >= 0 {
				r.MaxDelay = v
			}
		case "on", "retry_on":
			p.literalTree(e.value, fp, "retry."+e.key)
			v := p.value(e.value, fp)
			list, ok := v.([]any)
			if s, isStr := v.(string); isStr {
				list, ok = []any{s}, true
			}
			if !ok {
				p.errf(e.value, fp, "retry.on must be a list of error, timeout, expired")
				continue
			}
			r.On = nil
			for _, x := range list {
				c, _ := x.(string)
				if c != playbook.ClassError && c != playbook.ClassTimeout && c != playbook.ClassExpired {
					p.errf(e.value, fp, "retry.on entries must be error, timeout or expired, got %v", x)
					continue
				}
				r.On = append(r.On, c)
			}
		case "retry_on_status":
			p.literalTree(e.value, fp, "retry.retry_on_status")
			list, ok := p.value(e.value, fp).([]any)
			if !ok {
				p.errf(e.value, fp, "retry_on_status must be a list of HTTP status codes")
				continue
			}
			for _, x := range list {
				code, ok := x.(int64)
				if !ok || code < 100 || code > 599 {
					p.errf(e.value, fp, "retry_on_status entries must be HTTP status codes, got %v", x)
					continue
				}
				r.OnStatus = append(r.OnStatus, code)
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in retry is ignored", e.key)
		}
	}
	return r
}
