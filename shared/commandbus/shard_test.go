package commandbus

import (
	"encoding/binary"
	"testing"
)

// TestXXH64 pins xxh64 to the reference library's answers (libxxhash
// 0.8.1, XXH64 with seed 0): the empty input, inputs shorter than a
// stripe, the 4- and 8-byte tails, and inputs of one and several 32-byte
// stripes.
func TestXXH64(t *testing.T) {
	seq := make([]byte, 100)
	for i := range seq {
		seq[i] = byte(i)
	}
	le := func(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
	for _, c := range []struct {
		in   []byte
		want uint64
	}{
		{nil, 0xef46db3751d8e999},
		{[]byte("a"), 0xd24ec4f1a98c6e5b},
		{[]byte("abc"), 0x44bc2cf5ad770999},
		{[]byte("exec-abc"), 0x6b122933fc0d15a5},
		{[]byte("Nobody inspects the spammish repetition"), 0xfbcea83c8a378bf1},
		{seq, 0x6ac1e58032166597},
		{le(1), 0x9f29cb17a2a49995},
		{le(42), 0xb556806fb6d14353},
		{le(1234567890123456789), 0x9abc16e677108d4a},
		{le(-5), 0xe17a3658c67d607b},
	} {
		if got := xxh64(c.in, 0); got != c.want {
			t.Errorf("xxh64(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// TestShardFor: one shard takes everything; an integer id hashes as its
// eight little-endian bytes, anything else as its text.
func TestShardFor(t *testing.T) {
	for _, c := range []struct {
		id    string
		count int
		want  uint32
	}{
		{"1234567890123456789", 1, 0},
		{"1234567890123456789", 0, 0},
		{"1", 4, 0x9f29cb17a2a49995 % 4},
		{" 42 ", 4, 0xb556806fb6d14353 % 4},
		{"42", 3, 0xb556806fb6d14353 % 3},
		{"1234567890123456789", 7, 0x9abc16e677108d4a % 7},
		{"-5", 4, 0xe17a3658c67d607b % 4},
		{"exec-abc", 5, 0x6b122933fc0d15a5 % 5},
	} {
		if got := ShardFor(c.id, c.count); got != c.want {
			t.Errorf("ShardFor(%q, %d) = %d, want %d", c.id, c.count, got, c.want)
		}
	}
}
