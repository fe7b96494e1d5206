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
type logSink struct {
	mu   sync.Mutex
	out  io.Writer
	buf  []byte
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

const (
	logFlushEvery = 100 * time.Millisecond
	logBatchBytes = 64 << 10
)

// newLogSink writes to out and flushes batched lines every logFlushEvery
// until Close.
func newLogSink(out io.Writer) *logSink {
	s := &logSink{out: out, stop: make(chan struct{}), done: make(chan struct{})}
	go s.flushing()
	return s
}

// Write writes p at once, after any batched lines.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
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
	if len(s.buf) >= logBatchBytes || s.closed() {
		s.flushLocked()
	}
	return len(p), nil
}

func (s *logSink) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *logSink) flushLocked() {
	if len(s.buf) == 0 {
		return
	}
	_, _ = s.out.Write(s.buf) // a log that cannot be written has nowhere to say so
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
			s.mu.Lock()
			s.flushLocked()
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.flushLocked()
		s.mu.Unlock()
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
