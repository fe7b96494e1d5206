package eventlog

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"demosvc/eventlog/eventlogtest"
)

type note struct {
	Text string `json:"text"`
	N    int    `json:"n"`
}

type secretNote struct {
	Name   string `json:"name"`
	Secret Sealed `json:"secret"`
}

func testRegistry() *Registry {
	r := NewRegistry()
	Register[note](r, "note", 1)
	Register[secretNote](r, "secret.note", 1)
	return r
}

var testTime = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type harness struct {
	t      *testing.T
	dir    string
	faults *eventlogtest.WALFaults
	store  *Store
	log    *Log
}

// openHarness opens a real Pebble store in dir (a new temp dir if empty).
func openHarness(t *testing.T, dir string) *harness {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	h := &harness{t: t, dir: dir}
	fs, faults := eventlogtest.NewFS(nil)
	h.faults = faults
	var err error
	h.store, err = OpenStore(dir, StoreOptions{Create: true, FS: fs})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	h.log, err = OpenLog(h.store, Options{Registry: testRegistry(), IDs: NewSeededIDs(FixedClock(testTime), 1)})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	if h.log != nil {
		h.log.Close()
		h.log = nil
	}
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
}

func (h *harness) append(n int) []Record {
	h.t.Helper()
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{Account: "acc_1", Actor: "cli", Payload: note{Text: "hello", N: i}}
	}
	recs, err := appendTx(h.log, evs)
	if err != nil {
		h.t.Fatalf("append: %v", err)
	}
	return recs
}

// appendTx commits events and puts as one transaction, as the projections
// writer commits a group of one command.
func appendTx(l *Log, events []Event, puts ...Put) ([]Record, error) {
	tx, err := l.Begin()
	if err != nil {
		return nil, err
	}
	recs, err := tx.Add(events, puts...)
	if err != nil {
		tx.Abort()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return recs, nil
}

func (h *harness) all() []Record {
	h.t.Helper()
	var out []Record
	err := h.log.Read(1, 0, func(r *Record) error {
		c := *r
		c.Payload = append([]byte(nil), r.Payload...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		h.t.Fatalf("Read: %v", err)
	}
	return out
}

func TestAppendAssignsContiguousSeqsFromOne(t *testing.T) {
	h := openHarness(t, "")
	recs := h.append(3)
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d: seq = %d, want %d", i, r.Seq, i+1)
		}
		if r.Type != "note" || r.Version != 1 || r.Account != "acc_1" || r.Actor != "cli" || !r.Time.Equal(testTime) {
			t.Errorf("record %d: got %+v", i, r)
		}
		if len(r.ID) != len("evt_")+26 || r.ID[:4] != "evt_" {
			t.Errorf("record %d: id %q is not evt_ + 26 characters", i, r.ID)
		}
	}
	got := h.all()
	if len(got) != 3 {
		t.Fatalf("read %d records, want 3", len(got))
	}
	for i, r := range got {
		if r.ID != recs[i].ID || r.Hash != recs[i].Hash {
			t.Errorf("record %d read back differs: got %s %x, want %s %x", i, r.ID, r.Hash, recs[i].ID, recs[i].Hash)
		}
		v, err := h.log.Registry().Decode(&r)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if n := v.(*note); n.N != i || n.Text != "hello" {
			t.Errorf("record %d payload = %+v", i, n)
		}
	}
	if n, err := h.log.Verify(); err != nil || n != 3 {
		t.Errorf("Verify = %d, %v; want 3, nil", n, err)
	}
}

func TestReadSeqsReadsTheSeqsAskedFor(t *testing.T) {
	h := openHarness(t, "")
	recs := h.append(10)
	var got []uint64
	err := h.log.ReadSeqs([]uint64{2, 3, 7, 10}, func(r *Record) error {
		if r.ID != recs[r.Seq-1].ID {
			t.Errorf("seq %d: record %s, want %s", r.Seq, r.ID, recs[r.Seq-1].ID)
		}
		got = append(got, r.Seq)
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[2 3 7 10]" {
		t.Errorf("ReadSeqs(2, 3, 7, 10) read %v, %v", got, err)
	}
	for _, seqs := range [][]uint64{{3, 11}, {4, 4}, {5, 2}} {
		if err := h.log.ReadSeqs(seqs, func(*Record) error { return nil }); err == nil {
			t.Errorf("ReadSeqs(%v) did not fail", seqs)
		}
	}
	// Runs of consecutive seqs, which it steps through, between jumps.
	got = got[:0]
	err = h.log.ReadSeqs([]uint64{1, 2, 3, 4, 6, 8, 9, 10}, func(r *Record) error {
		if r.ID != recs[r.Seq-1].ID {
			t.Errorf("seq %d: record %s, want %s", r.Seq, r.ID, recs[r.Seq-1].ID)
		}
		got = append(got, r.Seq)
		return nil
	})
	if err != nil || fmt.Sprint(got) != "[1 2 3 4 6 8 9 10]" {
		t.Errorf("ReadSeqs(1-4, 6, 8-10) read %v, %v", got, err)
	}
	// A record missing from a run is named, not stepped over.
	if err := h.store.db.Delete(logKey(9), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for _, seqs := range [][]uint64{{8, 9, 10}, {8, 9}, {9, 10}} {
		err := h.log.ReadSeqs(seqs, func(r *Record) error {
			if r.Seq == 9 || r.Seq == 10 && seqs[0] == 8 {
				t.Errorf("ReadSeqs(%v) passed seq %d", seqs, r.Seq)
			}
			return nil
		})
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("ReadSeqs(%v) over a missing seq 9: %v, want ErrCorrupt", seqs, err)
		}
	}
}

func TestReopenContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	first := h.append(2)
	h.close()
	h = openHarness(t, dir)
	if got := h.log.DurableSeq(); got != 2 {
		t.Fatalf("DurableSeq after reopen = %d, want 2", got)
	}
	more := h.append(1)
	if more[0].Seq != 3 {
		t.Errorf("seq after reopen = %d, want 3", more[0].Seq)
	}
	if n, err := h.log.Verify(); err != nil || n != 3 {
		t.Errorf("Verify = %d, %v; want 3, nil", n, err)
	}
	if first[1].Hash == more[0].Hash {
		t.Error("hash did not change")
	}
}

func TestEventsAndPutsCommitTogether(t *testing.T) {
	h := openHarness(t, "")
	key := append([]byte{prefixMeta}, "idem"...)
	if _, err := appendTx(h.log, []Event{{Payload: note{}}}, Put{Key: key, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	v, ok, err := h.store.GetMeta("idem")
	if err != nil || !ok || string(v) != "v" {
		t.Errorf("GetMeta = %q, %v, %v", v, ok, err)
	}
}

func TestAppendRejectsUnregisteredPayload(t *testing.T) {
	h := openHarness(t, "")
	_, err := appendTx(h.log, []Event{{Payload: struct{}{}}})
	if !errors.Is(err, ErrUnknownType) {
		t.Fatalf("err = %v, want ErrUnknownType", err)
	}
	if h.log.DurableSeq() != 0 {
		t.Error("a refused append advanced the log")
	}
}

func TestFollowDeliversNewRecordsInOrder(t *testing.T) {
	h := openHarness(t, "")
	h.append(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan uint64, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- h.log.Follow(ctx, 2, func(r *Record) error { got <- r.Seq; return nil })
	}()
	h.append(2)
	for want := uint64(2); want <= 4; want++ {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("Follow gave seq %d, want %d", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Follow did not deliver seq %d", want)
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow returned %v, want context.Canceled", err)
	}
}

func TestCloseFailsLaterAppends(t *testing.T) {
	h := openHarness(t, "")
	h.log.Close()
	if _, err := appendTx(h.log, []Event{{Payload: note{}}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	h.log = nil
}

func TestTamperedRecordIsNamedByVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset func(v []byte) int
	}{
		{"payload byte", func(v []byte) int { return len(v) - hashTrailerLen - 2 }},
		{"account byte", func(v []byte) int { return 40 }},
		{"hash byte", func(v []byte) int { return len(v) - 1 }},
		{"framing byte", func(v []byte) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := openHarness(t, "")
			h.append(5)
			v, closer, err := h.store.db.Get(logKey(3))
			if err != nil {
				t.Fatal(err)
			}
			bad := append([]byte(nil), v...)
			closer.Close()
			bad[tc.offset(bad)] ^= 0x01
			if err := h.store.db.Set(logKey(3), bad, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			n, err := h.log.Verify()
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify = %d, %v; want a VerifyError", n, err)
			}
			if ve.Seq != 3 {
				t.Errorf("Verify named seq %d (%s), want 3", ve.Seq, ve.Reason)
			}
			if n != 2 {
				t.Errorf("Verify counted %d good records before the bad one, want 2", n)
			}
		})
	}
}

func TestVerifyNamesAGap(t *testing.T) {
	h := openHarness(t, "")
	h.append(4)
	if err := h.store.db.Delete(logKey(2), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_, err := h.log.Verify()
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Seq != 2 {
		t.Fatalf("Verify = %v, want a VerifyError at seq 2", err)
	}
}

type noteV2 struct {
	Text     string `json:"text"`
	N        int    `json:"n"`
	Language string `json:"language"`
}

func TestOldVersionIsUpcastOnRead(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(1)
	h.close()

	// A later release adds version 2 of "note" with an upcaster.
	reg := NewRegistry()
	Register[note](reg, "note", 1)
	RegisterUpcast(reg, "note", 1, func(v note) noteV2 { return noteV2{Text: v.Text, N: v.N, Language: "en"} })
	Register[noteV2](reg, "note", 2)
	Register[secretNote](reg, "secret.note", 1)

	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log, err := OpenLog(store, Options{Registry: reg, IDs: NewSeededIDs(FixedClock(testTime), 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := appendTx(log, []Event{{Payload: noteV2{Text: "new", Language: "fr"}}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = log.Read(1, 0, func(r *Record) error {
		v, err := reg.Decode(r)
		if err != nil {
			return err
		}
		n, ok := v.(*noteV2)
		if !ok {
			return fmt.Errorf("seq %d decoded as %T, want *noteV2", r.Seq, v)
		}
		got = append(got, fmt.Sprintf("v%d %s/%s", r.Version, n.Text, n.Language))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v1 hello/en", "v2 new/fr"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if n, err := log.Verify(); err != nil || n != 2 {
		t.Errorf("Verify = %d, %v", n, err)
	}
}

func TestSecondOpenOfADataDirIsRefused(t *testing.T) {
	h := openHarness(t, "")
	_, err := OpenStore(h.dir, StoreOptions{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenStore = %v, want ErrLocked", err)
	}
}

func TestOpeningAMissingDataDirWithoutCreateFails(t *testing.T) {
	_, err := OpenStore(t.TempDir()+"/nope", StoreOptions{})
	if !errors.Is(err, ErrNoDataDir) {
		t.Fatalf("OpenStore = %v, want ErrNoDataDir", err)
	}
}

func TestTxnGroupsCommandsAndAbortLeavesNoTrace(t *testing.T) {
	h := openHarness(t, "")
	tx, err := h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	a, err := tx.Add([]Event{{Payload: note{N: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add([]Event{{Payload: struct{}{}}}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Add of an unregistered payload = %v, want ErrUnknownType", err)
	}
	b, err := tx.Add([]Event{{Payload: note{N: 2}}, {Payload: note{N: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Seq != 1 || b[0].Seq != 2 || b[1].Seq != 3 {
		t.Errorf("seqs = %d, %d, %d; want 1, 2, 3 (a failed Add must not use a seq)", a[0].Seq, b[0].Seq, b[1].Seq)
	}
	if h.log.DurableSeq() != 0 {
		t.Error("records are visible before Commit")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if h.log.DurableSeq() != 3 {
		t.Errorf("DurableSeq after Commit = %d, want 3", h.log.DurableSeq())
	}

	tx, err = h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add([]Event{{Payload: note{N: 4}}}); err != nil {
		t.Fatal(err)
	}
	tx.Abort()
	recs := h.append(1)
	if recs[0].Seq != 4 {
		t.Errorf("seq after an aborted txn = %d, want 4", recs[0].Seq)
	}
	if n, err := h.log.Verify(); err != nil || n != 4 {
		t.Errorf("Verify = %d, %v; want 4, nil", n, err)
	}
}

func TestARefusedPutLeavesNoTraceInTheTxn(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	tx, err := h.log.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Add([]Event{{Payload: note{N: 1}}, {Payload: note{N: 2}}}, Put{Key: logKey(99), Value: []byte("x")}); err == nil {
		t.Fatal("a put into the log keyspace was accepted")
	}
	if _, err := tx.Add([]Event{{Payload: note{N: 3}}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h.close()
	h = openHarness(t, dir)
	if got := h.log.DurableSeq(); got != 1 {
		t.Errorf("head after reopen = %d, want 1: the refused call's records reached the batch", got)
	}
	if n, err := h.log.Verify(); err != nil || n != 1 {
		t.Errorf("Verify = %d, %v", n, err)
	}
}

// lockFails is the real file system but for taking the data dir's lock,
// which fails with errno, as opening the lock file would.
func lockFails(errno syscall.Errno) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpLock {
			return &iofs.PathError{Op: "open", Path: op.Path, Err: errno}
		}
		return nil
	}))
}

func TestAReadOnlyDataDirIsNotReportedAsInUse(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.close()

	t.Run("read-only file system", func(t *testing.T) {
		// As root, permission bits do not stop a write and a read-only mount
		// needs privileges, so the file system's answer is injected.
		fs := lockFails(syscall.EROFS)
		_, err := OpenStore(dir, StoreOptions{FS: fs})
		if !errors.Is(err, ErrNotWritable) || errors.Is(err, ErrLocked) {
			t.Fatalf("OpenStore = %v, want ErrNotWritable", err)
		}
		if !strings.Contains(err.Error(), "read-only file system") || !strings.Contains(err.Error(), dir) {
			t.Errorf("message %q does not name the dir and the read-only file system", err)
		}
	})
	t.Run("permission denied, injected", func(t *testing.T) {
		// What the permission bits give a user who is not root, on any
		// machine (the next subtest sets the real bits, which root ignores).
		fs := lockFails(syscall.EACCES)
		_, err := OpenStore(dir, StoreOptions{FS: fs})
		if !errors.Is(err, ErrNotWritable) || errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("OpenStore = %v, want ErrNotWritable naming permission denied", err)
		}
	})
	t.Run("permission bits", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes whatever the permission bits say (the subtest before injects their answer)")
		}
		pebbleDir := filepath.Join(dir, PebbleDir)
		if err := os.Chmod(filepath.Join(pebbleDir, "LOCK"), 0o400); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(pebbleDir, "LOCK"), 0o600) })
		_, err := OpenStore(dir, StoreOptions{})
		if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("OpenStore = %v, want ErrNotWritable naming permission denied", err)
		}
	})
	t.Run("another process holds it", func(t *testing.T) {
		h := openHarness(t, dir)
		defer h.close()
		if _, err := OpenStore(dir, StoreOptions{}); !errors.Is(err, ErrLocked) {
			t.Fatalf("second OpenStore = %v, want ErrLocked", err)
		}
	})
}

func TestBookkeepingReadsNeverSeeAnUnsyncedWrite(t *testing.T) {
	h := openHarness(t, "")
	prefix := []byte{KeyspaceDelivery, 'w'}
	key := append(append([]byte(nil), prefix...), "dlv_1"...)
	for round := range 5 {
		want := fmt.Sprint(round)
		entered, release := h.faults.HoldSyncs()
		defer release()
		wrote := make(chan error, 1)
		go func() { wrote <- h.store.WriteSync([]Put{{Key: key, Value: []byte(want)}}, nil, nil) }()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the write never reached its fsync")
		}
		// The fault is real: Pebble itself shows the write before its fsync
		// returns (once it has applied the batch to the memtable).
		for deadline := time.Now().Add(30 * time.Second); ; runtime.Gosched() {
			v, closer, err := h.store.db.Get(key)
			if err == nil {
				got := string(v)
				closer.Close()
				if got == want {
					break
				}
			}
			if time.Now().After(deadline) {
				release()
				t.Fatalf("round %d: Pebble never showed the write while its fsync was held", round)
			}
		}

		var released atomic.Bool
		type seen struct {
			how, value string
		}
		reads := make(chan seen, 3)
		observe := func(how string, v []byte, ok bool) {
			if ok && string(v) == want && !released.Load() {
				reads <- seen{how, "unsynced " + string(v)}
				return
			}
			reads <- seen{how, string(v)}
		}
		go func() { v, ok, _ := h.store.Get(key); observe("Get", v, ok) }()
		go func() {
			var got []byte
			h.store.Scan(prefix, func(_, v []byte) error { got = append([]byte(nil), v...); return nil })
			observe("Scan", got, got != nil)
		}()
		go func() {
			var got []byte
			h.store.ScanReverse(prefix, nil, func(_, v []byte) bool { got = append([]byte(nil), v...); return false })
			observe("ScanReverse", got, got != nil)
		}()
		// Release the fsync once the readers have either answered or are
		// queued behind the write (the fence then refuses new commits).
		deadline := time.Now().Add(30 * time.Second)
		for len(reads) == 0 {
			if !h.store.fence.TryRLock() {
				break
			}
			h.store.fence.RUnlock()
			if time.Now().After(deadline) {
				t.Fatal("the readers neither answered nor waited for the write")
			}
			runtime.Gosched()
		}
		released.Store(true)
		release()
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		for range 3 {
			select {
			case s := <-reads:
				if strings.HasPrefix(s.value, "unsynced") {
					t.Errorf("round %d: %s returned %s before its fsync returned", round, s.how, s.value)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a reader never answered")
			}
		}
	}
}

// TestRecordTimesNeverGoBackWhenTheClockDoes: after the clock steps back
// a little, a record's time is its predecessor's, not earlier, in the same
// process and after a reopen (the searches by time rely on times in seq
// order); after it steps back by more than maxClockStepBack (a clock that
// was far ahead, corrected), records take the clock's time again, rather
// than carrying every later one into that future.
func TestRecordTimesNeverGoBackWhenTheClockDoes(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	now := testTime
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(to time.Time) { mu.Lock(); now = to; mu.Unlock() }
	open := func() (*Store, *Log) {
		t.Helper()
		store, err := OpenStore(dir, StoreOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		log, err := OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(clock)})
		if err != nil {
			t.Fatal(err)
		}
		return store, log
	}
	ev := []Event{{Account: "acc_1", Actor: "cli", Payload: note{Text: "x"}}}
	appendAt := func(log *Log, clockAt time.Time) time.Time {
		t.Helper()
		set(clockAt)
		recs, err := appendTx(log, ev)
		if err != nil {
			t.Fatal(err)
		}
		return recs[0].Time
	}
	store, log := open()
	first := appendAt(log, testTime)
	if got := appendAt(log, testTime.Add(-30*time.Second)); !got.Equal(first) {
		t.Errorf("after the clock stepped back 30 s, a record's time is %v; want its predecessor's, %v", got, first)
	}
	log.Close()
	store.Close()
	store, log = open()
	defer store.Close()
	defer log.Close()
	if got := appendAt(log, testTime.Add(-20*time.Second)); !got.Equal(first) {
		t.Errorf("after a reopen, a record's time is %v; want the last one's, %v", got, first)
	}
	if got := appendAt(log, testTime.Add(time.Hour)); !got.Equal(testTime.Add(time.Hour)) {
		t.Errorf("with the clock ahead again, a record's time is %v; want the clock's", got)
	}
	if got, want := appendAt(log, testTime.Add(-time.Hour)), testTime.Add(-time.Hour); !got.Equal(want) {
		t.Errorf("after the clock stepped back 2 h, a record's time is %v; want the clock's, %v", got, want)
	}
}

// TestAnOpenWhoseFlushFailsEndsWithTheError: opening a data dir replays
// its WAL and flushes it to a table; on a full disk that flush fails, and
// Pebble retries it at once and for ever while Open waits (serve and every
// command hung, at 100% CPU, ignoring signals). The open now ends with the
// flush's error; once there is room again, the open left behind releases
// the data dir and it opens with every record.
func TestAnOpenWhoseFlushFailsEndsWithTheError(t *testing.T) {
	dir := walOnlyStore(t)
	var full atomic.Bool
	full.Store(true)
	fs := noRoomForTables(&full)
	opened := make(chan error, 1)
	go func() {
		s, err := OpenStore(dir, StoreOptions{FS: fs})
		if s != nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("OpenStore on a full disk = %v, want an error naming the data dir and ENOSPC", err)
		}
	case <-time.After(30 * time.Second):
		full.Store(false) // let the open end, so that the test's dir can go
		t.Fatal("OpenStore on a full disk did not return (Pebble retries the flush for ever)")
	}

	full.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		h2, err := func() (*Store, error) { return OpenStore(dir, StoreOptions{}) }()
		if err == nil {
			h2.Close()
			break
		}
		if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("reopening once there is room: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	h := openHarness(t, dir)
	if n, err := h.log.Verify(); err != nil || n != 20 {
		t.Errorf("after the disk had room again: Verify = %d, %v; want the 20 records", n, err)
	}
}

// A store opened read only (a backup's check) writes no table: on a file
// system with no room for one, it opens and reads every record that is
// in its WAL alone, where a writable open fails (above).
func TestAReadOnlyOpenWritesNoTable(t *testing.T) {
	dir := walOnlyStore(t)
	var full atomic.Bool
	full.Store(true)
	s, err := OpenStore(dir, StoreOptions{FS: noRoomForTables(&full), ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open on a full file system: %v", err)
	}
	defer s.Close()
	l, err := OpenLog(s, Options{Registry: testRegistry(), IDs: NewSeededIDs(FixedClock(testTime), 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, err := l.Verify(); err != nil || n != 20 {
		t.Errorf("read only: Verify = %d, %v; want the 20 records", n, err)
	}
}

// walOnlyStore returns a data dir whose store holds 20 records in its WAL
// only: Close does not flush.
func walOnlyStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(20)
	h.close()
	return dir
}

// noRoomForTables is the real file system, but for writing a table while
// full is set, which fails as on a full disk.
func noRoomForTables(full *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".sst") {
			return &iofs.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
}
