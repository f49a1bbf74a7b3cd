//go:build unix

package store

import (
	"errors"
	"net"
	"syscall"
)

// socketAlive looks at an idle connection's socket without a round trip: a
// peek that does not wait. An idle connection has nothing to read; one the
// server closed reads end of file, and one it ended with a last message
// (FATAL: terminating connection due to administrator command, or
// immediate shutdown) has that message waiting. Either is dead: the pool
// destroys it and takes or dials another, so a connection that died with
// the database is never handed to a request. A socket it cannot look at
// counts as alive (the request then finds out).
func socketAlive(c net.Conn) bool {
	for {
		if u, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
			c = u.NetConn()
			continue
		}
		break
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := true
	// Control, not Read: it takes no read lock, so it never waits.
	err = raw.Control(func(fd uintptr) {
		var b [1]byte
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
				alive = true // nothing to read: the normal idle state
			default:
				alive = false // data the server sent unasked, end of file, or a reset
			}
			return
		}
	})
	return alive && err == nil
}
