package commandbus

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSettings(t *testing.T) {
	for _, c := range []struct {
		mode, writers, count string
		want                 Settings
		err                  string
	}{
		{"", "", "", Settings{Mode: ModeNATS, ShardCount: 1}, ""},
		{" NATS ", "", "", Settings{Mode: ModeNATS, ShardCount: 1}, ""},
		{"EHDB", " 0@127.0.0.1:9100 ", "", Settings{Mode: ModeBus, ShardCount: 1, Writers: []Writer{{0, "127.0.0.1:9100"}}}, ""},
		{"shadow", "1@w1:9100, 0@w0.internal:9100", "2", Settings{Mode: ModeShadow, ShardCount: 2,
			Writers: []Writer{{0, "w0.internal:9100"}, {1, "w1:9100"}}}, ""},
		{"kafka", "", "", Settings{}, "NOETL_COMMAND_BUS=\"kafka\": use ehdb"},
		{"ehdb", "", "", Settings{}, "needs NOETL_COMMAND_BUS_WRITER_ADDRS"},
		{"", "0@127.0.0.1:9100", "", Settings{}, "NOETL_COMMAND_BUS is nats"},
		{"ehdb", "127.0.0.1:9100", "", Settings{}, "has no shard"},
		{"ehdb", "x@127.0.0.1:9100", "", Settings{}, "is not a whole number"},
		{"ehdb", "0@127.0.0.1", "", Settings{}, "is not host:port"},
		{"ehdb", "0@a:1,0@b:2", "", Settings{}, "shard 0 is given twice"},
		{"ehdb", "0@a:1", "0", Settings{}, "NOETL_COMMAND_SHARD_COUNT=\"0\""},
		{"ehdb", "0@a:1", "3", Settings{}, "no writer for shard 1, 2 of NOETL_COMMAND_SHARD_COUNT=3"},
		{"ehdb", "0@a:1,5@b:2", "", Settings{}, "shard 5 (b:2) is not below NOETL_COMMAND_SHARD_COUNT=1"},
	} {
		got, err := ParseSettings(c.mode, c.writers, c.count)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q %q %q: error %v, want one saying %q", c.mode, c.writers, c.count, err, c.err)
			}
		case err != nil:
			t.Errorf("%q %q %q: %v", c.mode, c.writers, c.count, err)
		case got.Mode != c.want.Mode || got.ShardCount != c.want.ShardCount || !slices.Equal(got.Writers, c.want.Writers):
			t.Errorf("%q %q %q: %+v, want %+v", c.mode, c.writers, c.count, got, c.want)
		}
	}
}

func TestModeChannels(t *testing.T) {
	for m, want := range map[Mode][2]bool{ModeNATS: {true, false}, ModeBus: {false, true}, ModeShadow: {true, true}} {
		if m.NATS() != want[0] || m.Bus() != want[1] {
			t.Errorf("%s: NATS %v bus %v, want %v", m, m.NATS(), m.Bus(), want)
		}
	}
}
