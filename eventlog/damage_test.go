package eventlog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flushed appends n records and flushes them into an SST of their own.
func (h *harness) flushed(n int) {
	h.t.Helper()
	h.append(n)
	if err := h.store.db.Flush(); err != nil {
		h.t.Fatal(err)
	}
}

// ssts returns the data dir's SST files, oldest first.
func ssts(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, PebbleDir, "*.sst"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no SST in %s (%v)", dir, err)
	}
	return names
}

// flipBytes damages a file the way a failing disk does: a few bytes of a
// data block change, and its checksum no longer matches.
func flipBytes(t *testing.T, name string, at int) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for i := at; i < at+8 && i < len(b); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestADamagedSSTIsAnErrorNamingItsSeqsNotAPanic(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.flushed(20) // seqs 1..20 in the first SST
	h.flushed(20) // seqs 21..40 in the second
	h.close()
	flipBytes(t, ssts(t, dir)[0], 100)

	h = openHarness(t, dir) // the head is in the undamaged SST
	n, err := h.log.Verify()
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify = %d, %v; want a VerifyError", n, err)
	}
	if ve.Seq != 1 || !strings.Contains(ve.Reason, "seqs 1 to 20") || !strings.Contains(ve.Reason, ".sst") {
		t.Errorf("Verify named seq %d: %s; want seq 1 and the damaged file with seqs 1 to 20", ve.Seq, ve.Reason)
	}
	if d := h.store.Damage(); d == nil || d.FromSeq != 1 || d.ToSeq != 20 {
		t.Errorf("Damage() = %+v, want seqs 1 to 20", d)
	}

	// The background verification finds the same break.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = h.log.VerifyFollow(ctx, func(uint64) {})
	if !errors.As(err, &ve) || ve.Seq != 1 {
		t.Errorf("VerifyFollow = %v, want a VerifyError at seq 1", err)
	}
}

func TestADamagedHeadSSTFailsOpenWithErrDamaged(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.flushed(20)
	h.close()
	flipBytes(t, ssts(t, dir)[0], 100)

	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	var ve *VerifyError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &ve) || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("OpenLog = %v; want ErrDamaged with a VerifyError and the advice to restore", err)
	}
}

// openAfterDamagingTheWAL flips bytes of each of dir's WAL files at the
// offset at gives for its size (files under 300 bytes are left alone),
// then opens the store and the log. It returns nil when the store refused
// to open as damaged, else what OpenLog returned.
func openAfterDamagingTheWAL(t *testing.T, dir string, at func(size int64) int64) error {
	t.Helper()
	wals, err := filepath.Glob(filepath.Join(dir, PebbleDir, "*.log"))
	if err != nil || len(wals) == 0 {
		t.Fatalf("no WAL (%v)", err)
	}
	for _, w := range wals {
		if fi, err := os.Stat(w); err == nil && fi.Size() > 300 {
			flipBytes(t, w, int(at(fi.Size())))
		}
	}
	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("OpenStore = %v; want success or ErrDamaged", err)
		}
		return nil
	}
	t.Cleanup(func() { store.Close() })
	_, err = OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	if err == nil {
		t.Fatal("OpenLog of a log whose WAL lost records succeeded")
	}
	return err
}

func TestADamagedWALIsNotSilentlyShorter(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(10)
	h.close() // the records are only in the WAL; the head mark names seq 10
	err := openAfterDamagingTheWAL(t, dir, func(size int64) int64 { return min(200, size-100) })
	if err == nil {
		return // the store refused to open, as damaged
	}
	var ve *VerifyError
	if !errors.Is(err, ErrDamaged) || !errors.As(err, &ve) || !strings.Contains(err.Error(), "held seq 10 when it was last closed") {
		t.Fatalf("OpenLog after the WAL lost records = %v; want ErrDamaged naming the lost head", err)
	}
}

// TestADamagedWALAfterACrashIsNotSilentlyShorter: with the mark kept
// moving as a server keeps it, records acknowledged after the last clean
// close and then lost with a damaged WAL, after a crash, are noticed.
func TestADamagedWALAfterACrashIsNotSilentlyShorter(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(5)
	if err := h.log.MarkHead(); err != nil { // a snapshot's, or the last close's
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.log.KeepHeadMarked(ctx, time.Millisecond, func(err error) { t.Errorf("marking the head: %v", err) })
	}()
	h.append(50)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := readHeadMark(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.Seq == 55 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the head mark names seq %d, want 55", m.Seq)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	// A crash: the store goes without the log's close, which would mark
	// the head itself.
	h.store.Close()
	h.store, h.log = nil, nil
	err := openAfterDamagingTheWAL(t, dir, func(size int64) int64 { return size / 2 })
	if err == nil {
		return // the store refused to open, as damaged
	}
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "held seq 55") {
		t.Fatalf("OpenLog after the WAL lost records acknowledged since the last close = %v; want ErrDamaged naming seq 55", err)
	}
}

func TestVerifyFollowReportsProgressAndFollowsNewRecords(t *testing.T) {
	h := openHarness(t, "")
	h.append(5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress := make(chan uint64, 16)
	done := make(chan error, 1)
	go func() { done <- h.log.VerifyFollow(ctx, func(n uint64) { progress <- n }) }()
	want := func(seq uint64) {
		t.Helper()
		for {
			select {
			case n := <-progress:
				if n == seq {
					return
				}
				if n > seq {
					t.Fatalf("verified %d, expected to stop at %d", n, seq)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("verification never reached seq %d", seq)
			}
		}
	}
	want(5)
	h.append(3)
	want(8)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("VerifyFollow = %v, want context.Canceled", err)
	}
}

// noteWithExtra is note with one more field: a record written through it
// holds a payload that note's registry does not decode (unknown fields are
// refused), under a hash chain that is intact.
type noteWithExtra struct {
	Text  string `json:"text"`
	N     int    `json:"n"`
	Extra string `json:"extra,omitempty"`
}

func (noteWithExtra) Validate() error { return nil }

func TestVerifyDecodesEveryPayloadItFindsAtStart(t *testing.T) {
	dir := t.TempDir()
	store, err := OpenStore(dir, StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	wider := NewRegistry()
	Register[noteWithExtra](wider, "note", 1)
	log, err := OpenLog(store, Options{Registry: wider, IDs: NewSeededIDs(FixedClock(testTime), 1)})
	if err != nil {
		t.Fatal(err)
	}
	evs := []Event{
		{Account: "acc_1", Actor: "cli", Payload: noteWithExtra{Text: "fine"}},
		{Account: "acc_1", Actor: "cli", Payload: noteWithExtra{Text: "odd", Extra: "x"}},
	}
	if _, err := appendTx(log, evs); err != nil {
		t.Fatal(err)
	}
	log.Close()
	store.Close()

	h := openHarness(t, dir) // note's registry: seq 2's payload has a field it does not know
	var ve *VerifyError
	if n, err := h.log.Verify(); !errors.As(err, &ve) || ve.Seq != 2 || !strings.Contains(ve.Reason, "payload of note v1") {
		t.Fatalf("Verify = %d, %v; want a VerifyError at seq 2 naming the payload", n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = h.log.VerifyFollow(ctx, func(verified uint64) {
		if verified >= 2 {
			cancel() // past seq 2 without finding it
		}
	})
	if !errors.As(err, &ve) || ve.Seq != 2 || !strings.Contains(ve.Reason, "payload of note v1") {
		t.Errorf("VerifyFollow = %v, want a VerifyError at seq 2 naming the payload", err)
	}
}

// An export that meets a damaged table ends on a whole line: the records
// before the damage are written out in full and the error is returned, so
// that the error line the admin socket sends after them is a line of its
// own, which the CLI reports (exit 1), not the tail of a half record.
func TestAnExportStoppedByDamageEndsOnAWholeLine(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.flushed(1000) // more JSON than the export's 64 KiB buffer
	h.flushed(20)   // damaged below
	h.flushed(20)   // the head, whole, so that the store opens
	h.close()
	flipBytes(t, ssts(t, dir)[1], 100)

	h = openHarness(t, dir)
	var out strings.Builder
	n, err := h.log.Export(&out, 1)
	if err == nil {
		t.Fatalf("Export = %d records and no error; want the damage", n)
	}
	if out.Len() == 0 || !strings.HasSuffix(out.String(), "\n") {
		t.Fatalf("Export wrote %d bytes ending %q; want whole lines", out.Len(), out.String()[max(0, out.Len()-40):])
	}
	if lines := strings.Count(out.String(), "\n"); lines != n {
		t.Errorf("Export wrote %d lines for %d records", lines, n)
	}
	// The error says what the damage is, as a reader should see it.
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "seqs 1001 to 1020") ||
		strings.Contains(err.Error(), "carrier") || !strings.Contains(err.Error(), "log verify") {
		t.Errorf("the export's error: %v; want ErrDamaged naming the seqs and log verify, without Pebble's carrier", err)
	}
}

// TestAHeadMarkThatIsNotJSONIsDamage: a cut or garbled log-head.json is
// reported as damage, with the advice, not as a bare JSON error.
func TestAHeadMarkThatIsNotJSONIsDamage(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(3)
	h.close()
	if err := os.WriteFile(filepath.Join(dir, HeadMarkFile), []byte(`{"seq":3,"ha`), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, err = OpenLog(store, Options{Registry: testRegistry(), IDs: NewIDs(time.Now)})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "restore the data dir from a backup") {
		t.Fatalf("OpenLog with a cut head mark = %v; want ErrDamaged with the advice", err)
	}
}

// TestOpeningRemovesAHeadMarkLeftHalfWritten: the temporary file of a
// mark whose writing a crash cut short is removed when the log opens.
func TestOpeningRemovesAHeadMarkLeftHalfWritten(t *testing.T) {
	dir := t.TempDir()
	h := openHarness(t, dir)
	h.append(2)
	h.close()
	tmp := filepath.Join(dir, HeadMarkFile+".123456")
	if err := os.WriteFile(tmp, []byte(`{"seq":2,"ha`), 0o600); err != nil {
		t.Fatal(err)
	}
	h = openHarness(t, dir)
	defer h.close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the half-written mark %s after the log opened: %v; want it removed", tmp, err)
	}
}
