package eventlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A backup is a data dir of its own: Pebble's files as of one instant
// (a checkpoint), the head mark of that instant, and master.key when asked
// for. `serve --data` on it is the restore.
//
// The checkpoint is taken into a staging dir inside the data dir, so its
// table files are hard links and it takes milliseconds, with the store's
// fence held: no commit is in flight, so the copy holds exactly the writes
// whose fsync had returned (log records, delivery cursors and attempt
// logs, snapshots alike). The staging dir is then moved to the destination
// when it is on the same file system, and copied otherwise, with writes
// going on meanwhile.

// ErrBackupDest reports a backup destination that cannot take a backup:
// it is not an empty directory, or it lies inside the data dir.
var ErrBackupDest = errors.New("backup destination")

// ErrBackupRunning reports a backup refused because another one runs.
var ErrBackupRunning = errors.New("a backup is already running")

// backupMu lets one backup run at a time in a process, which also makes
// removing the staging dirs of an interrupted one safe.
var backupMu sync.Mutex

// backupStaging is the pattern of the staging dirs inside the data dir.
const backupStaging = "backup-*.tmp"

// BackupOptions configures Backup.
type BackupOptions struct {
	// WithMasterKey copies the data dir's master.key into the backup, or
	// MasterKey when set. A backup without it opens webhook secrets only
	// under the same master key (the original's master.key or
	// secrets.master_key).
	WithMasterKey bool
	// MasterKey is the master key in force when it is not the data dir's
	// master.key (secrets.master_key overrides the file): WithMasterKey
	// writes it as the backup's master.key, the key its secrets open with.
	MasterKey []byte
	// Progress, if set, is told how many bytes of how many were copied,
	// when the backup is on another file system and must be copied.
	Progress func(done, total int64)
	// Registry, if set, has the copy's hash chain verified, as `log
	// verify` does, before the backup is answered: a record the data dir
	// holds damaged (a table file whose checksum fails) fails the backup,
	// where a copy that only ends at the right record would pass.
	Registry *Registry
	// Check, if set with Registry, is given the copy's log once its chain
	// verifies, and fails the backup with its error: the state's snapshot
	// held to the log (projections.SnapshotOnLog), so that a backup
	// succeeds only of a data dir serve would open.
	Check func(*Log) error
}

// BackupResult describes a finished backup.
type BackupResult struct {
	HeadSeq           uint64 // the last record the backup holds
	Bytes             int64  // size of the backup's files
	MasterKeyIncluded bool
}

// Backup writes a consistent copy of the store's data dir to dest, which
// must not exist or be an empty directory outside the data dir. The copy
// holds every write whose fsync had returned when it was taken, and its
// own head mark, so `serve --data dest` opens it as it was. On failure,
// and when ctx ends first (the CLI that asked went away), nothing Backup
// created is left in dest.
func (s *Store) Backup(ctx context.Context, dest string, opts BackupOptions) (res BackupResult, err error) {
	if !backupMu.TryLock() {
		return res, ErrBackupRunning
	}
	defer backupMu.Unlock()
	dest, err = filepath.Abs(dest)
	if err != nil {
		return res, err
	}
	created, err := s.prepareBackupDest(dest)
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			removeBackup(dest, created)
		}
	}()
	s.removeStaleStaging()
	staging, err := os.MkdirTemp(s.dir, backupStaging)
	if err != nil {
		return res, fmt.Errorf("staging the backup: %w", err)
	}
	defer os.RemoveAll(staging)

	head, err := s.checkpoint(filepath.Join(staging, PebbleDir))
	if err != nil {
		return res, fmt.Errorf("checkpoint: %w", err)
	}
	res.HeadSeq = head.Seq
	if err := moveOrCopy(ctx, filepath.Join(staging, PebbleDir), filepath.Join(dest, PebbleDir), opts.Progress); err != nil {
		return res, err
	}
	// Pebble made the checkpoint's directory with the default mode; the
	// backup is as private as the data dir, whatever dest's mode.
	if err := os.Chmod(filepath.Join(dest, PebbleDir), 0o700); err != nil {
		return res, err
	}
	if head.Seq > 0 {
		if err := writeHeadMark(dest, headMark{Seq: head.Seq, Hash: hex.EncodeToString(head.Hash[:])}); err != nil {
			return res, fmt.Errorf("writing the backup's head mark: %w", err)
		}
	}
	if opts.WithMasterKey {
		key, err := opts.MasterKey, error(nil)
		if key == nil {
			key, err = os.ReadFile(filepath.Join(s.dir, MasterKeyFile))
		}
		switch {
		case err == nil:
			if err := writeFileSync(filepath.Join(dest, MasterKeyFile), key, 0o600); err != nil {
				return res, fmt.Errorf("copying %s: %w", MasterKeyFile, err)
			}
			res.MasterKeyIncluded = true
		case !errors.Is(err, fs.ErrNotExist):
			return res, fmt.Errorf("reading %s: %w", MasterKeyFile, err)
		}
	}
	if err := syncDir(dest); err != nil {
		return res, err
	}
	// Stopped during the check (Ctrl-C, the client gone): nothing is left
	// in dest, as for a copy stopped earlier, and at once: the check stops
	// too, rather than reading the whole copy first.
	if err := checkBackup(ctx, dest, head, opts.Registry, opts.Check); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Bytes, err = dirSize(dest)
	return res, err
}

// checkpoint writes Pebble's files to dir with the fence held, and returns
// the head of the log they hold.
func (s *Store) checkpoint(dir string) (Record, error) {
	s.fence.Lock()
	defer s.fence.Unlock()
	head, err := s.readHead()
	if err != nil {
		return head, err
	}
	return head, s.db.Checkpoint(dir)
}

// prepareBackupDest refuses a destination in the data dir or with files in
// it, and creates it (mode 0700) if missing; created says it did.
func (s *Store) prepareBackupDest(dest string) (created bool, err error) {
	data, err := filepath.Abs(s.dir)
	if err != nil {
		return false, err
	}
	data, dst := resolved(data), resolved(dest)
	if dst == data || strings.HasPrefix(dst, data+string(filepath.Separator)) {
		return false, fmt.Errorf("%w %s is inside the data dir %s: a backup must survive losing the data dir", ErrBackupDest, dest, s.dir)
	}
	entries, err := os.ReadDir(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dest, 0o700); err != nil {
			return false, fmt.Errorf("creating %s: %w", dest, err)
		}
		return true, nil
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, syscall.ENOTDIR) {
			return false, fmt.Errorf("%w %s is a file, not a directory", ErrBackupDest, dest)
		}
		return false, fmt.Errorf("reading %s: %w", dest, err)
	case len(entries) > 0:
		return false, fmt.Errorf("%w %s is not empty: a backup goes into a new or empty directory", ErrBackupDest, dest)
	}
	return false, nil
}

// resolved returns path with symbolic links resolved as far as it exists.
func resolved(path string) string {
	dir, rest := path, ""
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// removeBackup undoes a failed backup: dest itself if Backup created it,
// otherwise what it put there.
func removeBackup(dest string, created bool) {
	if created {
		os.RemoveAll(dest)
		return
	}
	for _, name := range []string{PebbleDir, HeadMarkFile, MasterKeyFile} {
		os.RemoveAll(filepath.Join(dest, name))
	}
}

// removeStaleStaging removes staging dirs left by a backup that was
// interrupted (the process died); backupMu is held.
func (s *Store) removeStaleStaging() {
	stale, _ := filepath.Glob(filepath.Join(s.dir, backupStaging))
	for _, dir := range stale {
		os.RemoveAll(dir)
	}
}

// moveOrCopy renames the directory src to dst, or copies its files when
// dst is on another file system.
func moveOrCopy(ctx context.Context, src, dst string, progress func(done, total int64)) error {
	err := os.Rename(src, dst)
	if err == nil {
		return syncDir(filepath.Dir(dst))
	}
	if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("moving the checkpoint to %s: %w", dst, err)
	}
	return copyDir(ctx, src, dst, progress)
}

// copyDir copies the regular files of src (Pebble's directory is flat)
// into the new directory dst, durably, until ctx ends.
func copyDir(ctx context.Context, src, dst string, progress func(done, total int64)) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("checkpoint holds %s, which is not a file", e.Name())
		}
		total += info.Size()
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	counter := &copyCounter{ctx: ctx, total: total, progress: progress}
	if progress != nil {
		progress(0, total)
	}
	for _, e := range entries {
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), counter); err != nil {
			return fmt.Errorf("copying %s: %w", e.Name(), err)
		}
	}
	if progress != nil {
		progress(counter.done, total)
	}
	return syncDir(dst)
}

// copyCounter reports bytes copied so far, and stops the copy when ctx
// ends.
type copyCounter struct {
	ctx         context.Context
	done, total int64
	progress    func(done, total int64)
}

func (c *copyCounter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	c.done += int64(len(p))
	if c.progress != nil {
		c.progress(c.done, c.total)
	}
	return len(p), nil
}

func copyFile(src, dst string, counter *copyCounter) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(io.MultiWriter(out, counter), in, buf); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkBackup opens the backup's store, which also gives it the lock file
// every data dir has, and checks that it ends at head.
func checkBackup(ctx context.Context, dest string, head Record, reg *Registry, check func(*Log) error) (err error) {
	// Read only: opening writes no table, so a file system with room for
	// the copy and not for more fails nothing here, and leaves no open
	// behind that retries a flush in the server for ever.
	cp, err := OpenStore(dest, StoreOptions{Create: true, ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("the backup does not open: %w", err)
	}
	defer func() {
		if cerr := cp.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("the backup does not read: %w", cerr)
		}
	}()
	got, err := cp.readHead()
	if err != nil {
		return fmt.Errorf("the backup does not read: %w", err)
	}
	if got.Seq != head.Seq || got.Hash != head.Hash {
		return fmt.Errorf("the backup ends at seq %d, not at the checkpoint's head %d", got.Seq, head.Seq)
	}
	if reg == nil {
		return nil
	}
	l, err := OpenLog(cp, Options{Registry: reg, IDs: NewIDs(time.Now)})
	if err != nil {
		return fmt.Errorf("the backup's log does not open: %w", err)
	}
	defer l.Close()
	if _, err := l.VerifyContext(ctx, nil); err != nil {
		return fmt.Errorf("the backup's hash chain does not verify, so the data dir's does not either "+
			"(`demosvc log verify` names the first bad record): %w", err)
	}
	if check != nil {
		if err := check(l); err != nil {
			return fmt.Errorf("the backup is of a data dir serve would refuse (`demosvc log verify` says more): %w", err)
		}
	}
	return nil
}

// dirSize sums the sizes of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
