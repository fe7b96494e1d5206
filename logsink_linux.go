package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writebackOf returns a function that starts writing the dirty pages of
// out to its disk without waiting for them, if out is a regular file, and
// nil otherwise (a terminal, a pipe to journald, a buffer).
func writebackOf(out io.Writer) func() {
	f, ok := out.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return func() {
		_ = rc.Control(func(fd uintptr) {
			// Offset 0 and length 0 are the whole file; WRITE alone
			// starts the writeback of pages not already being written
			// and does not wait for it. A log that cannot be written
			// out has nowhere to say so.
			_ = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		})
	}
}
