package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lockedBuffer is an output that the flushing goroutine and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestLogSinkKeepsOrderAndFlushes(t *testing.T) {
	out := &lockedBuffer{}
	s := newLogSink(out)
	defer s.Close()
	batched := s.Batched()
	batched.Write([]byte("request 1\n"))
	batched.Write([]byte("request 2\n"))
	// A line written directly goes out at once, after the batched ones.
	s.Write([]byte("warning\n"))
	if got := out.String(); got != "request 1\nrequest 2\nwarning\n" {
		t.Fatalf("after a direct line the output is %q", got)
	}
	// A batched line alone reaches the output by the flush interval.
	batched.Write([]byte("request 3\n"))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasSuffix(out.String(), "request 3\n") {
		if time.Now().After(deadline) {
			t.Fatalf("a batched line was never flushed: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Close writes what waits.
	batched.Write([]byte("request 4\n"))
	s.Close()
	if !strings.HasSuffix(out.String(), "request 4\n") {
		t.Fatalf("Close left a batched line unwritten: %q", out.String())
	}
}

func TestLogSinkFlushesAFullBatchAtOnce(t *testing.T) {
	out := &lockedBuffer{}
	s := newLogSink(out)
	defer s.Close()
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for range logBatchBytes / len(line) {
		s.Batched().Write(line)
	}
	if got := len(out.String()); got != logBatchBytes {
		t.Fatalf("after %d bytes of batched lines the output holds %d", logBatchBytes, got)
	}
}

// logFile creates a regular file for a sink to write to.
func logFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestLogSinkStartsTheWritebackOfAFileLog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the writeback is started with Linux's sync_file_range")
	}
	f := logFile(t)
	s := newLogSink(f)
	defer s.Close()
	if s.writeback == nil {
		t.Fatal("a sink writing to a regular file has no writeback")
	}
	var started, failed atomic.Int32
	s.mu.Lock()
	start := s.writeback
	s.writeback = func() error {
		started.Add(1)
		err := start()
		if err != nil {
			failed.Add(1)
		}
		return err
	}
	s.mu.Unlock()

	line := []byte(strings.Repeat("x", 1023) + "\n")
	lines := 2 * logBytesPerSync / len(line)
	for range lines {
		s.Batched().Write(line)
	}
	deadline := time.Now().Add(30 * time.Second)
	for started.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes were logged to a file and its writeback never started", lines*len(line))
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Close()
	// One writeback per logBytesPerSync written at most: 2 MiB, 1 or 2.
	if n := started.Load(); n > 2 {
		t.Errorf("2 MiB logged started the writeback %d times", n)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d writebacks failed", n)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(lines*len(line)) {
		t.Fatalf("the file holds %d bytes, want %d", fi.Size(), lines*len(line))
	}
}

func TestOnlyARegularFileHasAWriteback(t *testing.T) {
	f := logFile(t)
	if runtime.GOOS != "linux" {
		if writebackOf(f) != nil {
			t.Error("a writeback outside Linux")
		}
		return
	}
	if writebackOf(f) == nil {
		t.Error("a regular file has no writeback")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if writebackOf(w) != nil {
		t.Error("a pipe (journald's standard error) has a writeback")
	}
	if writebackOf(&lockedBuffer{}) != nil {
		t.Error("a buffer has a writeback")
	}
}

// TestLogSinkWritesALineLoggedWhileItCloses: a request that ends while
// the sink closes still has its line written. The final flush and the
// moment the sink counts as closed were two steps, and a line written
// between them waited for a flush that never came. That window was
// narrow: writing at varying moments after Close began, 300,000 rounds
// caught it in each of five runs (50,000 in about half).
func TestLogSinkWritesALineLoggedWhileItCloses(t *testing.T) {
	for round := range 300000 {
		out := &lockedBuffer{}
		s := newLogSink(out)
		wrote := make(chan struct{})
		go func() {
			<-s.stop
			for spin := round % 64; spin > 0; spin-- {
			}
			s.Batched().Write([]byte("during\n"))
			close(wrote)
		}()
		s.Close()
		<-wrote
		if out.String() != "during\n" {
			t.Fatalf("round %d: a line logged while the sink closed was not written: %q", round, out.String())
		}
	}
}
