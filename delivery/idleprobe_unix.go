//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package delivery

import (
	"crypto/tls"
	"net"
	"syscall"
)

// idleBroken reports whether a kept connection may not take another
// request: it has bytes to read (an answer nobody asked for, such as a 408
// sent on an idle connection, which the next request would take for its
// own), or the receiver closed it. It peeks at the socket without
// waiting: one recvfrom(2). A connection it cannot peek at passes. Over
// TLS, a message the server sends on its own while the connection is idle
// (a session ticket, a key update) reads as broken too: the connection is
// closed and a new one made, which costs a handshake, never a delivery.
// A record tls.Conn read with the last answer is not on the socket any
// more: tlsBuffered looks for it.
func idleBroken(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	broken := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read is EAGAIN; n == 0 without an error is the
		// receiver's close.
		broken = n > 0 || err != syscall.EAGAIN
		return true // never wait
	})
	return broken || err != nil
}
