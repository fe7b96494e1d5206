//go:build !linux

package delivery

import "net"

// idleBroken reports false: the peek at a kept connection is Linux's (see
// idleprobe_linux.go). Elsewhere a request on a connection the receiver
// closed while it was idle fails, and is retried on schedule.
func idleBroken(net.Conn) bool { return false }
