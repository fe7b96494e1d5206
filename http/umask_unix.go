//go:build unix

package http

import "syscall"

// privately runs f with the process's umask at 0177, so that a file or
// socket f creates is mode 0600 from its first moment. The umask is the
// process's: a file another goroutine creates meanwhile is made private
// too, never less so (serve creates no directory while it binds).
func privately(f func() error) error {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return f()
}
