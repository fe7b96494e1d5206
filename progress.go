package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	demohttp "demosvc/http"
)

// Long commands (log import, export, verify, backup) draw a progress bar
// with rate and ETA on stderr when stderr is a terminal, and nothing
// otherwise: a pipe, a file or a test gets exactly the output it got
// before.

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is a bar drawn on a terminal, created at the first report so
// that its total can come from the report. The zero value, and a progress
// on anything but a terminal, draw nothing.
type progress struct {
	w           io.Writer // nil: draw nothing
	description string
	bytes       bool // counts bytes rather than records
	bar         *progressbar.ProgressBar
}

// newProgress returns the progress of a command whose units are records,
// or bytes when bytes is set.
func (c *cli) newProgress(description string, bytes bool) *progress {
	p := &progress{description: description, bytes: bytes}
	if isTerminal(c.stderr) {
		p.w = c.stderr
	}
	return p
}

// enabled says whether the bar is drawn, so that commands ask the server
// for progress only then.
func (p *progress) enabled() bool { return p != nil && p.w != nil }

// set moves the bar to done of total; total < 1 means unknown (a spinner
// with a rate, and no ETA).
func (p *progress) set(done, total int64) {
	if !p.enabled() {
		return
	}
	if total < 1 {
		total = -1
	}
	if p.bar == nil {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.description),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100 * time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
		}
		if p.bytes {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString("records"))
		}
		p.bar = progressbar.NewOptions64(total, opts...)
	} else if p.bar.GetMax64() != total {
		p.bar.ChangeMax64(total)
	}
	_ = p.bar.Set64(done)
}

// describe changes the text in front of the bar.
func (p *progress) describe(description string) {
	if p.enabled() && p.bar != nil {
		p.bar.Describe(description)
	}
}

// finish draws the last state and ends the bar's line, so that what the
// command prints next starts on a line of its own.
func (p *progress) finish(ok bool) {
	if !p.enabled() || p.bar == nil {
		return
	}
	if ok && p.bar.GetMax64() > 0 {
		_ = p.bar.Finish()
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}

// progressFilter passes the lines of an admin answer through to next,
// except AdminProgress lines, which move the bar.
type progressFilter struct {
	bar  *progress
	next io.Writer
	buf  []byte
}

var progressPrefix = []byte(`{"progress":`)

func (f *progressFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := f.line(f.buf[:i+1]); err != nil {
			return len(p), err
		}
		f.buf = f.buf[i+1:]
	}
}

func (f *progressFilter) line(l []byte) error {
	if bytes.HasPrefix(l, progressPrefix) {
		var pl demohttp.AdminProgress
		if json.Unmarshal(l, &pl) == nil {
			f.bar.set(pl.Progress.Done, pl.Progress.Total)
			return nil
		}
	}
	_, err := f.next.Write(l)
	return err
}

// flush passes on a last line that had no newline.
func (f *progressFilter) flush() {
	if len(f.buf) > 0 {
		_, _ = f.next.Write(f.buf)
		f.buf = nil
	}
}

// replayProgressEvery is how often serve logs its progress while it
// rebuilds the state from the log.
const replayProgressEvery = 5 * time.Second

// replayProgress returns the callback with which serve logs, at INFO and
// at most once per every, how far the replay of the log got: the seq
// reached, the head it replays to and the rate since the last line.
func replayProgress(logger *slog.Logger, now func() time.Time, every time.Duration) func(seq, head uint64) {
	start := now()
	last, lastSeq := start, uint64(0)
	return func(seq, head uint64) {
		t := now()
		if t.Sub(last) < every {
			return
		}
		rate := float64(seq-lastSeq) / t.Sub(last).Seconds()
		var eta time.Duration
		if rate > 0 && head > seq {
			eta = time.Duration(float64(head-seq) / rate * float64(time.Second)).Round(time.Second)
		}
		logger.Info("replaying the log", "seq", seq, "head_seq", head,
			"events_per_second", int64(rate), "eta", eta.String())
		last, lastSeq = t, seq
	}
}

// replayProgressOf returns serve's replay progress logging, or nil for the
// CLI commands that open the state without a logger.
func replayProgressOf(logger *slog.Logger) func(seq, head uint64) {
	if logger == nil {
		return nil
	}
	return replayProgress(logger, time.Now, replayProgressEvery)
}
