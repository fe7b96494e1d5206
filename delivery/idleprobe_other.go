//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package delivery

import "net"

// idleBroken reports false: the peek at a kept connection needs
// recvfrom(2) with MSG_PEEK and MSG_DONTWAIT (idleprobe_unix.go). Here a
// request on a connection the receiver closed while it was idle fails and
// is retried on schedule, and an answer the receiver sent unasked while
// the connection was idle can be taken for the next request's.
func idleBroken(net.Conn) bool { return false }
