package main

import (
	"io"
	"sync"
	"time"
)

// logSink is serve's log output. The request log (one line per request)
// writes through Batched: its lines wait in memory and reach the output
// together, at most logFlushEvery later or once logBatchBytes are waiting,
// which spares a write(2) per request. Every other line is written at
// once, after the waiting ones, so the output keeps the order in which
// lines were logged and no warning or error is held back.
//
// When the output is a regular file (serve's standard error redirected to
// one), the flushing goroutine also starts the kernel's writeback once
// logBytesPerSync more have been written, without waiting for it, much as
// Pebble's BytesPerSync does for its tables. Left alone, the kernel keeps a
// file's dirty pages for 30 s (vm.dirty_expire_centisecs) and then writes
// them all at once: under a steady 30,000 requests a second, about 190 MB
// of request log, and the WAL's fdatasyncs queued behind that burst
// ("About the black-box figures" in the README).
type logSink struct {
	mu        sync.Mutex
	out       io.Writer
	buf       []byte
	writeback func() error // starts writing out's dirty pages to disk; nil if out is not a regular file
	unsynced  int          // bytes written to out since the last writeback
	closing   bool         // the final flush is done: batched lines are written at once
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

const (
	logFlushEvery   = 100 * time.Millisecond
	logBatchBytes   = 64 << 10
	logBytesPerSync = 1 << 20
)

// newLogSink writes to out and flushes batched lines every logFlushEvery
// until Close.
func newLogSink(out io.Writer) *logSink {
	s := &logSink{out: out, writeback: writebackOf(out), stop: make(chan struct{}), done: make(chan struct{})}
	go s.flushing()
	return s
}

// Write writes p at once, after any batched lines.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
	s.unsynced += len(p)
	return s.out.Write(p)
}

// Batched returns the writer of the request log.
func (s *logSink) Batched() io.Writer { return batchedWriter{s} }

type batchedWriter struct{ s *logSink }

func (b batchedWriter) Write(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if len(s.buf) >= logBatchBytes || s.closing {
		s.flushLocked()
	}
	return len(p), nil
}

func (s *logSink) flushLocked() {
	if len(s.buf) == 0 {
		return
	}
	_, _ = s.out.Write(s.buf) // a log that cannot be written has nowhere to say so
	s.unsynced += len(s.buf)
	s.buf = s.buf[:0]
}

func (s *logSink) flushing() {
	defer close(s.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.stop:
			// One step under the lock: a line batched after this flush
			// finds closing set, and is written at once.
			s.mu.Lock()
			s.flushLocked()
			s.closing = true
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.flushLocked()
		var writeback func() error
		if s.unsynced >= logBytesPerSync {
			writeback, s.unsynced = s.writeback, 0
		}
		s.mu.Unlock()
		// Outside the lock: starting a writeback can wait for the disk's
		// queue, and request goroutines take the lock to log.
		if writeback != nil {
			_ = writeback() // a log that cannot be written out has nowhere to say so
		}
	}
}

// Close writes what is batched and stops the flushing. Later batched
// lines are written at once.
func (s *logSink) Close() {
	s.once.Do(func() {
		close(s.stop)
		<-s.done
	})
}
