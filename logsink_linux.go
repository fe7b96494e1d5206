package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writebackOf returns a function that starts writing the dirty pages of
// out to its disk without waiting for them, if out is a regular file, and
// nil otherwise (a terminal, a pipe to journald, a buffer).
//
// The range ends at the last whole page: the page still being filled is
// left to the kernel, so that the next append never waits for that page's
// write to finish (devices that need stable pages would make it wait).
// WRITE alone, without Pebble's WAIT_BEFORE, never waits for an earlier
// writeback either: the log must not slow the service down.
func writebackOf(out io.Writer) func() error {
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
	page := int64(os.Getpagesize())
	return func() error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			var st unix.Stat_t
			if err = unix.Fstat(int(fd), &st); err != nil {
				return
			}
			if end := st.Size / page * page; end > 0 {
				err = unix.SyncFileRange(int(fd), 0, end, unix.SYNC_FILE_RANGE_WRITE)
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}
}
