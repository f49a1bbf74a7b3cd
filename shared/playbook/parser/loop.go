package parser

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// iterBindings are the names every loop iteration binds besides its iterator.
var iterBindings = map[string]bool{"iter": true, "_index": true, "_total": true}

func (p *parser) loop(n *yaml.Node, path string) *playbook.Loop {
	l := &playbook.Loop{Mode: playbook.ModeSequential, MaxInFlight: playbook.DefaultMaxInFlight}
	es := p.fields(n, path, "loop")
	inSet, limitSet, modeSet := false, false, false
	var frame, cursor entry
	// mode and max_in_flight are read at the loop's level and under spec
	// (where NoETL puts them).
	setting := func(e entry, fp string) {
		if e.key == "mode" {
			l.Mode, modeSet = p.loopMode(e.value, fp), true
			return
		}
		p.maxInFlight(e.value, fp, l)
		limitSet = true
	}
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "in", "collection", "items":
			if inSet {
				p.errf(e.keyN, fp, "give the loop collection once (in)")
				continue
			}
			inSet = true
			if e.key != "in" {
				p.warnf(e.keyN, fp, "%s is read as loop.in", e.key)
			}
			// A template string or a literal list/map: both render through tmpl.Value.
			l.In = p.compile(e.value, fp, p.value(e.value, fp))
		case "iterator", "element":
			if e.key == "element" {
				p.warnf(e.keyN, fp, "element is read as loop.iterator")
			}
			if it, ok := p.literal(e.value, fp, "loop.iterator"); ok {
				// Each iteration binds iter, _index and _total itself, so those would be
				// ambiguous. Other binding names are accepted, as NoETL accepts them
				// (iterator: playbook_path): inside the loop the iterator wins.
				switch {
				case !playbook.ValidName(it) || iterBindings[it]:
					p.errf(e.value, fp, "loop.iterator %q must be a name ([A-Za-z_][A-Za-z0-9_]*) other than iter, _index and _total, which every iteration binds", it)
				case playbook.Reserved(it):
					p.warnf(e.value, fp, "loop.iterator %q hides the template binding of the same name inside this loop's templates", it)
				}
				l.Iterator = it
			}
		case "mode", "max_in_flight":
			setting(e, fp)
		case "spec":
			for _, se := range p.fields(e.value, fp, "loop spec") {
				sp := join(fp, se.key)
				switch se.key {
				case "mode", "max_in_flight":
					setting(se, sp)
				case "frame":
					frame = se
				case "policy":
					// NoETL's placement hint ({exec: local|distributed}); every
					// iteration here is a command any worker of the pool may claim.
				default:
					p.warnf(se.keyN, sp, "unknown key %q in loop spec is ignored", se.key)
				}
			}
		case "cursor":
			cursor = e
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop is ignored", e.key)
		}
	}
	switch {
	case cursor.keyN != nil:
		fp := join(path, "cursor")
		if inSet {
			p.errf(cursor.keyN, fp, "give the loop either in (a collection) or cursor (rows claimed while it runs), not both")
		}
		if modeSet && l.Mode != playbook.ModeCursor {
			p.errf(cursor.keyN, fp, "loop.cursor needs spec.mode: cursor (the loop's mode is %s)", l.Mode)
		}
		l.Mode = playbook.ModeCursor
		if !limitSet {
			l.MaxInFlight = playbook.DefaultCursorInFlight
		}
		l.Cursor = p.cursor(cursor.value, fp, l)
		p.frame(frame, join(path, "spec.frame"), l)
	case l.Mode == playbook.ModeCursor:
		p.errf(n, join(path, "cursor"), "loop.spec.mode cursor needs loop.cursor: the kind, auth and claim statement the rows come from")
	case frame.keyN != nil:
		p.warnf(frame.keyN, join(path, "spec.frame"), "loop.spec.frame only applies to cursor loops and is ignored")
	}
	if l.Cursor == nil && l.Mode != playbook.ModeCursor && !inSet {
		p.errf(n, join(path, "in"), "loop needs in: the collection to iterate (a template or a list), or cursor: the rows to claim")
	}
	if l.Iterator == "" {
		p.errf(n, join(path, "iterator"), "loop needs iterator: the name each item is bound to")
	}
	return l
}

// cursorKinds are the databases a cursor's claim runs against here: the claim is
// a command of that tool kind.
var cursorKinds = []string{"postgres"}

// cursor reads loop.cursor {kind, auth, claim, options}. A kind NoETL has that
// this project does not claim from (mysql, snowflake, redis, nats_stream, …)
// registers with a warning and fails when dispatched (R-N1).
func (p *parser) cursor(n *yaml.Node, path string, l *playbook.Loop) *playbook.Cursor {
	c := &playbook.Cursor{}
	es := p.fields(n, path, "loop.cursor")
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "kind":
			if k, ok := p.literal(e.value, fp, "loop.cursor.kind"); ok {
				c.Kind = k
			}
		case "auth", "credential":
			c.Auth = p.template(e.value, fp, "loop.cursor.auth")
		case "claim":
			c.Claim = p.template(e.value, fp, "loop.cursor.claim")
		case "options":
			if m, ok := p.value(e.value, fp).(map[string]any); ok {
				c.Options = m
			} else {
				p.errf(e.value, fp, "loop.cursor.options must be a mapping")
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop.cursor is ignored", e.key)
		}
	}
	switch {
	case c.Kind == "":
		p.errf(n, join(path, "kind"), "loop.cursor needs kind: the database the claim runs against (%s)", strings.Join(cursorKinds, ", "))
	case !slices.Contains(cursorKinds, c.Kind):
		l.Unsupported = fmt.Sprintf("cursor loops over %s are not supported by this server (claims run against %s, R-N1)", c.Kind, strings.Join(cursorKinds, ", "))
		p.warnf(n, join(path, "kind"), "cursor kind %s is not supported by this server; the step will fail when dispatched (R-N1)", c.Kind)
	}
	if c.Claim == nil {
		p.errf(n, join(path, "claim"), "loop.cursor needs claim: a statement that marks rows as taken and returns them (UPDATE … RETURNING)")
	}
	if c.Auth == nil {
		p.errf(n, join(path, "auth"), "loop.cursor needs auth: the credential alias of the database the claim runs against")
	}
	return c
}

// frame reads a cursor loop's spec.frame: max_rows (the rows one claim asks
// for), process (row: an iteration per row; frame: one per claim) and
// row_concurrency (multiplies max_in_flight, as NoETL runs that many rows of a
// slot's frame at once). NoETL's frame lease, heartbeat and size knobs are
// accepted: here every iteration is a command under the server's lease.
func (p *parser) frame(fe entry, path string, l *playbook.Loop) {
	if fe.keyN == nil {
		return
	}
	for _, e := range p.fields(fe.value, path, "loop.spec.frame") {
		fp := join(path, e.key)
		switch e.key {
		case "max_rows":
			if v, ok := p.integer(e.value, fp, "loop.spec.frame.max_rows", 1); ok {
				l.Cursor.Batch = v
			}
		case "process":
			if v, ok := p.literal(e.value, fp, "loop.spec.frame.process"); ok {
				switch v {
				case "row":
				case "frame":
					l.Cursor.PerFrame = true
				default:
					p.errf(e.value, fp, "loop.spec.frame.process must be row or frame, got %q", v)
				}
			}
		case "row_concurrency":
			if v, ok := p.integer(e.value, fp, "loop.spec.frame.row_concurrency", 1); ok {
				// The loop keeps max_in_flight × row_concurrency commands in flight;
				// a templated max_in_flight renders to at least 1.
				inFlight := v
				if l.MaxInFlightT == nil {
					inFlight = v * l.MaxInFlight
				}
				if inFlight > playbook.MaxLoopInFlight {
					p.errf(e.value, fp, "%s", playbook.InFlightError("loop max_in_flight × loop.spec.frame.row_concurrency", inFlight))
					continue
				}
				l.Cursor.RowConcurrency = v
			}
		case "max_seconds", "max_bytes", "lease_seconds", "heartbeat_seconds", "verify_ipc", "retry_mode", "max_attempts":
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop.spec.frame is ignored", e.key)
		}
	}
}

// maxInFlight reads a parallel loop's limit: a whole number, or a template
// rendered when the loop starts (NoETL playbooks take it from the workload).
func (p *parser) maxInFlight(n *yaml.Node, path string, l *playbook.Loop) {
	if v := resolve(n); v.Kind == yaml.ScalarNode && tmpl.HasTemplate(v.Value) {
		l.MaxInFlightT = p.template(n, path, "loop max_in_flight")
		return
	}
	if v, ok := p.integer(n, path, "loop max_in_flight", 1); ok {
		if v > playbook.MaxLoopInFlight {
			p.errf(n, path, "%s", playbook.InFlightError("loop max_in_flight", v))
			return
		}
		l.MaxInFlight = v
	}
}

func (p *parser) loopMode(n *yaml.Node, path string) string {
	m, ok := p.literal(n, path, "loop mode")
	switch {
	case !ok || m == "":
		return playbook.ModeSequential
	case m != playbook.ModeSequential && m != playbook.ModeParallel && m != playbook.ModeCursor:
		p.errf(n, path, "loop mode must be sequential, parallel or cursor, got %q", m)
		return playbook.ModeSequential
	}
	return m
}
