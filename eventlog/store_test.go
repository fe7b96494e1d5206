package eventlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestAppendValueAppendsPartsInOrder reads two stored values into one
// buffer, as a snapshot's chunks are read, and a missing key leaves the
// buffer as it was.
func TestAppendValueAppendsPartsInOrder(t *testing.T) {
	store, err := OpenStore(t.TempDir(), StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a, b := []byte("ma"), []byte("mb")
	if err := store.WriteSync([]Put{{Key: a, Value: []byte("first,")}, {Key: b, Value: []byte("second")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	buf, ok, err := store.AppendValue(buf, a)
	if err != nil || !ok {
		t.Fatalf("first part: ok %v, %v", ok, err)
	}
	buf, ok, err = store.AppendValue(buf, b)
	if err != nil || !ok {
		t.Fatalf("second part: ok %v, %v", ok, err)
	}
	if want := "first,second"; string(buf) != want {
		t.Fatalf("got %q, want %q", buf, want)
	}
	again, ok, err := store.AppendValue(buf, []byte("mmissing"))
	if err != nil || ok || !bytes.Equal(again, buf) {
		t.Fatalf("missing key: ok %v, %v, buffer %q", ok, err, again)
	}
	if _, _, err := store.AppendValue(nil, logKey(1)); err == nil {
		t.Fatal("a log key was read as a bookkeeping key")
	}
}

// recordCounter is a slog handler that keeps the records it is given.
type recordCounter struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *recordCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *recordCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
	return nil
}
func (c *recordCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *recordCounter) WithGroup(string) slog.Handler      { return c }

func (c *recordCounter) errors() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []slog.Record
	for _, r := range c.recs {
		if r.Level == slog.LevelError {
			out = append(out, r)
		}
	}
	return out
}

// TestPebbleErrorsAreCountedAndTheirLogLimited: a burst of Pebble's errors
// logs errorBurst lines, then one a second naming how many it left out,
// and every error is counted.
func TestPebbleErrorsAreCountedAndTheirLogLimited(t *testing.T) {
	rec := &recordCounter{}
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	p := newPebbleLogger(slog.New(rec), func() time.Time { return now })
	for i := 0; i < 100; i++ {
		p.Errorf("background error: %d", i)
	}
	if got := len(rec.errors()); got != errorBurst {
		t.Fatalf("a burst of 100 errors logged %d lines, want %d", got, errorBurst)
	}
	now = now.Add(time.Second)
	p.Errorf("background error: %d", 100)
	p.Errorf("background error: %d", 101)
	lines := rec.errors()
	if len(lines) != errorBurst+1 {
		t.Fatalf("a second later, two errors logged %d lines in all, want %d", len(lines), errorBurst+1)
	}
	last := lines[len(lines)-1]
	var left uint64
	last.Attrs(func(a slog.Attr) bool {
		if a.Key == "errors_not_logged_since_last" {
			left = a.Value.Uint64()
		}
		return true
	})
	if last.Message != "pebble: background error: 100" || left != 90 {
		t.Fatalf("the line after the gap = %q with %d left out, want the 101st error with 90 left out", last.Message, left)
	}
	if got := p.errors.Load(); got != 102 {
		t.Fatalf("counted %d errors, want 102", got)
	}
}

// TestAFailingFlushIsCountedNotLoggedWithoutBound: a flush that cannot
// create its table fails again and again in the background; the store
// counts every failure in its stats and logs fewer lines than failures.
func TestAFailingFlushIsCountedNotLoggedWithoutBound(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") {
			return errors.New("injected: no file handles left")
		}
		return nil
	}))
	rec := &recordCounter{}
	s, err := OpenStore(t.TempDir(), StoreOptions{Create: true, FS: fs, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteSync([]Put{{Key: []byte("ia"), Value: []byte("a value to flush")}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush() }()
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().Errors < 3*errorBurst {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the store counted %d errors of a failing flush, want at least %d", s.Stats().Errors, 3*errorBurst)
		}
		time.Sleep(time.Millisecond)
	}
	fail.Store(false)
	if err := <-flushed; err != nil {
		t.Fatalf("the flush, once tables can be created again: %v", err)
	}
	errs, lines := s.Stats().Errors, len(rec.errors())
	if lines == 0 || uint64(lines) >= errs {
		t.Fatalf("%d failures logged %d error lines, want some but fewer than the failures", errs, lines)
	}
}
