package commandbus

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// NoETL's names for the command bus settings (docs/noetl-compat.md, "The
// command bus"); shared/config reads them.
const (
	EnvMode       = "NOETL_COMMAND_BUS"
	EnvWriters    = "NOETL_COMMAND_BUS_WRITER_ADDRS"
	EnvShardCount = "NOETL_COMMAND_SHARD_COUNT"
)

// Mode says where command notifications go.
type Mode string

const (
	// ModeNATS publishes to NATS only: the default (NoETL's Python worker,
	// NoETL's Rust worker up to 5.91.1, and our workers listen there).
	ModeNATS Mode = "nats"
	// ModeBus publishes to NoETL's command bus only, as NoETL's Rust server
	// does with NOETL_COMMAND_BUS=ehdb: NoETL's Rust worker 5.91.2 and later
	// is fed; nothing that listens on NATS is.
	ModeBus Mode = "ehdb"
	// ModeShadow publishes to both.
	ModeShadow Mode = "shadow"
)

// MaxShardCount bounds NOETL_COMMAND_SHARD_COUNT: each shard needs a
// writer address, so a larger count could never be configured whole.
const MaxShardCount = 1024

// ParseMode reads NOETL_COMMAND_BUS as NoETL does (trimmed, any case);
// empty is ModeNATS, where NoETL's Rust server refuses to start.
func ParseMode(v string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(v))); m {
	case "":
		return ModeNATS, nil
	case ModeNATS, ModeBus, ModeShadow:
		return m, nil
	}
	return ModeNATS, fmt.Errorf("%s=%q: use ehdb (NoETL's command bus only), shadow (the bus and NATS) or nats (NATS only, the default)", EnvMode, v)
}

// NATS reports whether notifications go to NATS.
func (m Mode) NATS() bool { return m != ModeBus }

// Bus reports whether notifications go to the command bus.
func (m Mode) Bus() bool { return m == ModeBus || m == ModeShadow }

// Writer is one bus writer's ingest address and the shard it owns.
type Writer struct {
	Shard uint32
	Addr  string // host:port; the host may be a DNS name, resolved at each dial
}

// Settings are the command bus settings.
type Settings struct {
	Mode    Mode
	Writers []Writer // ascending by shard
	// ShardCount is the routing modulus (ShardFor); it must equal the
	// writers' own NOETL_COMMAND_SHARD_COUNT. Default 1.
	ShardCount int
}

// ParseWriters reads NOETL_COMMAND_BUS_WRITER_ADDRS: "<shard>@host:port"
// entries, comma-separated. NoETL skips a malformed entry silently; here
// every malformed entry is an error naming it, since a skipped writer
// loses its shard's commands.
func ParseWriters(v string) ([]Writer, error) {
	var out []Writer
	var errs []error
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		shard, addr, ok := strings.Cut(e, "@")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %q has no shard: write <shard>@host:port, e.g. 0@127.0.0.1:9100", EnvWriters, e))
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(shard), 10, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: the shard %q is not a whole number; write <shard>@host:port, e.g. 0@127.0.0.1:9100", EnvWriters, e, shard))
			continue
		}
		addr = strings.TrimSpace(addr)
		if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			errs = append(errs, fmt.Errorf("%s: %q: %q is not host:port (the writer's ingest address, NOETL_COMMAND_BUS_INGEST_BIND of NoETL's host-mode worker)", EnvWriters, e, addr))
			continue
		}
		if i := slices.IndexFunc(out, func(w Writer) bool { return w.Shard == uint32(n) }); i >= 0 {
			errs = append(errs, fmt.Errorf("%s: shard %d is given twice (%s and %s): one writer owns a shard", EnvWriters, n, out[i].Addr, addr))
			continue
		}
		out = append(out, Writer{Shard: uint32(n), Addr: addr})
	}
	slices.SortFunc(out, func(a, b Writer) int { return int(a.Shard) - int(b.Shard) })
	return out, errors.Join(errs...)
}

// ParseSettings reads the three variables (the values as given, untrimmed
// is fine) and checks that they fit together: a bus mode needs a writer
// for every shard below the count, and no writer may own a shard at or
// above it. NoETL starts without writers and loses each command instead.
func ParseSettings(mode, writers, shardCount string) (Settings, error) {
	var s Settings
	var errs []error
	var err error
	if s.Mode, err = ParseMode(mode); err != nil {
		errs = append(errs, err)
	}
	if s.Writers, err = ParseWriters(writers); err != nil {
		errs = append(errs, err)
	}
	s.ShardCount = 1
	if v := strings.TrimSpace(shardCount); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxShardCount {
			errs = append(errs, fmt.Errorf("%s=%q: a whole number from 1 to %d, the writers' own shard count; unset it for 1", EnvShardCount, shardCount, MaxShardCount))
		} else {
			s.ShardCount = n
		}
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	if !s.Mode.Bus() {
		if len(s.Writers) > 0 {
			return s, fmt.Errorf("%s is set but %s is %s: set %s=ehdb (the bus only) or shadow (the bus and NATS), or unset the writers",
				EnvWriters, EnvMode, s.Mode, EnvMode)
		}
		return s, nil
	}
	if len(s.Writers) == 0 {
		return s, fmt.Errorf("%s=%s needs %s: the ingest address of each bus writer, e.g. 0@127.0.0.1:9100 (NoETL's host-mode worker's NOETL_COMMAND_BUS_INGEST_BIND)",
			EnvMode, s.Mode, EnvWriters)
	}
	for _, w := range s.Writers {
		if int(w.Shard) >= s.ShardCount {
			errs = append(errs, fmt.Errorf("%s: shard %d (%s) is not below %s=%d: give shards 0 to %d, or raise the count to the writers' own",
				EnvWriters, w.Shard, w.Addr, EnvShardCount, s.ShardCount, s.ShardCount-1))
		}
	}
	var missing []string
	for shard := range s.ShardCount {
		if !slices.ContainsFunc(s.Writers, func(w Writer) bool { return int(w.Shard) == shard }) {
			missing = append(missing, strconv.Itoa(shard))
		}
	}
	if len(missing) > 0 {
		shown := strings.Join(missing[:min(len(missing), 8)], ", ")
		if len(missing) > 8 {
			shown += fmt.Sprintf(" and %d more", len(missing)-8)
		}
		errs = append(errs, fmt.Errorf("%s has no writer for shard %s of %s=%d: those executions' commands would go nowhere; add <shard>@host:port for each",
			EnvWriters, shown, EnvShardCount, s.ShardCount))
	}
	return s, errors.Join(errs...)
}

// Describe says where notifications go, for a server's start-up lines.
func (s Settings) Describe() string {
	var ws []string
	for _, w := range s.Writers {
		ws = append(ws, fmt.Sprintf("%d@%s", w.Shard, w.Addr))
	}
	writers := strings.Join(ws, ",")
	switch s.Mode {
	case ModeBus:
		return "NoETL's command bus only (writers " + writers + "): NoETL's Rust worker >= 5.91.2 takes them; workers listening on NATS get none"
	case ModeShadow:
		return "NATS and NoETL's command bus (writers " + writers + ")"
	}
	return "NATS only"
}
