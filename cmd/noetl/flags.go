package main

import "flag"

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
