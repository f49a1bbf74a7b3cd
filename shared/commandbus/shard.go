package commandbus

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"strings"
)

// ShardFor is the bus shard of an execution, as NoETL's bus routes it: 0
// when count <= 1; otherwise XXH64 (seed 0) of the id's eight little-endian
// bytes when the trimmed id is a 64-bit integer, else of its UTF-8 bytes,
// modulo count. Our execution ids are integers; the text form is kept so a
// test can state NoETL's rule whole.
func ShardFor(executionID string, count int) uint32 {
	if count <= 1 {
		return 0
	}
	id := strings.TrimSpace(executionID)
	var h uint64
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		h = xxh64(binary.LittleEndian.AppendUint64(nil, uint64(n)), 0)
	} else {
		h = xxh64([]byte(id), 0)
	}
	return uint32(h % uint64(count))
}

// XXH64's primes, from the xxHash specification.
const (
	xxPrime1 uint64 = 0x9E3779B185EBCA87
	xxPrime2 uint64 = 0xC2B2AE3D27D4EB4F
	xxPrime3 uint64 = 0x165667B19E3779F9
	xxPrime4 uint64 = 0x85EBCA77C2B2AE63
	xxPrime5 uint64 = 0x27D4EB2F165667C5
)

// xxh64 is the XXH64 hash of b, written from the algorithm as the xxHash
// specification publishes it (stripes of 32 bytes over four accumulators,
// then the tail by 8, 4 and 1 bytes, then the avalanche); the standard
// library has none. shard_test.go checks it against the reference
// library's answers.
func xxh64(b []byte, seed uint64) uint64 {
	n := uint64(len(b))
	var acc uint64
	if len(b) >= 32 {
		v1, v2, v3, v4 := seed+xxPrime1+xxPrime2, seed+xxPrime2, seed, seed-xxPrime1
		for len(b) >= 32 {
			v1 = xxRound(v1, binary.LittleEndian.Uint64(b[0:]))
			v2 = xxRound(v2, binary.LittleEndian.Uint64(b[8:]))
			v3 = xxRound(v3, binary.LittleEndian.Uint64(b[16:]))
			v4 = xxRound(v4, binary.LittleEndian.Uint64(b[24:]))
			b = b[32:]
		}
		acc = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		for _, v := range [4]uint64{v1, v2, v3, v4} {
			acc ^= xxRound(0, v)
			acc = acc*xxPrime1 + xxPrime4
		}
	} else {
		acc = seed + xxPrime5
	}
	acc += n
	for len(b) >= 8 {
		acc ^= xxRound(0, binary.LittleEndian.Uint64(b))
		acc = bits.RotateLeft64(acc, 27)*xxPrime1 + xxPrime4
		b = b[8:]
	}
	if len(b) >= 4 {
		acc ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		acc = bits.RotateLeft64(acc, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		acc ^= uint64(c) * xxPrime5
		acc = bits.RotateLeft64(acc, 11) * xxPrime1
	}
	acc ^= acc >> 33
	acc *= xxPrime2
	acc ^= acc >> 29
	acc *= xxPrime3
	acc ^= acc >> 32
	return acc
}

func xxRound(acc, lane uint64) uint64 {
	acc += lane * xxPrime2
	return bits.RotateLeft64(acc, 31) * xxPrime1
}
