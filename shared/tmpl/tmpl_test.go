package tmpl

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2024, 5, 6, 7, 8, 9, 123000000, time.FixedZone("X", 2*3600))

func testVars() map[string]any {
	return map[string]any{
		"n":     int64(7),
		"neg":   int64(-7),
		"f":     2.5,
		"z":     int64(0),
		"t":     true,
		"no":    false,
		"nul":   nil,
		"s":     "Hello World",
		"e":     "",
		"num":   "00123",
		"csv":   "a,b,c",
		"xs":    []any{int64(3), int64(1), int64(2)},
		"empty": []any{},
		"strs":  []any{"b", "A", "c"},
		"m": map[string]any{
			"b": int64(2), "a": int64(1), "nul": nil, "list": []any{int64(10), int64(20)},
			"in": map[string]any{"x": "deep"}, "1": "one",
		},
		"emptym": map[string]any{},
		"users": []any{
			map[string]any{"name": "ann", "age": int64(30), "tags": []any{"x"}},
			map[string]any{"name": "Bob", "age": int64(25), "tags": []any{}},
		},
		"big":  int64(9007199254740993),
		"json": `{"a": [1, 2.5, "x"], "b": null}`,
		"html": "<a&b>",
		"nil":  "kw-nil",
		"let":  "kw-let",
		"_get": "underscore",
	}
}

func testEnv() Env { return Env{Vars: testVars(), Now: testNow} }

func render(t *testing.T, src string) (any, error) {
	t.Helper()
	tp, err := Compile(src)
	if err != nil {
		return nil, err
	}
	return tp.Render(testEnv())
}

type renderCase struct {
	name string
	src  string
	want any
}

func runCases(t *testing.T, cases []renderCase) {
	t.Helper()
	for _, c := range cases {
		name := c.name
		if name == "" {
			name = c.src
		}
		t.Run(name, func(t *testing.T) {
			got, err := render(t, c.src)
			if err != nil {
				t.Fatalf("%q: %v", c.src, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q = %#v (%T), want %#v (%T)", c.src, got, got, c.want, c.want)
			}
		})
	}
}

type errCase struct {
	src       string
	msg       string // substring of Error()
	line, col int
}

func checkErr(t *testing.T, c errCase, err error) {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("%q: want *Error, got %T %v", c.src, err, err)
	}
	s := te.Error()
	if !strings.Contains(s, c.msg) {
		t.Errorf("%q: error %q does not contain %q", c.src, s, c.msg)
	}
	if !strings.Contains(s, strconv.Quote(te.Template)) && len(te.Template) <= maxQuoted {
		t.Errorf("%q: error %q does not quote the template", c.src, s)
	}
	if te.Template != c.src {
		t.Errorf("%q: Template = %q", c.src, te.Template)
	}
	if te.Line != c.line || te.Column != c.col {
		t.Errorf("%q: at %d:%d, want %d:%d (%s)", c.src, te.Line, te.Column, c.line, c.col, s)
	}
	if want := fmt.Sprintf(" at %d:%d: ", c.line, c.col); !strings.Contains(s, want) {
		t.Errorf("%q: error %q does not name line:col", c.src, s)
	}
}

func TestLiteralAndNative(t *testing.T) {
	for _, c := range []struct {
		src             string
		literal, native bool
	}{
		{"plain text", true, false},
		{"00123", true, false},
		{"a }} b { c }", true, false}, // R-W7
		{"{{ n }}", false, true},
		{"  {{ n }}\n", false, true},
		{"{{- n -}}", false, true},
		{"x{{ n }}", false, false},
		{"{{ n }}{{ n }}", false, false},
		{"{% if t %}{{ n }}{% endif %}", false, false}, // R-T11: blocks are never native
	} {
		tp, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		if tp.IsLiteral() != c.literal || tp.IsNative() != c.native {
			t.Errorf("%q: literal=%v native=%v, want %v %v", c.src, tp.IsLiteral(), tp.IsNative(), c.literal, c.native)
		}
		if tp.Source() != c.src {
			t.Errorf("Source() = %q", tp.Source())
		}
	}
}

func TestNativeRendering(t *testing.T) {
	runCases(t, []renderCase{
		{"int stays int64", "{{ n }}", int64(7)},
		{"padded", "  {{ n }}  ", int64(7)},
		{"float", "{{ f }}", 2.5},
		{"bool", "{{ t }}", true},
		{"null", "{{ nul }}", nil},
		{"undefined is null", "{{ missing }}", nil},
		{"string", "{{ s }}", "Hello World"},
		{"literal string not coerced", "{{ num }}", "00123"},
		{"map", "{{ m.in }}", map[string]any{"x": "deep"}},
		{"list", "{{ xs }}", []any{int64(3), int64(1), int64(2)}},
		{"big id survives (R-T10)", "{{ big }}", int64(9007199254740993)},
		{"list literal", "{{ [1, 'a', none, 2.5, true] }}", []any{int64(1), "a", nil, 2.5, true}},
		{"empty list", "{{ [] }}", []any{}},
		{"tuple becomes list", "{{ (1, 2) }}", []any{int64(1), int64(2)}},
		{"one-tuple", "{{ (1,) }}", []any{int64(1)}},
		{"map literal", "{{ {'a': 1, 'b': [n]} }}", map[string]any{"a": int64(1), "b": []any{int64(7)}}},
		{"map literal computed key", "{{ {s: 1, 2: 3} }}", map[string]any{"Hello World": int64(1), "2": int64(3)}},
		{"empty map", "{{ {} }}", map[string]any{}},
		{"trailing commas", "{{ [1, 2,] }}", []any{int64(1), int64(2)}},
		{"True", "{{ True }}", true},
		{"False", "{{ False }}", false},
		{"None", "{{ None }}", nil},
		{"none", "{{ none }}", nil},
		{"true", "{{ true }}", true},
		{"false", "{{ false }}", false},
		{"null literal", "{{ null }}", nil},
		{"negative int", "{{ -5 }}", int64(-5)},
		{"float literal", "{{ 1.5e3 }}", 1500.0},
		{"exponent", "{{ 1e3 }}", 1000.0},
		{"hex", "{{ 0x1F }}", int64(31)},
		{"octal", "{{ 0o17 }}", int64(15)},
		{"binary", "{{ 0b101 }}", int64(5)},
		{"underscores", "{{ 1_000 }}", int64(1000)},
		{"single quotes", `{{ 'it\'s' }}`, "it's"},
		{"double quotes", `{{ "say \"hi\"" }}`, `say "hi"`},
		{"escapes", `{{ "a\tb\nc\\d\x41\u00e9\U0001F600\101" }}`, "a\tb\nc\\dAé😀A"},
		{"unknown escape kept", `{{ '\d+' }}`, `\d+`},
		{"adjacent strings", `{{ 'a' "b" }}`, "ab"},
		{"braces in strings", `{{ '}}' ~ "{%" }}`, "}}{%"},
		{"nested map literal closing braces", "{{ {'a': {'b': 1}} }}", map[string]any{"a": map[string]any{"b": int64(1)}}},
		{"names that are expr keywords", "{{ [nil, let] }}", []any{"kw-nil", "kw-let"}},
		{"undefined names that are expr words", "{{ [matches, contains, startsWith, endsWith, map, len, all, env] }}",
			[]any{nil, nil, nil, nil, nil, nil, nil, nil}},
		{"underscore name", "{{ _get }}", "underscore"},
		{"filtered native", "{{ xs|sort }}", []any{int64(1), int64(2), int64(3)}},
		{"multiline expression", "{{\n  n\n  + 1\n}}", int64(8)},
	})
}

func TestTextRendering(t *testing.T) {
	runCases(t, []renderCase{
		{"R-T2 null is empty", "[{{ nul }}]", "[]"},
		{"R-T2 undefined is empty", "[{{ missing.x }}]", "[]"},
		{"R-T2 int", "n={{ n }}", "n=7"},
		{"R-T2 integral float has no .0", "{{ 4 / 2 }}!", "2!"},
		{"R-T2 float shortest", "{{ f }}!", "2.5!"},
		{"R-T2 small float", "{{ 0.0000001 }}!", "1e-7!"},
		{"R-T2 bool", "{{ t }}/{{ no }}", "true/false"},
		{"R-T2 map compact sorted JSON", "{{ m.in }} {{ {'b': 1, 'a': [1, 'x']} }}", `{"x":"deep"} {"a":[1,"x"],"b":1}`},
		{"R-T2 no HTML escaping", "x{{ [html] }}", `x["<a&b>"]`},
		{"R-T2 big int", "id {{ big }}", "id 9007199254740993"},
		{"string stays", "v={{ num }}", "v=00123"},
		{"two parts", "{{ n }}{{ n }}", "77"},
		{"literal braces around", "{ {{ n }} }", "{ 7 }"},
		{"R-W7 literal }} in text", "a }} {{ n }} }}", "a }} 7 }}"},
		{"R-W7 single braces", "{\"k\": {{ n }}}", `{"k": 7}`},
		{"comment syntax is text", "{# c #}{{ n }}", "{# c #}7"},
		{"whitespace control", "a  {{- n -}}  b", "a7b"},
		{"whitespace control left only", "a  {{- n }}  b", "a7  b"},
		{"whitespace control newlines", "a\n\n{%- if t -%}\n x \n{%- endif -%}\n\nb", "axb"},
		{"trailing newline kept", "{{ n }}\nnext\n", "7\nnext\n"},
		{"unicode text", "héllo {{ s }} ✓", "héllo Hello World ✓"},
	})
}

func TestOperators(t *testing.T) {
	runCases(t, []renderCase{
		{"add int", "{{ n + 1 }}", int64(8)},
		{"add float", "{{ n + 0.5 }}", 7.5},
		{"add strings", "{{ 'a' + 'b' }}", "ab"},
		{"add lists", "{{ [1] + [2] }}", []any{int64(1), int64(2)}},
		{"add bools like Python", "{{ true + 1 }}", int64(2)},
		{"sub", "{{ n - 10 }}", int64(-3)},
		{"sub float", "{{ f - 0.5 }}", 2.0},
		{"mul", "{{ n * 3 }}", int64(21)},
		{"mul float", "{{ f * 2 }}", 5.0},
		{"string repeat", "{{ 'ab' * 3 }}", "ababab"},
		{"string repeat reversed", "{{ 2 * 'ab' }}", "abab"},
		{"list repeat", "{{ [1] * 2 }}", []any{int64(1), int64(1)}},
		{"repeat negative", "{{ 'ab' * -1 }}", ""},
		{"true division is float", "{{ 7 / 2 }}", 3.5},
		{"true division integral", "{{ 6 / 3 }}", 2.0},
		{"floor div", "{{ 7 // 2 }}", int64(3)},
		{"floor div negative", "{{ -7 // 2 }}", int64(-4)},
		{"floor div negative divisor", "{{ 7 // -2 }}", int64(-4)},
		{"floor div float", "{{ 7.5 // 2 }}", 3.0},
		{"mod", "{{ 7 % 3 }}", int64(1)},
		{"mod negative dividend", "{{ -7 % 3 }}", int64(2)},
		{"mod negative divisor", "{{ 7 % -3 }}", int64(-2)},
		{"mod float", "{{ -7.5 % 2 }}", 0.5},
		{"pow", "{{ 2 ** 10 }}", int64(1024)},
		{"pow left-assoc like Jinja", "{{ 2 ** 3 ** 2 }}", int64(64)},
		{"pow negative exponent", "{{ 2 ** -1 }}", 0.5},
		{"pow float", "{{ 4 ** 0.5 }}", 2.0},
		{"precedence", "{{ 1 + 2 * 3 }}", int64(7)},
		{"parens", "{{ (1 + 2) * 3 }}", int64(9)},
		{"unary minus", "{{ -n }}", int64(-7)},
		{"unary plus", "{{ +n }}", int64(7)},
		{"unary plus float", "{{ +f }}", 2.5},
		{"unary minus float", "{{ -f }}", -2.5},
		{"unary minus bool", "{{ -true }}", int64(-1)},
		{"float above int", "{{ 1.5 > 1 }}", true},
		{"huge float below int", "{{ -1e300 < n }}", true},
		{"huge float above int", "{{ 1e300 > big }}", true},
		{"float equal int ordering", "{{ 7.0 <= n }}", true},
		{"unary minus binds before filter", "{{ -n|abs }}", int64(7)},
		{"concat", "{{ 'a' ~ n ~ nul ~ t }}", "a7true"},
		{"concat float", "{{ f ~ '' }}", "2.5"},
		{"concat map", "{{ 'm:' ~ m.in }}", `m:{"x":"deep"}`},
		{"eq", "{{ n == 7 }}", true},
		{"eq int float", "{{ 1 == 1.0 }}", true},
		{"eq big int vs float is exact", "{{ big == 9007199254740992.0 }}", false},
		{"eq lists", "{{ [1, 2] == [1, 2.0] }}", true},
		{"eq maps", "{{ {'a': 1} == {'a': 1} }}", true},
		{"eq different types", "{{ '1' == 1 }}", false},
		{"eq null", "{{ nul == none }}", true},
		{"undefined eq none", "{{ missing == none }}", true},
		{"eq bool and int like Python", "{{ true == 1 }}", true},
		{"eq bool and string", "{{ true == 'true' }}", false},
		{"ne", "{{ n != 7 }}", false},
		{"lt", "{{ 1 < 2 }}", true},
		{"lt int float", "{{ 1 < 1.5 }}", true},
		{"le", "{{ 2 <= 2 }}", true},
		{"gt", "{{ 'b' > 'a' }}", true},
		{"ge", "{{ 2.0 >= 2 }}", true},
		{"list compare", "{{ [1, 2] < [1, 3] }}", true},
		{"chained", "{{ 1 < n < 10 }}", true},
		{"chained false", "{{ 1 < n < 5 }}", false},
		{"chained three", "{{ 1 < 2 <= 2 < 3 }}", true},
		{"in list", "{{ 2 in xs }}", true},
		{"in list R-A9 integral float", "{{ 2.0 in xs }}", true},
		{"in map", "{{ 'a' in m }}", true},
		{"in map numeric key", "{{ 1 in m }}", true},
		{"in string", "{{ 'World' in s }}", true},
		{"not in", "{{ 5 not in xs }}", true},
		{"in undefined", "{{ 1 in missing }}", false},
		{"and returns operand", "{{ n and s }}", "Hello World"},
		{"and returns falsy operand", "{{ z and s }}", int64(0)},
		{"or returns operand", "{{ e or 'dflt' }}", "dflt"},
		{"or returns first truthy", "{{ n or 'dflt' }}", int64(7)},
		{"or short-circuits", "{{ n or (1 / 0) }}", int64(7)},
		{"and short-circuits", "{{ z and (1 / 0) }}", int64(0)},
		{"not", "{{ not e }}", true},
		{"not not", "{{ not not n }}", true},
		{"not binds looser than compare", "{{ not n == 7 }}", false},
		{"not in and", "{{ not z and n }}", int64(7)},
		{"if else", "{{ 'y' if t else 'n' }}", "y"},
		{"if else false", "{{ 'y' if e else 'n' }}", "n"},
		{"if without else", "{{ 'y' if no }}", nil},
		{"nested conditional", "{{ 'a' if no else 'b' if t else 'c' }}", "b"},
		{"conditional lazy", "{{ 1 if t else 1 / 0 }}", int64(1)},
		{"attr", "{{ m.a }}", int64(1)},
		{"item", "{{ m['b'] }}", int64(2)},
		{"deep", "{{ m.in.x }}", "deep"},
		{"index", "{{ xs[0] }}", int64(3)},
		{"negative index", "{{ xs[-1] }}", int64(2)},
		{"dotted index", "{{ m.list.1 }}", int64(20)},
		{"index out of range is null", "{{ xs[10] }}", nil},
		{"dynamic key", "{{ m[ 'a' if t else 'b' ] }}", int64(1)},
		{"numeric key on map", "{{ m[1] }}", "one"},
		{"string index", "{{ s[0] }}", "H"},
		{"slice", "{{ xs[1:] }}", []any{int64(1), int64(2)}},
		{"slice to", "{{ xs[:2] }}", []any{int64(3), int64(1)}},
		{"slice step", "{{ [0,1,2,3,4][::2] }}", []any{int64(0), int64(2), int64(4)}},
		{"slice reverse", "{{ xs[::-1] }}", []any{int64(2), int64(1), int64(3)}},
		{"slice negative", "{{ xs[-2:] }}", []any{int64(1), int64(2)}},
		{"slice string", "{{ s[:5] }}", "Hello"},
		{"slice string reverse", "{{ 'abc'[::-1] }}", "cba"},
		{"slice out of range", "{{ xs[5:9] }}", []any{}},
		{"slice of null", "{{ missing[1:] }}", nil},
		{"now R-T4", "{{ now() }}", "2024-05-06T05:08:09.123Z"},
		{"range", "{{ range(3) }}", []any{int64(0), int64(1), int64(2)}},
		{"range start stop step", "{{ range(5, 0, -2) }}", []any{int64(5), int64(3), int64(1)}},
		{"len", "{{ len(xs) }}", int64(3)},
		{"method get", "{{ m.get('a') }}", int64(1)},
		{"method get default", "{{ m.get('zz', 5) }}", int64(5)},
		{"method get on undefined", "{{ missing.get('a') }}", nil},
		{"method items", "{{ m.in.items() }}", []any{[]any{"x", "deep"}}},
		{"method keys", "{{ m.in.keys() }}", []any{"x"}},
		{"method values", "{{ m.in.values() }}", []any{"deep"}},
		{"method upper", "{{ s.upper() }}", "HELLO WORLD"},
		{"method lower", "{{ s.lower() }}", "hello world"},
		{"method strip", "{{ '  x  '.strip() }}", "x"},
		{"method strip chars", "{{ 'xxaxx'.strip('x') }}", "a"},
		{"method lstrip", "{{ '  x '.lstrip() }}", "x "},
		{"method rstrip", "{{ ' x  '.rstrip() }}", " x"},
		{"method split", "{{ csv.split(',') }}", []any{"a", "b", "c"}},
		{"method split whitespace", "{{ ' a  b '.split() }}", []any{"a", "b"}},
		{"method split max", "{{ csv.split(',', 1) }}", []any{"a", "b,c"}},
		{"method startswith", "{{ s.startswith('Hell') }}", true},
		{"method startswith tuple", "{{ s.startswith(('x', 'H')) }}", true},
		{"method endswith", "{{ s.endswith('x') }}", false},
		{"method replace", "{{ s.replace('o', '0') }}", "Hell0 W0rld"},
		{"method replace count", "{{ s.replace('o', '0', 1) }}", "Hell0 World"},
		{"method join", "{{ '-'.join(strs) }}", "b-A-c"},
		{"method title", `{{ "they're here".title() }}`, "They'Re Here"},
		{"method capitalize", "{{ 'hELLO'.capitalize() }}", "Hello"},
	})
}

func TestFilters(t *testing.T) {
	runCases(t, []renderCase{
		{"int", "{{ '42'|int }}", int64(42)},
		{"int()", "{{ '42'|int() }}", int64(42)},
		{"int from float string", "{{ '3.7'|int }}", int64(3)},
		{"int from float", "{{ f|int }}", int64(2)},
		{"int negative float truncates", "{{ -2.7|int }}", int64(-2)},
		{"int bad gives 0", "{{ 'abc'|int }}", int64(0)},
		{"int(default)", "{{ 'abc'|int(5) }}", int64(5)},
		{"int null", "{{ nul|int }}", int64(0)},
		{"int base", "{{ 'ff'|int(base=16) }}", int64(255)},
		{"int base prefix", "{{ '0x1F'|int(0, 16) }}", int64(31)},
		{"int big id", "{{ '9007199254740993'|int }}", int64(9007199254740993)},
		{"int bool", "{{ t|int }}", int64(1)},
		{"float", "{{ '2.5'|float }}", 2.5},
		{"float()", "{{ n|float() }}", 7.0},
		{"float bad", "{{ 'x'|float }}", 0.0},
		{"float default", "{{ 'x'|float(1.5) }}", 1.5},
		{"string", "{{ n|string }}", "7"},
		{"string()", "{{ nul|string() }}", ""},
		{"string map", "{{ m.in|string }}", `{"x":"deep"}`},
		{"bool", "{{ 'yes'|bool }}", true},
		{"bool()", "{{ 'off'|bool() }}", false},
		{"bool zero", "{{ z|bool }}", false},
		{"bool false string", "{{ 'False'|bool }}", false},
		{"length", "{{ xs|length }}", int64(3)},
		{"length()", "{{ s|length() }}", int64(11)},
		{"length unicode", "{{ 'héllo'|length }}", int64(5)},
		{"length map", "{{ m.in|length }}", int64(1)},
		{"length undefined", "{{ missing|length }}", int64(0)},
		{"count", "{{ xs|count }}", int64(3)},
		{"default undefined", "{{ missing|default('d') }}", "d"},
		{"default null", "{{ nul|default('d') }}", "d"},
		{"default keeps falsy", "{{ e|default('d') }}", ""},
		{"default keeps zero", "{{ z|default(5) }}", int64(0)},
		{"default boolean", "{{ e|default('d', true) }}", "d"},
		{"default boolean kw", "{{ z|default(5, boolean=true) }}", int64(5)},
		{"default no args", "{{ missing|default }}", ""},
		{"default deep path", "{{ missing.a.b|default('d') }}", "d"},
		{"d", "{{ missing|d('d') }}", "d"},
		{"d keeps value", "{{ n|d(1) }}", int64(7)},
		{"tojson", "{{ m.in|tojson }}", `{"x":"deep"}`},
		{"tojson()", "{{ {'b': [1, 2.5], 'a': html}|tojson() }}", `{"a":"<a&b>","b":[1,2.5]}`},
		{"tojson string", "{{ s|tojson }}", `"Hello World"`},
		{"tojson indent", "{{ {'a': 1}|tojson(2) }}", "{\n  \"a\": 1\n}"},
		{"fromjson", "{{ json|fromjson }}", map[string]any{"a": []any{int64(1), 2.5, "x"}, "b": nil}},
		{"fromjson()", "{{ '[1]'|fromjson() }}", []any{int64(1)}},
		{"fromjson passes structures", "{{ m.in|fromjson }}", map[string]any{"x": "deep"}},
		{"fromjson path", "{{ (json|fromjson).a[1] }}", 2.5},
		{"lower", "{{ s|lower }}", "hello world"},
		{"lower()", "{{ s|lower() }}", "hello world"},
		{"upper", "{{ s|upper }}", "HELLO WORLD"},
		{"upper()", "{{ s|upper() }}", "HELLO WORLD"},
		{"capitalize", "{{ 'hELLO wORLD'|capitalize }}", "Hello world"},
		{"capitalize()", "{{ 'x'|capitalize() }}", "X"},
		{"title", "{{ 'hello big-world'|title }}", "Hello Big-World"},
		{"title()", "{{ 'a b'|title() }}", "A B"},
		{"trim", "{{ '  x \n'|trim }}", "x"},
		{"trim()", "{{ ' x '|trim() }}", "x"},
		{"trim chars", "{{ '--x--'|trim('-') }}", "x"},
		{"replace", "{{ s|replace('o', '0') }}", "Hell0 W0rld"},
		{"replace count", "{{ s|replace('o', '0', 1) }}", "Hell0 World"},
		{"replace kw", "{{ s|replace(old='l', new='L') }}", "HeLLo WorLd"},
		{"split", "{{ csv|split(',') }}", []any{"a", "b", "c"}},
		{"split no args", "{{ ' a  b '|split }}", []any{"a", "b"}},
		{"split()", "{{ 'a b'|split() }}", []any{"a", "b"}},
		{"split max", "{{ csv|split(',', 1) }}", []any{"a", "b,c"}},
		{"split whitespace max", "{{ ' a  b c '|split(none, 1) }}", []any{"a", "b c "}},
		{"split whitespace max 0", "{{ ' a b '|split(maxsplit=0) }}", []any{"a b "}},
		{"join", "{{ xs|join }}", "312"},
		{"join()", "{{ xs|join(', ') }}", "3, 1, 2"},
		{"join attribute", "{{ users|join(',', attribute='name') }}", "ann,Bob"},
		{"join mixed", "{{ [1, none, 'a', true]|join('|') }}", "1||a|true"},
		{"first", "{{ xs|first }}", int64(3)},
		{"first()", "{{ xs|first() }}", int64(3)},
		{"first empty", "{{ empty|first }}", nil},
		{"first string", "{{ s|first }}", "H"},
		{"last", "{{ xs|last }}", int64(2)},
		{"last()", "{{ xs|last() }}", int64(2)},
		{"keys", "{{ m.in|keys }}", []any{"x"}},
		{"keys() sorted", "{{ {'b': 1, 'a': 2}|keys() }}", []any{"a", "b"}},
		{"values", "{{ {'b': 1, 'a': 2}|values }}", []any{int64(2), int64(1)}},
		{"values()", "{{ m.in|values() }}", []any{"deep"}},
		{"items", "{{ {'b': 1, 'a': 2}|items }}", []any{[]any{"a", int64(2)}, []any{"b", int64(1)}}},
		{"items()", "{{ m.in|items() }}", []any{[]any{"x", "deep"}}},
		{"sum", "{{ xs|sum }}", int64(6)},
		{"sum()", "{{ [1, 2.5]|sum() }}", 3.5},
		{"sum attribute", "{{ users|sum(attribute='age') }}", int64(55)},
		{"sum start", "{{ xs|sum(start=10) }}", int64(16)},
		{"min", "{{ xs|min }}", int64(1)},
		{"min()", "{{ strs|min() }}", "A"},
		{"min case sensitive", "{{ ['b', 'a', 'B']|min(case_sensitive=true) }}", "B"},
		{"min attribute", "{{ users|min(attribute='age') }}", map[string]any{"name": "Bob", "age": int64(25), "tags": []any{}}},
		{"max", "{{ xs|max }}", int64(3)},
		{"max()", "{{ [1, 2.5]|max() }}", 2.5},
		{"max empty", "{{ empty|max }}", nil},
		{"round", "{{ 2.6|round }}", 3.0},
		{"round()", "{{ 2.5|round() }}", 2.0},
		{"round half even", "{{ 3.5|round }}", 4.0},
		{"round precision", "{{ 3.14159|round(2) }}", 3.14},
		{"round exact binary", "{{ 2.675|round(2) }}", 2.67},
		{"round ceil", "{{ 3.14159|round(2, 'ceil') }}", 3.15},
		{"round floor kw", "{{ 3.19|round(1, method='floor') }}", 3.1},
		{"round int stays int", "{{ 7|round }}", int64(7)},
		{"round negative precision", "{{ 1250|round(-2) }}", int64(1200)},
		{"abs", "{{ neg|abs }}", int64(7)},
		{"abs()", "{{ -2.5|abs() }}", 2.5},
		{"abs float", "{{ f|abs }}", 2.5},
		{"abs bool", "{{ true|abs }}", int64(1)},
		{"unique", "{{ [1, 2, 1, 1.0, 3]|unique }}", []any{int64(1), int64(2), int64(3)}},
		{"unique()", "{{ ['a', 'A', 'b']|unique() }}", []any{"a", "b"}},
		{"unique case sensitive", "{{ ['a', 'A']|unique(true) }}", []any{"a", "A"}},
		{"unique attribute", "{{ users|unique(attribute='tags')|length }}", int64(2)},
		{"sort", "{{ xs|sort }}", []any{int64(1), int64(2), int64(3)}},
		{"sort()", "{{ strs|sort() }}", []any{"A", "b", "c"}},
		{"sort reverse", "{{ xs|sort(reverse=true) }}", []any{int64(3), int64(2), int64(1)}},
		{"sort case sensitive", "{{ strs|sort(case_sensitive=true) }}", []any{"A", "b", "c"}},
		{"sort attribute", "{{ users|sort(attribute='age')|map(attribute='name')|list }}", []any{"Bob", "ann"}},
		{"sort map keys", "{{ {'b': 1, 'a': 2}|sort }}", []any{"a", "b"}},
		{"list", "{{ 'ab'|list }}", []any{"a", "b"}},
		{"list()", "{{ {'b': 1, 'a': 2}|list() }}", []any{"a", "b"}},
		{"list undefined", "{{ missing|list }}", []any{}},
		{"dict", "{{ [['a', 1], ['b', 2]]|dict }}", map[string]any{"a": int64(1), "b": int64(2)}},
		{"dict()", "{{ m.in|dict() }}", map[string]any{"x": "deep"}},
		{"dict of items", "{{ (m.in|items)|dict }}", map[string]any{"x": "deep"}},
		{"map attribute", "{{ users|map(attribute='name')|list }}", []any{"ann", "Bob"}},
		{"map attribute default", "{{ users|map(attribute='nick', default='?') }}", []any{"?", "?"}},
		{"map dotted attribute", "{{ users|map(attribute='tags.0') }}", []any{"x", nil}},
		{"map filter", "{{ xs|map('string')|join }}", "312"},
		{"map filter args", "{{ ['a', 'b']|map('replace', 'a', 'z') }}", []any{"z", "b"}},
		{"map int", "{{ ['1', '2']|map('int')|sum }}", int64(3)},
		{"reverse", "{{ xs|reverse }}", []any{int64(2), int64(1), int64(3)}},
		{"reverse string", "{{ 'abc'|reverse }}", "cba"},
		{"chain", "{{ s|lower|replace('world', 'there')|upper }}", "HELLO THERE"},
		{"chain with spaces", "{{ xs | sort | first }}", int64(1)},
		{"filter on literal", "{{ 'a,b' | split(',') | length }}", int64(2)},
		{"filter then test", "{{ xs|first is number }}", true},
	})
}

func TestTests(t *testing.T) {
	runCases(t, []renderCase{
		{"R-T3 defined", "{{ n is defined }}", true},
		{"R-T3 null binding is defined", "{{ nul is defined }}", true},
		{"R-T3 missing binding is undefined", "{{ missing is defined }}", false},
		{"R-T3 is not defined", "{{ missing is not defined }}", true},
		{"R-T3 undefined test", "{{ missing is undefined }}", true},
		{"R-T3 is not undefined", "{{ n is not undefined }}", true},
		{"R-T3 path with null value is defined", "{{ m.nul is defined }}", true},
		{"R-T3 missing path", "{{ m.zz is defined }}", false},
		{"R-T3 path under missing", "{{ missing.a is defined }}", false},
		{"R-T3 index defined", "{{ xs[2] is defined }}", true},
		{"R-T3 index undefined", "{{ xs[3] is defined }}", false},
		{"R-T3 item key", "{{ m['a'] is defined }}", true},
		{"R-T3 expression defined when not null", "{{ (n + 1) is defined }}", true},
		{"is none", "{{ nul is none }}", true},
		{"is none on undefined", "{{ missing is none }}", true},
		{"is not none", "{{ n is not none }}", true},
		{"is number", "{{ f is number }}", true},
		{"is number string", "{{ num is number }}", false},
		{"is string", "{{ s is string }}", true},
		{"is mapping", "{{ m is mapping }}", true},
		{"is mapping list", "{{ xs is mapping }}", false},
		{"is iterable", "{{ xs is iterable }}", true},
		{"is iterable number", "{{ n is iterable }}", false},
		{"is sequence", "{{ s is sequence }}", true},
		{"is boolean", "{{ t is boolean }}", true},
		{"is integer", "{{ n is integer }}", true},
		{"is integer float", "{{ 1.0 is integer }}", false},
		{"is float", "{{ f is float }}", true},
		{"is true", "{{ t is true }}", true},
		{"is false", "{{ 0 is false }}", false},
		{"is even", "{{ 4 is even }}", true},
		{"is odd", "{{ n is odd }}", true},
		{"is divisibleby", "{{ 9 is divisibleby(3) }}", true},
		{"is lower", "{{ 'abc' is lower }}", true},
		{"is upper", "{{ 'abc' is upper }}", false},
		{"test binds tighter than +", "{{ 1 + 1 is number }}", int64(2)},
		{"not test", "{{ not missing is defined }}", true},
	})
}

func TestBlocks(t *testing.T) {
	runCases(t, []renderCase{
		{"R-T11 if", "{% if t %}yes{% endif %}", "yes"},
		{"R-T11 if false", "{% if e %}yes{% endif %}", ""},
		{"R-T11 if else", "{% if no %}a{% else %}b{% endif %}", "b"},
		{"R-T11 elif", "{% if z %}a{% elif n > 5 %}b{% else %}c{% endif %}", "b"},
		{"R-T11 elif chain falls to else", "{% if z %}a{% elif no %}b{% elif e %}c{% else %}d{% endif %}", "d"},
		{"R-T11 if with expression inside", "x{% if n %}[{{ n }}]{% endif %}y", "x[7]y"},
		{"R-T11 for", "{% for x in xs %}{{ x }},{% endfor %}", "3,1,2,"},
		{"R-T11 for loop vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }};{% endfor %}",
			"10truefalse;21falsefalse;32falsetrue;"},
		{"R-T11 for loop length", "{% for x in xs %}{{ loop.length }}{{ loop.revindex }}{% endfor %}", "333231"},
		{"R-T11 for over map sorted keys", "{% for k in {'b': 1, 'a': 2, 'c': 3} %}{{ k }}{% endfor %}", "abc"},
		{"R-T11 for unpack items", "{% for k, v in m.in.items() %}{{ k }}={{ v }}{% endfor %}", "x=deep"},
		{"R-T11 for unpack items filter", "{% for k, v in {'b': 1, 'a': 2}|items %}{{ k }}{{ v }}{% endfor %}", "a2b1"},
		{"R-T11 for over undefined", "[{% for x in missing %}{{ x }}{% endfor %}]", "[]"},
		{"R-T11 for else", "{% for x in empty %}{{ x }}{% else %}none{% endfor %}", "none"},
		{"R-T11 for else not taken", "{% for x in xs %}{{ x }}{% else %}none{% endfor %}", "312"},
		{"R-T11 for over string", "{% for c in 'ab' %}{{ c }}.{% endfor %}", "a.b."},
		{"R-T11 for over range", "{% for i in range(3) %}{{ i }}{% endfor %}", "012"},
		{"R-T11 nested for", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }} {% endfor %}{% endfor %}", "1x 1y 2x 2y "},
		{"R-T11 nested loop sees outer var and inner loop", "{% for a in [1, 2] %}{% for b in [1] %}{{ a }}{{ loop.index }}{% endfor %}{% endfor %}", "1121"},
		{"R-T11 loop var shadows global", "{% for n in [1] %}{{ n }}{% endfor %}{{ n }}", "17"},
		{"R-T11 loop var is defined", "{% for q in [none] %}{{ q is defined }}{% endfor %}", "true"},
		{"R-T11 if inside for", "{% for x in xs %}{% if x > 1 %}{{ x }}{% endif %}{% endfor %}", "32"},
		{"R-T11 SQL building", "SELECT * FROM t{% if users %} WHERE name IN ({% for u in users %}'{{ u.name }}'{% if not loop.last %}, {% endif %}{% endfor %}){% endif %}",
			"SELECT * FROM t WHERE name IN ('ann', 'Bob')"},
		{"R-T11 block with only whitespace", "  {% if t %}{{ n }}{% endif %}  ", "  7  "},
		{"R-T11 for with filter iterable", "{% for x in xs|sort %}{{ x }}{% endfor %}", "123"},
		{"whitespace control in blocks", "{% for x in xs -%}\n  {{ x }}\n{%- endfor %}", "312"},
	})
}

func TestRulings(t *testing.T) {
	runCases(t, []renderCase{
		// R-T1: Python truthiness in every condition, and/or return operands.
		{"R-T1 empty list falsy", "{{ 'y' if empty else 'n' }}", "n"},
		{"R-T1 empty map falsy", "{{ 'y' if emptym else 'n' }}", "n"},
		{"R-T1 zero float falsy", "{{ 'y' if 0.0 else 'n' }}", "n"},
		{"R-T1 string 'false' is truthy inside templates", "{{ 'y' if 'false' else 'n' }}", "y"},
		{"R-T1 or operand", "{{ empty or xs }}", []any{int64(3), int64(1), int64(2)}},
		{"R-T1 and operand", "{{ xs and emptym }}", map[string]any{}},
		{"R-T1 not", "{{ not emptym }}", true},
		// R-T2 text form is covered by TestTextRendering.
		// R-T4 literals and operators.
		{"R-T4 literals", "{{ [True, False, None, none] }}", []any{true, false, nil, nil}},
		{"R-T4 operators", "{{ [7 // 2, 7 % 2, 2 ** 3] }}", []any{int64(3), int64(1), int64(8)}},
		// R-T5: access on null or non-containers is null.
		{"R-T5 member of null", "{{ nul.x }}", nil},
		{"R-T5 member of undefined chain", "{{ missing.a.b.c }}", nil},
		{"R-T5 member of number", "{{ n.x }}", nil},
		{"R-T5 member of string", "{{ s.x }}", nil},
		{"R-T5 index of number", "{{ n[0] }}", nil},
		{"R-T5 index of null", "{{ nul[0] }}", nil},
		{"R-W7 attribute on list is null", "{{ xs.name }}", nil},
		{"R-W7 string key on list is null", "{{ xs['a'] }}", nil},
		// NoETL's step results: an object without data is its own data.
		{"object is its own data", "{{ m.data.in.x }}", "deep"},
		{"own data wins", "{{ {'data': 1}.data }}", int64(1)},
		{"own data is defined", "{{ m.data is defined }}", true},
		{"list has no data", "{{ xs.data }}", nil},
		// R-T10: integral values stay int64.
		{"R-T10 arithmetic keeps int64", "{{ big + 1 }}", int64(9007199254740994)},
		{"R-T10 fromjson keeps int64", "{{ '{\"id\": 9007199254740993}'|fromjson }}", map[string]any{"id": int64(9007199254740993)}},
		{"R-T10 text has no .0", "{{ 3.0 }}x", "3x"},
		// R-T7: names are [A-Za-z_][A-Za-z0-9_]*; R-T8: a bare step name renders the
		// bound result natively. (R-T6 and R-T9 are the engine's: which fields are
		// templated, how set keys bind.)
		{"R-T7 name with underscore and digits", "{{ [_get, n] }}", []any{"underscore", int64(7)}},
		{"R-T8 bare name is the native value", "{{ users }}", testVars()["users"]},
		// R-A9: integral floats count as integers.
		{"R-A9 integral float index", "{{ xs[1.0] }}", int64(1)},
		{"R-A9 range with integral float", "{{ range(2.0) }}", []any{int64(0), int64(1)}},
	})
}

func TestErrors(t *testing.T) {
	compileErrs := []errCase{
		{"{{ n", "unterminated '{{'", 1, 1},
		{"ab\n  {{ n ", "unterminated '{{'", 2, 3},
		{"{% if t ", "unterminated '{%'", 1, 1},
		{"{{ }}", "empty expression", 1, 4},
		{"{{ n | nope }}", "unknown filter 'nope'", 1, 8},
		{"{{ n | nope() }}", "unknown filter 'nope'", 1, 8},
		{"{{ xs|map('nope') }}", "unknown filter 'nope'", 1, 11},
		{"{{ xs|map(n) }}", "map needs a filter name", 1, 11},
		{"{{ n is nope }}", "unknown test 'nope'", 1, 9},
		{"{{ n is divisibleby }}", "takes 1 argument", 1, 9},
		{"{{ foo(1) }}", "unknown function 'foo'", 1, 4},
		{"{{ n.nope() }}", "unknown method 'nope'", 1, 6},
		{"{{ m.get() }}", "method 'get' takes 1 to 2", 1, 6},
		{"{{ now(1) }}", "now() takes no arguments", 1, 4},
		{"{{ range() }}", "range() takes 1 to 3", 1, 4},
		{"{{ len(1, 2) }}", "len() takes exactly one", 1, 4},
		{"{{ s|replace('a') }}", "needs argument 'new'", 1, 6},
		{"{{ s|lower(1) }}", "takes at most 0 argument", 1, 6},
		{"{{ s|int(nope=1) }}", "has no argument 'nope'", 1, 10},
		{"{{ s|int(1, default=2) }}", "argument 'default' twice", 1, 13},
		{"{{ s|default(boolean=true, 1) }}", "positional argument after keyword", 1, 28},
		{"{{ 1 + }}", "expected an expression", 1, 8},
		{"{{ n n }}", "expected end of tag, found 'n'", 1, 6},
		{"{{ 'abc }}", "unterminated string", 1, 4},
		{"{{ a. }}", "expected a name after '.'", 1, 7},
		{"{{ [1, 2 }}", "expected ',' or ']'", 1, 10},
		{"{{ {'a': 1 2} }}", "expected ',' or '}'", 1, 12},
		{"{{ xs|join(1 2) }}", "expected ',' or ')'", 1, 14},
		{"{{ n ; }}", "unexpected character ';'", 1, 6},
		{"{{ 99999999999999999999 }}", "integer out of range", 1, 4},
		{"{{ (n)(1) }}", "only len(), now(), range() and methods can be called", 1, 7},
		{"{{ xs[] }}", "empty subscript", 1, 6},
		{"{{ xs[1:2:3:4] }}", "expected ']'", 1, 12},
		{"{{ n|first.x }}", "expected end of tag, found '.'", 1, 11},
		{"{{ and }}", "expected an expression, found 'and'", 1, 4},
		{"{% set x = 1 %}", "unsupported tag 'set'", 1, 4},
		{"{% macro m() %}{% endmacro %}", "unsupported tag 'macro'", 1, 4},
		{"{% include 'x' %}", "unsupported tag 'include'", 1, 4},
		{"{% raw %}{{ x }}{% endraw %}", "unsupported tag 'raw'", 1, 4},
		{"{% frob %}", "unknown tag 'frob'", 1, 4},
		{"{% %}", "expected a tag name", 1, 4},
		{"x{% if t %}y", "missing {% endif %}", 1, 2},
		{"{% for x in xs %}{% if x %}{% endfor %}", "unexpected '{% endfor %}'", 1, 28},
		{"{% endif %}", "unexpected '{% endif %}'", 1, 1},
		{"{% else %}", "unexpected '{% else %}'", 1, 1},
		{"{% for x in xs if x %}{% endfor %}", "'for … if' is not supported", 1, 16},
		{"{% for in xs %}{% endfor %}", "expected a loop variable name", 1, 8},
		{"{% for x of xs %}{% endfor %}", "expected 'in'", 1, 10},
		{"{% if %}{% endif %}", "expected an expression", 1, 7},
		{"{% endif x %}", "expected end of tag", 1, 10},
		{"line1\nline2 {{ x | bad }}", "unknown filter 'bad'", 2, 14},
		{"é{{ x|bad }}", "unknown filter 'bad'", 1, 7},
	}
	for _, c := range compileErrs {
		t.Run("compile "+c.src, func(t *testing.T) {
			_, err := Compile(c.src)
			if err == nil {
				t.Fatalf("%q: compiled", c.src)
			}
			checkErr(t, c, err)
		})
	}
	renderErrs := []errCase{
		{"{{ 1 / 0 }}", "division by zero", 1, 6},
		{"{{ n // z }}", "division by zero", 1, 6},
		{"{{ n % 0 }}", "division by zero", 1, 6},
		{"{{ 1.5 / 0.0 }}", "division by zero", 1, 8},
		{"{{ 0 ** -1 }}", "zero cannot be raised", 1, 6},
		{"x {{ s + 1 }}", "unsupported operand types for +: string and number", 1, 8},
		{"{{ s - 1 }}", "unsupported operand types for -", 1, 6},
		{"{{ xs * 'a' }}", "unsupported operand types for *", 1, 7},
		{"{{ -s }}", "bad operand type for unary -: string", 1, 4},
		{"{{ s < 1 }}", "cannot compare string and number with <", 1, 6},
		{"{{ 1 in 'abc' }}", "'in <string>' needs a string", 1, 6},
		{"{{ 1 in 5 }}", "cannot test membership in number", 1, 6},
		{"{{ big * big }}", "integer overflow", 1, 8},
		{"{{ 2 ** 64 }}", "integer overflow", 1, 6},
		{"{{ 9223372036854775807 + 1 }}", "integer overflow", 1, 24},
		{"{{ (-9223372036854775807 - 1)|abs }}", "integer overflow", 1, 31},
		{"{{ 1e308 * 10 }}", "not a finite number", 1, 10},
		{"{{ n|length }}", "number has no length", 1, 6},
		{"{{ 'x'|fromjson }}", "fromjson:", 1, 8},
		{"{{ n|keys }}", "keys needs an object", 1, 6},
		{"{{ s|round }}", "round needs a number", 1, 6},
		{"{{ f|round(1, 'up') }}", "method must be common, ceil or floor", 1, 6},
		{"{{ s|split('') }}", "empty separator", 1, 6},
		{"{{ [1, 'a']|sort }}", "cannot compare", 1, 13},
		{"{{ s|replace([1], 'x') }}", "argument 'old' must be a string", 1, 6},
		{"{{ n|int(base=99) }}", "int base must be", 1, 6},
		{"{{ '1e30'|int }}", "out of range", 1, 11},
		{"{{ xs[::0] }}", "slice step cannot be zero", 1, 6},
		{"{{ xs['a':] }}", "slice indices must be integers", 1, 6},
		{"{{ range(0, 10, 0) }}", "step cannot be zero", 1, 4},
		{"{{ range(10000000) }}", "limit MaxRenderElements", 1, 4},
		{"{{ range('a') }}", "range() needs integers", 1, 4},
		{"{{ 'ab' * 10000000 }}", "limit MaxRenderBytes", 1, 9},
		{"{{ n.upper() }}", "number has no method 'upper'", 1, 6},
		{"{{ {[1]: 2} }}", "a map key cannot be array", 1, 4},
		{"{{ 'a' is divisibleby(0) }}", "divisibleby", 1, 11},
		{"{{ s is even }}", "even needs a number", 1, 9},
		{"{% for x in n %}{% endfor %}", "cannot iterate over number", 1, 1},
		{"{% for a, b in xs %}{% endfor %}", "cannot unpack number into 2 loop variables", 1, 1},
		{"a\n{% if t %}\n  {{ n / z }}\n{% endif %}", "division by zero", 3, 8},
		{"{% for x in xs %}{{ x / 0 }}{% endfor %}", "division by zero", 1, 23},
		{"{{ [1, 2]|dict }}", "dict needs [key, value] pairs", 1, 11},
		{"{{ users|sum(attribute='name') }}", "sum: unsupported operand types", 1, 10},
	}
	for _, c := range renderErrs {
		t.Run("render "+c.src, func(t *testing.T) {
			_, err := render(t, c.src)
			if err == nil {
				t.Fatalf("%q: rendered", c.src)
			}
			checkErr(t, c, err)
		})
	}
}

func TestNestingLimits(t *testing.T) {
	deep := "{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}"
	long := "{{ 1" + strings.Repeat(" + 1", 300) + " }}"
	blocks := strings.Repeat("{% if t %}", 300) + strings.Repeat("{% endif %}", 300)
	for _, src := range []string{deep, long, blocks} {
		_, err := Compile(src)
		if err == nil || !strings.Contains(err.Error(), "nested too deeply") {
			t.Errorf("%.20q…: %v", src, err)
		}
	}
	// Realistic sizes are fine.
	got, err := render(t, "{{ 1"+strings.Repeat(" + 1", 150)+" }}")
	if err != nil || got != int64(151) {
		t.Fatalf("150 terms: %v, %v", got, err)
	}
	got, err = render(t, "{{ "+strings.Repeat("(", 50)+"n"+strings.Repeat(")", 50)+" }}")
	if err != nil || got != int64(7) {
		t.Fatalf("50 parentheses: %v, %v", got, err)
	}
	got, err = render(t, "{{ s"+strings.Repeat("|lower", 100)+" }}")
	if err != nil || got != "hello world" {
		t.Fatalf("100 filters: %v, %v", got, err)
	}
}

// TestLoopOutputBudget: loop bodies build text like any expression, so the
// budget stops a loop's output where it is built.
func TestLoopOutputBudget(t *testing.T) {
	_, err := render(t, "{% for a in range(99999) %}{{ 'x' * 1000000 }}{% endfor %}")
	checkErr(t, errCase{"{% for a in range(99999) %}{{ 'x' * 1000000 }}{% endfor %}", "16 MiB of text (limit MaxRenderBytes = 16777216 bytes per render)", 1, 35}, err)
	src := "{% for a in range(100) %}{% for b in range(100) %}{{ 'x' * 10000 }}{% endfor %}{% endfor %}"
	if _, err = render(t, src); err == nil || !strings.Contains(err.Error(), "limit MaxRenderBytes") {
		t.Fatalf("nested: %v", err)
	}
	got, err := render(t, "{% for a in range(1000) %}{{ 'x' * 1000 }}{% endfor %}")
	if err != nil || len(got.(string)) != 1000*1000 {
		t.Fatalf("1 MB of loop output: %v", err)
	}
}

// TestLoopIterationLimit: nested loops are bounded by their total iterations,
// whatever they output; a million run. The lists are given, so building them
// costs nothing.
func TestLoopIterationLimit(t *testing.T) {
	list := func(n int) []any { return make([]any, n) }
	run := func(outer int) (any, error) {
		tp, err := Compile("{% for a in outer %}{% for b in inner %}{% endfor %}{% endfor %}")
		if err != nil {
			t.Fatal(err)
		}
		return tp.Render(Env{Vars: map[string]any{"outer": list(outer), "inner": list(1000)}})
	}
	_, err := run(1000)
	var be *BudgetError
	if !errors.As(err, &be) || be.Limit != "MaxLoopIterations" || !strings.Contains(err.Error(), "loops would run more than 1000000 iterations") {
		t.Fatalf("1,001,000 iterations: %v", err)
	}
	if got, err := run(998); err != nil || got != "" {
		t.Fatalf("998,998 iterations: %q, %v", got, err)
	}
}

func TestNilVars(t *testing.T) {
	for src, want := range map[string]any{
		"{{ x }}":            nil,
		"{{ x is defined }}": false,
		"a{{ x.y }}b":        "ab",
		"{% for i in x %}{{ i }}{% else %}empty{% endfor %}": "empty",
	} {
		tp, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tp.Render(Env{})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, %v", src, got, err)
		}
	}
}

func TestNowNeedsTime(t *testing.T) {
	tp, err := Compile("{{ now() }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tp.Render(Env{Vars: testVars()})
	checkErr(t, errCase{"{{ now() }}", "now() needs Env.Now", 1, 4}, err)
	// now() does not disturb other names, and Vars is not modified.
	vars := testVars()
	tp, _ = Compile("{{ n }} {{ now() }}")
	got, err := tp.Render(Env{Vars: vars, Now: time.Unix(0, 0)})
	if err != nil || got != "7 1970-01-01T00:00:00Z" {
		t.Fatalf("got %#v, %v", got, err)
	}
	if _, ok := vars[nowKey]; ok {
		t.Fatal("Render modified Vars")
	}
}

func TestErrorFormat(t *testing.T) {
	long := strings.Repeat("x", 300) + "\nSELECT {{ 1 / 0 }} FROM t\n" + strings.Repeat("y", 300)
	_, err := render(t, long)
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("got %v", err)
	}
	if te.Line != 2 || te.Column != 13 || te.Template != long {
		t.Fatalf("at %d:%d", te.Line, te.Column)
	}
	want := `template "SELECT {{ 1 / 0 }} FROM t" at 2:13: division by zero`
	if te.Error() != want {
		t.Fatalf("Error() = %q, want %q", te.Error(), want)
	}
	te.Path = "params.q"
	if !strings.HasPrefix(te.Error(), "params.q: template ") {
		t.Fatalf("Error() = %q", te.Error())
	}
	// A JSON syntax error stays reachable through the chain.
	_, err = render(t, "{{ '{'|fromjson }}")
	if errors.Unwrap(err) == nil {
		t.Fatalf("fromjson error does not wrap its cause: %v", err)
	}
}

func TestNoInputMutation(t *testing.T) {
	vars := testVars()
	for _, src := range []string{
		"{{ xs|sort }}", "{{ xs|reverse }}", "{{ xs + [9] }}", "{{ m|dict }}", "{{ xs|list }}",
		"{{ strs|unique }}", "{{ users|sort(attribute='age') }}",
	} {
		tp, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Render(Env{Vars: vars}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(vars, testVars()) {
		t.Fatal("a filter modified its input")
	}
}

func TestRoots(t *testing.T) {
	for _, c := range []struct {
		src  string
		want []string
	}{
		{"plain", nil},
		{"{{ 1 + 2 }}", nil},
		{"{{ a.b.c }}", []string{"a"}},
		{"{{ b }} {{ a[c] }} {{ a }}", []string{"a", "b", "c"}},
		{"{{ x is defined }}", []string{"x"}},
		{"{{ now() ~ range(n)|join }}", []string{"n"}},
		{"{{ xs|map(attribute=attr)|join(sep) }}", []string{"attr", "sep", "xs"}},
		{"{% for x in xs %}{{ x.y }}{{ loop.index }}{{ z }}{% endfor %}", []string{"xs", "z"}},
		{"{% for k, v in m|items %}{{ k }}{{ v }}{% endfor %}{{ k }}", []string{"k", "m"}},
		{"{% for x in xs %}{% else %}{{ x }}{% endfor %}", []string{"x", "xs"}},
		{"{{ loop }}", []string{"loop"}},
		{"{% if a %}{{ b }}{% elif c %}{{ d }}{% else %}{{ e }}{% endif %}", []string{"a", "b", "c", "d", "e"}},
		{"{{ {k: v} }} {{ s.upper() }}", []string{"k", "s", "v"}},
		{"{{ nil }} {{ let }}", []string{"let", "nil"}},
	} {
		tp, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%q: %v", c.src, err)
		}
		got := tp.Roots()
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: Roots() = %v, want %v", c.src, got, c.want)
		}
	}
}

func TestTruthyWhenTrueText(t *testing.T) {
	for _, c := range []struct {
		v            any
		truthy, when bool
		text         string
	}{
		{nil, false, false, ""},
		{false, false, false, "false"},
		{true, true, true, "true"},
		{int64(0), false, false, "0"},
		{int64(-3), true, true, "-3"},
		{0.0, false, false, "0"},
		{2.0, true, true, "2"},
		{0.1, true, true, "0.1"},
		{1e21, true, true, "1e+21"},
		{1e-7, true, true, "1e-7"},
		{123456789.125, true, true, "123456789.125"},
		{"", false, false, ""},
		{"x", true, true, "x"},
		{"false", true, false, "false"},
		{"FALSE", true, false, "FALSE"},
		{" no\n", true, false, " no\n"},
		{"0", true, false, "0"},
		{"None", true, false, "None"},
		{"null", true, false, "null"},
		{"Off", true, false, "Off"},
		{"yes", true, true, "yes"},
		{[]any{}, false, false, "[]"},
		{[]any{nil}, true, true, "[null]"},
		{map[string]any{}, false, false, "{}"},
		{map[string]any{"b": 1.5, "a": "<&>"}, true, true, `{"a":"<&>","b":1.5}`},
		{int64(9007199254740993), true, true, "9007199254740993"},
		{7, true, true, "7"}, // a plain Go int from a caller that did not normalise
		{math.Inf(1), true, true, "inf"},
		{math.NaN(), true, true, "nan"},
	} {
		if got := Truthy(c.v); got != c.truthy {
			t.Errorf("Truthy(%#v) = %v", c.v, got)
		}
		if got := WhenTrue(c.v); got != c.when {
			t.Errorf("WhenTrue(%#v) = %v", c.v, got)
		}
		if got := Text(c.v); got != c.text {
			t.Errorf("Text(%#v) = %q, want %q", c.v, got, c.text)
		}
	}
	if !HasTemplate("a {{ b") || !HasTemplate("{% if") || HasTemplate("a { b } }}") {
		t.Error("HasTemplate")
	}
}

// A `when` renders with WhenTrue applied to the final value: the string rule applies
// there and only there (R-T1).
func TestWhenRendering(t *testing.T) {
	for src, want := range map[string]bool{
		"{{ n > 5 }}":        true,
		"{{ empty }}":        false,
		"{{ s }}":            true,
		"{{ 'false' }}":      false,
		"x{{ no }}":          true,
		"{{ no }}":           false,
		"{{ no }} ":          false,
		"{{ 'no' if t }}":    false,
		"{{ 'false' or 1 }}": false, // or returns the truthy string; the when rule then reads it
	} {
		v, err := render(t, src)
		if err != nil {
			t.Fatal(err)
		}
		if WhenTrue(v) != want {
			t.Errorf("when %q: %#v → %v", src, v, !want)
		}
	}
}
