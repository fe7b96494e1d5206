//go:build unix

package http

import "syscall"

// privately runs f with the process's umask at 0077, so that a file or
// socket f creates is its owner's alone from its first moment. The umask
// is the process's: a file another goroutine creates meanwhile is made
// private too, never less so.
func privately(f func() error) error {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	return f()
}
