package eventlog

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS wraps the real filesystem so a test can hold or fail the WAL's
// fsync: the one fault a test cannot produce for real on demand.
type walFS struct {
	vfs.FS
	mu     sync.Mutex
	before func() error // called before every WAL sync; may block
}

func (f *walFS) setHook(h func() error) {
	f.mu.Lock()
	f.before = h
	f.mu.Unlock()
}

func (f *walFS) hook() error {
	f.mu.Lock()
	h := f.before
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	return h()
}

func (f *walFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &walFile{File: file, fs: f}, nil
}

func (f *walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *walFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

type walFile struct {
	vfs.File
	fs *walFS
}

func (w *walFile) Sync() error {
	if err := w.fs.hook(); err != nil {
		return err
	}
	return w.File.Sync()
}

func (w *walFile) SyncData() error {
	if err := w.fs.hook(); err != nil {
		return err
	}
	return w.File.SyncData()
}

func (w *walFile) SyncTo(n int64) (bool, error) {
	if err := w.fs.hook(); err != nil {
		return false, err
	}
	return w.File.SyncTo(n)
}
