package http

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// AdminProgress is a line an admin command streams, when the CLI asks with
// progress=true, to say how far a long piece of work got: done of total
// records (export, verify) or bytes (backup). The CLI draws it as a bar
// and never prints it; every other line of the answer is unchanged.
type AdminProgress struct {
	Progress ProgressCount `json:"progress"`
}

// ProgressCount is done of total units; total is 0 when unknown.
type ProgressCount struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// progressMinInterval spaces progress lines out: a bar redraws a few times
// a second at most, so more lines would only cost the socket.
const progressMinInterval = 100 * time.Millisecond

// progressLines writes AdminProgress lines to an answer whose 200 header
// it sends with the first of them.
type progressLines struct {
	w       http.ResponseWriter
	enc     *json.Encoder
	mu      sync.Mutex
	started bool
	last    time.Time
}

func newProgressLines(w http.ResponseWriter) *progressLines {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &progressLines{w: w, enc: enc}
}

// report sends a progress line, skipping those that come sooner than
// progressMinInterval after the last one unless the work is done.
func (p *progressLines) report(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.started && done < total && now.Sub(p.last) < progressMinInterval {
		return
	}
	p.start()
	p.last = now
	_ = p.enc.Encode(AdminProgress{Progress: ProgressCount{Done: done, Total: total}})
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// start sends the answer's header, once.
func (p *progressLines) start() {
	if !p.started {
		p.w.Header().Set("Content-Type", "application/x-ndjson")
		p.w.WriteHeader(http.StatusOK)
		p.started = true
	}
}

// records adapts report to eventlog.Progress.
func (p *progressLines) records(done, total uint64) { p.report(int64(done), int64(total)) }

// finish ends the answer with v: as the whole answer with status when no
// progress line was sent, otherwise as its last line.
func (p *progressLines) finish(status int, v any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		writeJSON(p.w, status, v)
		return
	}
	_ = p.enc.Encode(v)
}
