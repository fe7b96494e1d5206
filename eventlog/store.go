package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/time/rate"
)

// PebbleDir is the directory inside the data dir that holds Pebble's files.
const PebbleDir = "pebble"

// ErrLocked reports a data dir that another process has open.
var ErrLocked = errors.New("data dir is in use by another process")

// ErrDamaged reports storage that Pebble found corrupted: a checksum
// failed in one of its files. The data dir must be restored from a backup.
var ErrDamaged = errors.New("the data dir's storage is damaged")

// ErrNotWritable reports a data dir this process may not write to: a
// read-only file system, or files owned by another user.
var ErrNotWritable = errors.New("data dir is not writable")

// ErrNoDataDir reports a data dir that does not exist (or holds no store)
// when the caller asked not to create one.
var ErrNoDataDir = errors.New("no data dir")

// StoreOptions configures OpenStore.
type StoreOptions struct {
	// Create makes the data dir (mode 0700) and the store if missing.
	Create bool
	// FS replaces the real filesystem, to inject faults in tests.
	FS vfs.FS
	// Logger receives Pebble's own messages. Nil discards informational
	// ones and sends errors to slog's default logger.
	Logger *slog.Logger
	// ReadOnly opens the store to read it only: the WAL is replayed into
	// memory, never flushed to a table, so opening writes nothing but the
	// lock file (a backup's check, which must not leave an open that
	// cannot end behind in the server when its file system is full).
	ReadOnly bool
}

// Store is the Pebble database of one data dir. The log, snapshots and
// delivery state all live in it, each in its own keyspace.
//
// Pebble makes a batch readable before its fsync returns. The log bounds its
// readers by the durable seq; the bookkeeping keyspaces are bounded by a
// fence instead: every commit holds it shared for its whole Commit(Sync), so
// commits still share fsyncs, and a bookkeeping read takes it exclusively
// just long enough to pin a Pebble snapshot. No commit is in flight at that
// moment, so a read sees exactly the writes whose fsync has returned.
type Store struct {
	db     *pebble.DB
	lock   *pebble.Lock
	dir    string
	fsys   vfs.FS
	fence  sync.RWMutex
	logger *slog.Logger
	plog   *pebbleLogger
	damage atomic.Pointer[Damage]
}

// Damage is a part of the store Pebble found corrupted while reading it: a
// file whose checksum failed, and the range of keys it holds.
type Damage struct {
	File string
	// FromSeq and ToSeq are the log seqs the damaged file may hold; both
	// are 0 when it holds none of the log.
	FromSeq, ToSeq uint64
	Detail         string
}

func (d *Damage) Error() string {
	where := "bookkeeping keys"
	switch {
	case d.FromSeq != 0 && d.ToSeq == ^uint64(0):
		// The file holds the log from FromSeq on and keys past the log.
		where = fmt.Sprintf("seqs %d and later, and bookkeeping keys", d.FromSeq)
	case d.FromSeq != 0:
		where = fmt.Sprintf("seqs %d to %d", d.FromSeq, d.ToSeq)
	}
	return fmt.Sprintf("storage damage in %s (%s): %s", d.File, where, d.Detail)
}

// Damage returns the last damage Pebble reported, or nil.
func (s *Store) Damage() *Damage { return s.damage.Load() }

// noteDamage records what Pebble reports instead of letting its default
// handler end the process: the read that found it fails with an error, and
// the caller says what it means.
func (s *Store) noteDamage(info pebble.DataCorruptionInfo) {
	d := &Damage{File: info.Path, Detail: fmt.Sprint(info.Details)}
	if from, ok := seqFromKey(info.Bounds.Start); ok {
		d.FromSeq = from
		d.ToSeq = ^uint64(0)
		if to, ok := seqFromKey(info.Bounds.End.Key); ok {
			d.ToSeq = to
		}
	}
	s.damage.Store(d)
	s.logger.Error("storage damage found", "file", d.File, "from_seq", d.FromSeq, "to_seq", d.ToSeq, "detail", d.Detail)
}

// HoldsStore reports whether dataDir holds a store (its lock file), without
// opening it.
func HoldsStore(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, PebbleDir, "LOCK"))
	return err == nil
}

// NoStoreError is the ErrNoDataDir error for dataDir, saying how to create
// a store there.
func NoStoreError(dataDir string) error {
	return fmt.Errorf("%w: %s holds no demosvc store (run `demosvc serve --data %s` to create one)", ErrNoDataDir, dataDir, dataDir)
}

// OpenStore opens the store of dataDir, holding Pebble's directory lock
// until Close. It returns ErrLocked if another process has it open and
// ErrNoDataDir if it does not exist and opts.Create is false.
func OpenStore(dataDir string, opts StoreOptions) (s *Store, err error) {
	dir := filepath.Join(dataDir, PebbleDir)
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.Default
	}
	if _, statErr := fsys.Stat(filepath.Join(dir, "LOCK")); statErr != nil {
		if fi, err := fsys.Stat(dataDir); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("data dir %s is a file, not a directory", dataDir)
		}
		if !errors.Is(statErr, fs.ErrNotExist) {
			return nil, fmt.Errorf("data dir %s: %w", dataDir, statErr)
		}
		if !opts.Create {
			return nil, NoStoreError(dataDir)
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil && opts.FS == nil {
			return nil, fmt.Errorf("creating data dir: %w", err)
		}
		if err := fsys.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating data dir: %w", err)
		}
	}
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		return nil, lockError(dataDir, err)
	}
	abandoned := false // the lock is the abandoned open's to release
	defer func() {
		// Pebble reports some damage by panicking; a damaged data dir is an
		// error for the caller to explain, not a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("opening data dir %s: %v", dataDir, r)
		}
		if err != nil && !abandoned {
			lock.Close()
		}
	}()
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s = &Store{lock: lock, dir: dataDir, fsys: fsys, logger: logger, plog: newPebbleLogger(logger, time.Now)}
	// Opening replays the WAL into a memtable and flushes it. Pebble
	// retries a failed flush at once and for ever (a full disk: a new
	// empty table file each time, the CPU busy), and Open waits for it:
	// the first flush that fails while opening ends the open with its
	// error instead, and the open left behind releases what it holds if it
	// ever ends.
	flushFailed := make(chan error, 1)
	listener := &pebble.EventListener{
		DataCorruption: s.noteDamage,
		FlushEnd: func(info pebble.FlushInfo) {
			// Pebble reports a flush with nothing to write as one that
			// failed with its (unexported) errEmptyTable.
			if info.Err != nil && info.Err.Error() != "pebble: empty table" {
				select {
				case flushFailed <- info.Err:
				default:
				}
			}
		},
	}
	opened := make(chan openResult, 1)
	go func() {
		opened <- openPebble(dir, &pebble.Options{
			FS:                    fsys,
			Lock:                  lock,
			ErrorIfNotExists:      !opts.Create,
			CacheSize:             blockCacheSize,
			MemTableSize:          memTableSize,
			L0CompactionThreshold: l0CompactionThreshold,
			L0StopWritesThreshold: 4 * l0CompactionThreshold,
			// A Replacement's excise needs virtual tables, and this format lets an
			// excise that meets keys still in the memtable wait for their
			// flush without holding up commits. An older store is upgraded
			// when it opens (one way: demosvc builds older than this one use
			// the same Pebble, which reads it).
			FormatMajorVersion: pebble.FormatFlushableIngestExcises,
			Logger:             s.plog,
			EventListener:      listener,
			ReadOnly:           opts.ReadOnly,
		})
	}()
	var db *pebble.DB
	select {
	case r := <-opened:
		db, err = r.db, r.err
	case ferr := <-flushFailed:
		abandoned = true
		go func() {
			if r := <-opened; r.db != nil {
				r.db.Close()
			}
			lock.Close()
		}()
		return nil, fmt.Errorf("opening data dir %s: writing its recovered log to a table failed: %w", dataDir, ferr)
	}
	if err != nil {
		if errors.Is(err, pebble.ErrCorruption) {
			return nil, fmt.Errorf("%w (%v): restore %s from a backup", ErrDamaged, err, dataDir)
		}
		return nil, fmt.Errorf("opening data dir %s: %w", dataDir, err)
	}
	// Whatever the last process wrote to the WAL without syncing is visible
	// now; sync it so that nothing we serve from it can be lost later.
	if opts.ReadOnly {
		s.db = db
		return s, nil
	}
	if err := db.LogData(nil, pebble.Sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening data dir %s: %w", dataDir, err)
	}
	s.db = db
	return s, nil
}

type openResult struct {
	db  *pebble.DB
	err error
}

// openPebble is pebble.Open, with a panic (Pebble reports some damage by
// panicking) an error: a damaged data dir is an error for the caller to
// explain, not a crash.
func openPebble(dir string, opts *pebble.Options) (r openResult) {
	defer func() {
		if p := recover(); p != nil {
			r = openResult{err: fmt.Errorf("%v", p)}
		}
	}()
	db, err := pebble.Open(dir, opts)
	return openResult{db, err}
}

// blockCacheSize is Pebble's block cache. Pebble charges its memtables
// (two while one flushes) to the same cache, so its default of 8 MiB with
// 4 MiB memtables left no room for blocks at all: every new iterator (the
// delivery loops' and the chain verification's reads of the log's tail, one
// per commit) read and decompressed its blocks again. 64 MiB leaves at
// least 32 MiB for blocks beside two memtables.
const blockCacheSize = 64 << 20

// memTableSize is Pebble's memtable, 16 MiB rather than its default 4 MiB.
// The delivery keyspace sorts before the log, so every flush that holds
// deliveries and log records makes an L0 table spanning the whole log, and
// its compaction into the base level rewrites every base table in between:
// a cost per flush that grows with the log. A memtable four times larger
// flushes a quarter as often (a delivery's pending and final versions
// also meet in one memtable more often, and only the last is flushed);
// a simulation of 600,000 sessions with deliveries compacted 310 MB
// instead of 745 MB and ran in half the time.
const memTableSize = 16 << 20

// l0CompactionThreshold is how many sublevels level 0 holds before it is
// compacted into the base level: 12, not Pebble's default of 4 (writes
// stall at four times as many, not three). A write of the delivery state
// touches several key ranges of a webhook (attempts, cursor, deliveries,
// the event index), so a flush leaves at least one level-0 table that
// spans the older deliveries in between, and each compaction that takes
// it rewrites those base-level tables. Letting three times as many flushes
// gather shares one such rewrite among them: over a growth run to a
// million deliveries, 839–900 instead of 1,248–1,631 bytes compacted a
// request (BenchmarkCreateAsDeliveriesGrow, compacted-B/req). Reads pay
// little for the deeper level 0: every read the API serves comes from
// memory, and the log is read by iterators over its tail.
const l0CompactionThreshold = 12

// lockError tells apart the two reasons Pebble's directory lock fails:
// another process holds it (the lock call itself refuses), or the lock file
// cannot be opened for writing at all (a read-only file system or another
// user's files), which no waiting will fix.
func lockError(dataDir string, err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		why := "permission denied"
		if errors.Is(err, syscall.EROFS) {
			why = "read-only file system"
		} else if !errors.Is(err, fs.ErrPermission) {
			why = pathErr.Err.Error()
		}
		return fmt.Errorf("%w: %s (%s): demosvc needs to write its lock file, log and snapshots there", ErrNotWritable, dataDir, why)
	}
	return fmt.Errorf("%w: %s", ErrLocked, dataDir)
}

// Flush writes Pebble's memtable to an SST file, so that everything
// committed so far is in table files as well as in the WAL.
func (s *Store) Flush() error { return s.db.Flush() }

// DiskUsage flushes the memtable and estimates the bytes on disk of the
// keys in a keyspace (KeyspaceLog, KeyspaceDelivery, …), compressed, for
// capacity figures.
func (s *Store) DiskUsage(keyspace byte) (uint64, error) {
	if err := s.db.Flush(); err != nil {
		return 0, err
	}
	return s.db.EstimateDiskUsage([]byte{keyspace}, []byte{keyspace + 1})
}

// StoreStats are the storage engine's figures an operator watches: what
// is on disk, what flushes and compactions have written since the store
// opened (the storage's own write load, beside what commits write), and
// how far compactions are behind.
type StoreStats struct {
	DiskBytes      uint64 // tables, WAL and the engine's other files
	FlushedBytes   uint64 // table bytes written by memtable flushes
	CompactedBytes uint64 // table bytes written by compactions
	Compactions    int64
	CompactionDebt uint64 // bytes compactions estimate they still have to write
	L0Tables       int64  // level 0's tables: many slow reads, and 4 × l0CompactionThreshold sublevels of them stall writes
	Errors         uint64 // errors Pebble reported (failed flushes, compactions, file removals), logged or not
}

// Stats returns the store's StoreStats now.
func (s *Store) Stats() StoreStats {
	m := s.db.Metrics()
	st := StoreStats{DiskBytes: m.DiskSpaceUsage(), Compactions: m.Compact.Count,
		CompactionDebt: m.Compact.EstimatedDebt, L0Tables: m.Levels[0].TablesCount, Errors: s.plog.errors.Load()}
	for _, l := range m.Levels {
		st.FlushedBytes += l.TableBytesFlushed
		st.CompactedBytes += l.TableBytesCompacted
	}
	return st
}

// Dir returns the data dir.
func (s *Store) Dir() string { return s.dir }

// Close closes Pebble and releases the lock.
func (s *Store) Close() error {
	err := s.db.Close()
	return errors.Join(err, s.lock.Close())
}

// GetMeta returns the bookkeeping value stored under name.
func (s *Store) GetMeta(name string) ([]byte, bool, error) {
	return s.Get(append([]byte{prefixMeta}, name...))
}

// PutMeta durably stores a bookkeeping value under name.
func (s *Store) PutMeta(name string, value []byte) error {
	return s.WriteSync([]Put{{Key: append([]byte{prefixMeta}, name...), Value: value}}, nil, nil)
}

// Get returns the value stored under a bookkeeping key.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	return s.AppendValue(nil, key)
}

// AppendValue appends the value stored under a bookkeeping key to dst and
// returns the result (dst unchanged when there is none): reading a large
// value in parts copies it once.
func (s *Store) AppendValue(dst, key []byte) ([]byte, bool, error) {
	if len(key) == 0 || key[0] == prefixLog {
		return dst, false, fmt.Errorf("get of %q: not a bookkeeping key", key)
	}
	s.fence.Lock()
	defer s.fence.Unlock()
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, err
	}
	defer closer.Close()
	return append(dst, v...), true, nil
}

// WriteSync writes puts and deletes the keys in [delFrom, delTo) in one
// synced batch, outside the log. It is for bookkeeping keyspaces only.
func (s *Store) WriteSync(puts []Put, delFrom, delTo []byte) error {
	return s.StartWriteSync(puts, delFrom, delTo)()
}

// StartWriteSync is WriteSync that returns as soon as the batch is in the
// WAL, with the wait for its fsync, which must be called once. Writes
// started one after another become durable in that order, and readers see
// none of them before its wait returns; a caller can go on (and start more
// writes) meanwhile, but must not act on the write until then.
func (s *Store) StartWriteSync(puts []Put, delFrom, delTo []byte) (wait func() error) {
	b, err := s.bookkeepingBatch(puts, delFrom, delTo)
	if err != nil {
		return func() error { return err }
	}
	syncWait := s.startSync(b)
	return func() error {
		defer b.Close()
		return syncWait()
	}
}

// bookkeepingBatch is a batch of puts and a range deletion, refused if any
// of it touches the log's keyspace.
func (s *Store) bookkeepingBatch(puts []Put, delFrom, delTo []byte) (*pebble.Batch, error) {
	b := s.db.NewBatch()
	for _, p := range puts {
		if len(p.Key) == 0 || p.Key[0] == prefixLog {
			b.Close()
			return nil, fmt.Errorf("write of %q: not a bookkeeping key", p.Key)
		}
		if err := b.Set(p.Key, p.Value, nil); err != nil {
			b.Close()
			return nil, err
		}
	}
	if delFrom != nil {
		if err := checkRange(delFrom, delTo); err != nil {
			b.Close()
			return nil, err
		}
		if err := b.DeleteRange(delFrom, delTo, nil); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// checkRange refuses a range deletion [from, to) that reaches into the
// log's keyspace.
func checkRange(from, to []byte) error {
	if bytes.Compare(from, []byte{prefixLog + 1}) < 0 && bytes.Compare(to, []byte{prefixLog}) > 0 {
		return fmt.Errorf("delete range [%q, %q): in the log keyspace", from, to)
	}
	return nil
}

// ingestFile is where a Replacement builds its table, in the data dir
// (the same file system as Pebble's, which links it in); a crash can leave
// one behind, which the next Replacement replaces.
const ingestFile = "ingest.sst.tmp"

// A Replacement makes what its puts write, in key order and all under
// one prefix (a bookkeeping keyspace), the whole of what the prefix holds:
// the puts go into one table that Pebble adds to the store, at Commit,
// while it drops every other key under the prefix, in one atomic step,
// durable when Commit returns. It is for bulk data (a snapshot) that must
// not pass through the WAL, where the log's commits would wait behind it
// at their next fsync, and that is produced as it is written: a snapshot
// streams its chunks through one buffer rather than holding all of itself
// in memory first. Until Commit the store is unchanged; Abort (or a failed
// Put or Commit) leaves it so.
//
// Dropping is Pebble's excise: the tables under the prefix are unlinked,
// not rewritten, and the new table lands in the bottom level, overlapping
// nothing. Writing the same data as a plain ingest plus a range deletion
// through the WAL made Pebble rewrite it twice over: the ingested table
// overlapped the one it replaced, and the memtable holding the deletion
// flushed as a table spanning from the log's newest records to the
// snapshot's keys, which every older snapshot table overlapped. An excise
// does not spare what a Pebble snapshot pinned, so nothing may read the
// prefix through Scan while a Replacement commits (a server reads its
// snapshot only when it starts).
type Replacement struct {
	s           *Store
	prefix, end []byte
	name        string
	w           *sstable.Writer
	pace        func(n int) error
	last        []byte // the last key put
	puts        int
	err         error // the first failure: every later call returns it
}

// BeginReplace starts replacing what prefix holds. pace, if set, is
// called with each value's size before it is written; the table's file is
// synced every MiB rather than all at its end. One Replacement at a time:
// they share the table's file name.
func (s *Store) BeginReplace(prefix []byte, pace func(n int) error) (*Replacement, error) {
	end := prefixEnd(prefix)
	if len(prefix) == 0 || prefix[0] == prefixLog || end == nil {
		return nil, fmt.Errorf("replace of %q: not a bookkeeping keyspace", prefix)
	}
	name := filepath.Join(s.dir, ingestFile)
	f, err := s.fsys.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("replace: %w", err)
	}
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: 1 << 20})
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: s.db.TableFormat()})
	return &Replacement{s: s, prefix: bytes.Clone(prefix), end: end, name: name, w: w, pace: pace}, nil
}

// Put adds key, after every key put before and under the prefix, with
// value. The table copies both: the caller may reuse them on return.
func (r *Replacement) Put(key, value []byte) error {
	switch {
	case r.err != nil:
		return r.err
	case !bytes.HasPrefix(key, r.prefix):
		r.fail(fmt.Errorf("replace of %q: key %q is outside it", r.prefix, key))
	case r.puts > 0 && bytes.Compare(r.last, key) >= 0:
		r.fail(fmt.Errorf("replace of %q: keys out of order at %q", r.prefix, key))
	default:
		if r.pace != nil {
			if err := r.pace(len(value)); err != nil {
				r.fail(fmt.Errorf("replace: %w", err))
				return r.err
			}
		}
		if err := r.w.Set(key, value); err != nil {
			r.fail(fmt.Errorf("replace: %w", err))
			return r.err
		}
		r.last = append(r.last[:0], key...)
		r.puts++
	}
	return r.err
}

// Commit makes the puts the whole of what the prefix holds, durably.
func (r *Replacement) Commit() error {
	if r.err == nil && r.puts == 0 {
		r.fail(fmt.Errorf("replace of %q: nothing to write", r.prefix))
	}
	if r.err != nil {
		return r.err
	}
	err := r.w.Close()
	r.w = nil
	if err == nil {
		span := pebble.KeyRange{Start: r.prefix, End: r.end}
		_, err = r.s.db.IngestAndExcise(context.Background(), []string{r.name}, nil, nil, span)
	}
	r.s.fsys.Remove(r.name) // Pebble has linked it by then, or failed
	if err != nil {
		r.err = fmt.Errorf("replace: %w", err)
		return r.err
	}
	r.err = errors.New("replace: already committed")
	return nil
}

// Abort drops the puts; the store stays as it was. It does nothing after
// Commit.
func (r *Replacement) Abort() {
	if r.w != nil {
		r.fail(errors.New("replace: aborted"))
	}
}

// fail records err and drops the table.
func (r *Replacement) fail(err error) {
	r.err = err
	if r.w != nil {
		_ = r.w.Close()
		r.w = nil
		r.s.fsys.Remove(r.name)
	}
}

// prefixEnd is the first key after every key with prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // all 0xff: no key follows them all
}

// durableView pins a snapshot holding every write whose fsync has returned
// and none whose fsync has not. The caller must Close it.
func (s *Store) durableView() *pebble.Snapshot {
	s.fence.Lock()
	defer s.fence.Unlock()
	return s.db.NewSnapshot()
}

// Scan calls fn for every key with prefix, in order. prefix must not be
// the log's keyspace, which Log reads. fn must not keep k or v.
func (s *Store) Scan(prefix []byte, fn func(k, v []byte) error) error {
	return s.ScanFrom(prefix, nil, fn)
}

// ScanFrom is Scan starting at the first key with prefix that sorts at or
// after from, so a keyspace ordered by time can be read from a moment on.
func (s *Store) ScanFrom(prefix, from []byte, fn func(k, v []byte) error) error {
	if len(prefix) == 0 || prefix[0] == prefixLog {
		return fmt.Errorf("scan of %q: not a bookkeeping keyspace", prefix)
	}
	upper := append([]byte(nil), prefix...)
	upper[len(upper)-1]++
	lower := prefix
	if bytes.Compare(from, prefix) > 0 {
		lower = from
	}
	view := s.durableView()
	defer view.Close()
	it, err := view.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// ScanReverse calls fn for keys with prefix that sort before `before` (or
// every key with prefix when before is nil), newest first, until fn returns
// false.
func (s *Store) ScanReverse(prefix, before []byte, fn func(k, v []byte) bool) error {
	if len(prefix) == 0 || prefix[0] == prefixLog {
		return fmt.Errorf("scan of %q: not a bookkeeping keyspace", prefix)
	}
	upper := append([]byte(nil), prefix...)
	upper[len(upper)-1]++
	if before != nil {
		upper = before
	}
	view := s.durableView()
	defer view.Close()
	it, err := view.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.Last(); valid; valid = it.Prev() {
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	return it.Error()
}

// logEmpty reports whether the log keyspace holds no record.
func (s *Store) logEmpty() (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

// pebbleLogger routes Pebble's messages into slog: informational ones at
// debug level, errors at error level. Pebble retries a failing flush or
// compaction at once and reports each failure, so errors are counted
// (StoreStats.Errors) but logged only in bursts of errorBurst, then one a
// second, each line after a gap saying how many it left out.
type pebbleLogger struct {
	l          *slog.Logger
	now        func() time.Time
	errors     atomic.Uint64
	mu         sync.Mutex
	limit      *rate.Limiter
	suppressed uint64
}

// errorBurst is how many of Pebble's errors are logged at once before the
// rest are limited to one a second.
const errorBurst = 10

func newPebbleLogger(l *slog.Logger, now func() time.Time) *pebbleLogger {
	return &pebbleLogger{l: l, now: now, limit: rate.NewLimiter(rate.Every(time.Second), errorBurst)}
}

func (p *pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	p.errors.Add(1)
	p.mu.Lock()
	if !p.limit.AllowN(p.now(), 1) {
		p.suppressed++
		p.mu.Unlock()
		return
	}
	left := p.suppressed
	p.suppressed = 0
	p.mu.Unlock()
	msg := "pebble: " + fmt.Sprintf(format, args...)
	if left > 0 {
		p.l.Error(msg, "errors_not_logged_since_last", left)
		return
	}
	p.l.Error(msg)
}

// Fatalf panics with a pebbleFatal. Pebble calls it when a commit fails
// (a WAL write or fsync error) and then returns as if the commit had
// succeeded, so carrying on would acknowledge a write that is not durable.
// The log's writer recovers the panic and stops accepting writes; anywhere
// else the panic ends the process, which is what Pebble asks for.
func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal: " + msg)
	panic(pebbleFatal(msg))
}

// pebbleFatal is the panic value of pebbleLogger.Fatalf.
type pebbleFatal string

func (f pebbleFatal) Error() string { return string(f) }

// commitSync commits b with a WAL sync, turning Pebble's fatal commit error
// into an ordinary one. It holds the fence shared until the fsync returns.
func (s *Store) commitSync(b *pebble.Batch) (err error) {
	s.fence.RLock()
	defer s.fence.RUnlock()
	defer recoverFatal(&err)
	return b.Commit(pebble.Sync)
}

// recoverFatal, deferred, turns a pebbleFatal panic into *err.
func recoverFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(pebbleFatal)
		if !ok {
			panic(r)
		}
		*err = f
	}
}

// startSync hands b to Pebble's WAL without waiting for its fsync, and
// returns the wait for it. Batches handed over one after another reach
// the WAL, and so the disk, in that order, and Pebble's log writer syncs
// whatever is pending the moment its previous fsync returns: a caller that
// starts the next batch while one syncs keeps the disk busy without a
// goroutine hop between two fsyncs. The fence is held shared until the
// wait returns; the wait must be called, once.
func (s *Store) startSync(b *pebble.Batch) (wait func() error) {
	s.fence.RLock()
	err := func() (err error) {
		defer recoverFatal(&err)
		return s.db.ApplyNoSyncWait(b, pebble.Sync)
	}()
	if err != nil {
		s.fence.RUnlock()
		return func() error { return err }
	}
	return func() error {
		defer s.fence.RUnlock()
		return b.SyncWait()
	}
}
