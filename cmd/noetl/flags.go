package main

import (
	"flag"
	"net/url"
	"strings"
)

// queryFlag is a string flag passed on as the query parameter of its name
// with _ for - (--as-of-time: as_of_time).
type queryFlag struct{ name, usage string }

// queryFlags defines flags on fs; the function it returns, called once fs is
// parsed, is the query of those given.
func queryFlags(fs *flag.FlagSet, flags ...queryFlag) func() url.Values {
	vals := make([]*string, len(flags))
	for i, f := range flags {
		vals[i] = fs.String(f.name, "", f.usage)
	}
	return func() url.Values {
		q := url.Values{}
		for i, f := range flags {
			if *vals[i] != "" {
				q.Set(strings.ReplaceAll(f.name, "-", "_"), *vals[i])
			}
		}
		return q
	}
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments (`noetl exec FILE --wait` as well as `noetl exec --wait FILE`); the
// standard library stops at the first positional. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}
