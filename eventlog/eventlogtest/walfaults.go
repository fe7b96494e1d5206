// Package eventlogtest injects the storage faults a test cannot produce for
// real on demand: a WAL write or fsync that fails, or one held until the
// test lets it go. It wraps the real filesystem with Pebble's errorfs, so
// everything else Pebble does reaches the disk as usual. Only tests import
// it.
package eventlogtest

import (
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// WALFaults decides the outcome of every write and sync of Pebble's
// write-ahead log. With no fault set, each goes to the disk unchanged.
type WALFaults struct {
	mu        sync.Mutex
	failSync  error
	failWrite error
	hold      chan struct{} // closed to release held syncs
	entered   chan struct{} // receives once per held sync
}

// NewFS returns base (the real filesystem when nil) wrapped so that f
// decides the WAL's writes and syncs. Pass it as eventlog.StoreOptions.FS.
func NewFS(base vfs.FS) (vfs.FS, *WALFaults) {
	if base == nil {
		base = vfs.Default
	}
	f := &WALFaults{}
	return errorfs.Wrap(base, errorfs.InjectorFunc(f.maybeError)), f
}

// FailSyncs makes every later WAL sync return err without reaching the
// disk; nil ends it.
func (f *WALFaults) FailSyncs(err error) {
	f.mu.Lock()
	f.failSync = err
	f.mu.Unlock()
}

// FailWrites makes every later WAL write return err without reaching the
// disk; nil ends it.
func (f *WALFaults) FailWrites(err error) {
	f.mu.Lock()
	f.failWrite = err
	f.mu.Unlock()
}

// HoldSyncs makes every later WAL sync wait until release is called.
// entered receives a value each time a sync starts waiting, so a test knows
// a commit is inside its fsync.
func (f *WALFaults) HoldSyncs() (entered <-chan struct{}, release func()) {
	hold, in := make(chan struct{}), make(chan struct{}, 64)
	f.mu.Lock()
	f.hold, f.entered = hold, in
	f.mu.Unlock()
	var once sync.Once
	return in, func() {
		once.Do(func() {
			f.mu.Lock()
			if f.hold == hold {
				f.hold, f.entered = nil, nil
			}
			f.mu.Unlock()
			close(hold)
		})
	}
}

func (f *WALFaults) maybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		f.mu.Lock()
		err, hold, entered := f.failSync, f.hold, f.entered
		f.mu.Unlock()
		if hold != nil {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-hold
		}
		return err
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		f.mu.Lock()
		err := f.failWrite
		f.mu.Unlock()
		return err
	}
	return nil
}

// Clear ends every fault: writes and syncs reach the disk again.
func (f *WALFaults) Clear() {
	f.FailSyncs(nil)
	f.FailWrites(nil)
}

// Fault is one way a WAL fails.
type Fault struct {
	Name   string
	Inject func(*WALFaults)
}

// Faults are the storage failures every write path is tested under: EIO
// (a failing disk) and ENOSPC (a full one), on WAL writes and on syncs.
var Faults = []Fault{
	{"EIO on WAL sync", func(f *WALFaults) { f.FailSyncs(syscall.EIO) }},
	{"ENOSPC on WAL sync", func(f *WALFaults) { f.FailSyncs(syscall.ENOSPC) }},
	{"EIO on WAL write", func(f *WALFaults) { f.FailWrites(syscall.EIO) }},
	{"ENOSPC on WAL write", func(f *WALFaults) { f.FailWrites(syscall.ENOSPC) }},
}
