package tmpl

import "testing"

func BenchmarkRender(b *testing.B) {
	env := testEnv()
	for _, c := range []struct{ name, src string }{
		{"native_member", "{{ m.in.x }}"},
		{"filter_chain", "{{ s|lower|replace('world', 'there')|upper|trim }}"},
		{"mixed", "SELECT * FROM t WHERE id = {{ n }} AND name = '{{ users[0].name }}' LIMIT {{ xs|length }}"},
		{"for_block", "{% for u in users %}{{ u.name }}{% if not loop.last %},{% endif %}{% endfor %}"},
		{"literal", "no templates here"},
	} {
		tp, err := Compile(c.src)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tp.Render(env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("SELECT * FROM t WHERE id = {{ n }} AND name = '{{ users[0].name|upper }}'"); err != nil {
			b.Fatal(err)
		}
	}
}
