package eventlog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// A backup taken while records are being appended holds a prefix of the
// log that ends at the head it reports, opens with its own head mark, and
// holds the bookkeeping written before it and none written after.
func TestBackupWhileAppendingHoldsAConsistentPrefix(t *testing.T) {
	h := openHarness(t, "")
	h.append(10)
	cursor := []byte{KeyspaceDelivery, 'w', 0, 'c'}
	if err := h.store.WriteSync([]Put{{Key: cursor, Value: []byte("before")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := appendTx(h.log, []Event{{Account: "acc_1", Actor: "cli", Payload: note{Text: "during"}}}); err != nil {
				t.Errorf("append during the backup: %v", err)
				return
			}
		}
	}()
	dest := filepath.Join(t.TempDir(), "bk")
	res, err := h.store.Backup(context.Background(), dest, BackupOptions{Registry: testRegistry()})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if err := h.store.WriteSync([]Put{{Key: cursor, Value: []byte("after")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	original := h.all()
	if res.HeadSeq < 10 || res.HeadSeq > uint64(len(original)) {
		t.Fatalf("backup head %d, want between 10 and %d", res.HeadSeq, len(original))
	}
	if res.Bytes <= 0 || res.MasterKeyIncluded {
		t.Fatalf("result %+v", res)
	}
	if stale, _ := filepath.Glob(filepath.Join(h.dir, backupStaging)); len(stale) != 0 {
		t.Fatalf("staging dirs left in the data dir: %v", stale)
	}

	cp := openHarness(t, dest) // OpenLog checks the head mark
	if got := cp.log.DurableSeq(); got != res.HeadSeq {
		t.Fatalf("the copy's head is %d, the backup said %d", got, res.HeadSeq)
	}
	if n, err := cp.log.Verify(); err != nil || n != res.HeadSeq {
		t.Fatalf("Verify of the copy: %d, %v", n, err)
	}
	for i, rec := range cp.all() {
		if rec.Hash != original[i].Hash {
			t.Fatalf("seq %d differs from the original's", rec.Seq)
		}
	}
	v, ok, err := cp.store.Get(cursor)
	if err != nil || !ok || string(v) != "before" {
		t.Fatalf("bookkeeping in the copy: %q %v %v, want the value written before the backup", v, ok, err)
	}
	if m, err := readHeadMark(dest); err != nil || m.Seq != res.HeadSeq {
		t.Fatalf("head mark of the copy: %+v %v", m, err)
	}
}

// A destination that holds files, or lies in the data dir, is refused and
// left as it was.
func TestBackupRefusesAnUnusableDestination(t *testing.T) {
	h := openHarness(t, "")
	h.append(1)
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{full, h.dir, filepath.Join(h.dir, "inner")} {
		if _, err := h.store.Backup(context.Background(), dest, BackupOptions{}); !errors.Is(err, ErrBackupDest) {
			t.Fatalf("Backup(%s): %v, want ErrBackupDest", dest, err)
		}
	}
	entries, _ := os.ReadDir(full)
	if len(entries) != 1 {
		t.Fatalf("the refused destination changed: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "inner")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused destination was created: %v", err)
	}
}

// master.key goes into the backup only when asked for, with mode 0600.
func TestBackupIncludesTheMasterKeyOnlyWhenAsked(t *testing.T) {
	h := openHarness(t, "")
	h.append(1)
	key := bytes.Repeat([]byte{7}, MasterKeySize)
	if err := SaveMasterKey(h.dir, key); err != nil {
		t.Fatal(err)
	}
	without := filepath.Join(t.TempDir(), "without")
	if res, err := h.store.Backup(context.Background(), without, BackupOptions{}); err != nil || res.MasterKeyIncluded {
		t.Fatalf("Backup: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(without, MasterKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("master.key in a backup without --with-master-key: %v", err)
	}
	with := filepath.Join(t.TempDir(), "with")
	if res, err := h.store.Backup(context.Background(), with, BackupOptions{WithMasterKey: true}); err != nil || !res.MasterKeyIncluded {
		t.Fatalf("Backup: %+v %v", res, err)
	}
	got, err := os.ReadFile(filepath.Join(with, MasterKeyFile))
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("master.key in the backup: %v", err)
	}
	if info, _ := os.Stat(filepath.Join(with, MasterKeyFile)); info.Mode().Perm() != 0o600 {
		t.Fatalf("master.key mode %v", info.Mode())
	}
}

// On another file system the checkpoint cannot be moved: it is copied,
// and the copy reports its progress in bytes.
func TestBackupToAnotherFileSystemIsCopiedWithProgress(t *testing.T) {
	h := openHarness(t, "")
	h.append(100)
	other := otherFileSystem(t, h.dir)
	dest := filepath.Join(other, "bk")
	var last, calls, total int64
	res, err := h.store.Backup(context.Background(), dest, BackupOptions{Progress: func(done, tot int64) {
		if done < last || (total != 0 && tot != total) {
			t.Errorf("progress went from %d to %d of %d (total was %d)", last, done, tot, total)
		}
		last, total = done, tot
		calls++
	}})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if calls == 0 || last != total || total == 0 {
		t.Fatalf("progress: %d calls, last %d of %d", calls, last, total)
	}
	cp := openHarness(t, dest)
	if cp.log.DurableSeq() != res.HeadSeq || res.HeadSeq != 100 {
		t.Fatalf("copy head %d, backup head %d", cp.log.DurableSeq(), res.HeadSeq)
	}
}

// A copy whose caller went away stops, and leaves nothing behind.
func TestBackupStopsWhenItsCallerGoesAway(t *testing.T) {
	h := openHarness(t, "")
	h.append(100)
	dest := filepath.Join(otherFileSystem(t, h.dir), "bk")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.store.Backup(ctx, dest, BackupOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Backup with its context ended: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stopped backup left %s: %v", dest, err)
	}
	if stale, _ := filepath.Glob(filepath.Join(h.dir, backupStaging)); len(stale) != 0 {
		t.Fatalf("staging dirs left in the data dir: %v", stale)
	}
}

// otherFileSystem returns a temp dir on a file system other than dir's,
// or skips the test when the machine has none (/dev/shm is a tmpfs on
// Linux).
func otherFileSystem(t *testing.T, dir string) string {
	t.Helper()
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat("/dev/shm", &b) != nil || a.Dev == b.Dev {
		t.Skip("no second file system (/dev/shm) to copy a backup to")
	}
	other, err := os.MkdirTemp("/dev/shm", "demosvc-backup-test-")
	if err != nil {
		t.Skipf("/dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	return other
}

// A backup verifies its copy's hash chain, as the admin socket asks: a
// data dir holding a damaged table gives no backup, and says so, where a
// copy that only ends at the right record would pass.
func TestABackupOfADamagedLogFailsAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.flushed(20)
	h.flushed(20) // damaged below
	h.flushed(20) // the head, whole
	h.close()
	flipBytes(t, ssts(t, dir)[1], 100)

	h = openHarness(t, dir)
	dest := filepath.Join(t.TempDir(), "bk")
	if _, err := h.store.Backup(context.Background(), dest, BackupOptions{}); err != nil {
		t.Fatalf("without a registry the copy is only checked to end at the head: %v", err)
	}
	dest = filepath.Join(t.TempDir(), "bk")
	_, err := h.store.Backup(context.Background(), dest, BackupOptions{Registry: testRegistry()})
	if err == nil || !strings.Contains(err.Error(), "hash chain does not verify") {
		t.Fatalf("Backup of a damaged log = %v, want the chain's failure", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed backup left %s (%v)", dest, err)
	}
}

// A backup whose caller is gone by the end (Ctrl-C during the chain's
// verification) leaves nothing, as one stopped while copying does.
func TestABackupStoppedAtItsEndLeavesNothing(t *testing.T) {
	h := openHarness(t, "")
	h.append(10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dest := filepath.Join(t.TempDir(), "bk")
	if _, err := h.store.Backup(ctx, dest, BackupOptions{Registry: testRegistry()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Backup with its caller gone = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stopped backup left %s (%v)", dest, err)
	}
}
