// Package tmpl is the template engine (dsl.md §5, rulings group T). Strings hold
// `{{ expression }}` and `{% if %}`/`{% for %}` blocks in Jinja syntax, as NoETL
// playbooks write them. A Jinja front end (lexer, parser, AST) translates each template
// once, at Compile, into one expr-lang program; Render only runs that program.
//
// Values follow shared/jsonx: objects map[string]any, arrays []any, integral numbers
// int64, other numbers float64. A template that is exactly one `{{ expr }}` renders to
// the expression's native value; anything else renders to text, each expression in the
// R-T2 text form (Text).
//
// Semantics are Python's where Jinja inherits them: truthiness (R-T1), and/or returning
// an operand, // and % rounding toward negative infinity, / always a float, True == 1,
// chained comparisons. Choices where this package differs from Jinja, on purpose:
//   - undefined names and members are null, and access on null or a non-container is
//     null (R-T5); `default` replaces null too (dsl.md §5);
//   - text is the R-T2 form, not Python's str(): null is "", 2.0 is "2", maps are
//     compact JSON; `~`, `string`, `join` and tojson use it (tojson is compact, sorted,
//     not HTML-escaped);
//   - integers are int64: overflow is an error, not a big integer (R-T10);
//   - maps iterate in sorted key order (keys, values, items, for, first, sort, list);
//   - now() is the triggering event's time as RFC 3339 in UTC, with the fraction
//     trimmed (2024-05-06T05:08:09.123Z), so replays render the same text (R-T4);
//   - a trailing newline is kept, and `{# #}` is text: comments are not in the dialect;
//   - bool is the `when` rule (WhenTrue); round keeps integers integral;
//   - `quote`, which Jinja lacks, shell-escapes a value as Python's shlex.quote
//     does (ShellQuote), for values rendered into shell commands;
//   - a render budget (budget.go) stops runaway templates: every helper draws what
//     it builds from it, at most MaxRenderBytes (16 MiB) of text, MaxRenderElements
//     (1 000 000) list items and map entries and MaxLoopIterations (1 000 000) loop
//     iterations per render, and what helpers read from it, at most MaxRenderWork
//     (100 000 000) items visited, bytes scanned and loop-body calls (counts, not
//     a clock, so renders stay deterministic); passing a value on unchanged is
//     free. Nesting is limited to 200.
package tmpl
