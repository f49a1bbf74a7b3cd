package devstacktest

import (
	"net"
	"sync/atomic"
	"testing"
)

// CountingListener is a local TCP server that accepts and closes every
// connection, counting them: the server a test proves a refused step never
// reached. It closes when the test ends.
func CountingListener(t testing.TB) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dials := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	return ln, dials
}
