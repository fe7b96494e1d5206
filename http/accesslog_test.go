package http

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// The access log writes each line as slog's handler of the same format
// would, byte for byte, whichever path it takes.
func TestAccessLogWritesSlogsLine(t *testing.T) {
	east := time.FixedZone("UTC+5:30", 5*3600+1800)
	times := []time.Time{
		time.Date(2026, 11, 25, 9, 41, 7, 123456789, time.UTC),
		time.Date(2026, 11, 25, 9, 41, 7, 0, time.UTC),      // no fraction
		time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, east),   // trailing zeros, an offset
		time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, east),   // the last nanosecond of a second
		time.Date(2026, 1, 2, 3, 4, 5, 5_000_000, time.UTC), // 5 ms
		// The same second as the one before, in another zone, then in
		// the first again: a second's text is kept per location.
		time.Date(2026, 1, 2, 3, 4, 5, 5_000_000, time.UTC).In(east),
		time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	lines := []access{
		{method: "POST", route: "/v1/sessions", status: 201, duration: 1234567 * time.Nanosecond,
			requestID: "req_01kaxyz", account: "acc_01kaxyz", client: "127.0.0.1"},
		{method: "GET", route: "unmatched", status: 404, duration: 0, requestID: "req_1", account: "", client: "::1"},
		{method: "GET", route: "/v1/sessions/:id", status: 401, duration: 999 * time.Nanosecond,
			requestID: "req_2", client: "2001:db8::1"},
		{method: "DELETE", route: "/v1/webhooks/:id", status: 204, duration: 3*time.Second + 5*time.Millisecond,
			requestID: "req_3", account: "acc_3", client: "10.0.0.1"},
		{method: "GET", route: "/v1/agents", status: 200, duration: 42 * time.Microsecond,
			requestID: "req_4", account: "acc_4", client: "a<b>&c"},
	}
	// Each string either handler quotes or escapes, alone in a line: the
	// slog path.
	for _, odd := range []string{"x y", `r"q`, `a\b`, "c=d", "tab\there", "ré", "\x7f", "\u2028", "nl\n"} {
		base := access{method: "GET", route: "/v1/agents", status: 400, requestID: "req_5", account: "acc_5", client: "127.0.0.1"}
		for i := range 5 {
			a := base
			*[]*string{&a.method, &a.route, &a.requestID, &a.account, &a.client}[i] = odd
			lines = append(lines, a)
		}
	}
	for _, format := range []string{"text", "json"} {
		for _, tm := range times {
			for _, a := range lines {
				var got, want bytes.Buffer
				NewAccessLog(&got, format, slog.LevelInfo).write(context.Background(), tm, &a)
				opts := &slog.HandlerOptions{Level: slog.LevelInfo}
				var h slog.Handler = slog.NewTextHandler(&want, opts)
				if format == "json" {
					h = slog.NewJSONHandler(&want, opts)
				}
				accessLogVia(h).write(context.Background(), tm, &a)
				if got.String() != want.String() {
					t.Errorf("%s at %s:\n got %q\nwant %q", format, tm, got.String(), want.String())
				}
			}
		}
	}
}

// A plain line is formatted directly: no record, no handler and no
// garbage, where slog's path makes two allocations. One is allowed: a race
// build makes one.
func TestAccessLogLineIsCheap(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		l := NewAccessLog(io.Discard, format, slog.LevelInfo)
		a := access{method: "POST", route: "/v1/sessions", status: 201, duration: 1234567,
			requestID: "req_01kaxyz", account: "acc_01kaxyz", client: "127.0.0.1"}
		now := time.Now()
		l.write(context.Background(), now, &a) // fills the pool
		// The median over single lines: under the race detector sync.Pool
		// drops a quarter of what is put back, and the line after a drop
		// grows a buffer anew, which an average counts.
		var counts []float64
		for range 51 {
			counts = append(counts, testing.AllocsPerRun(1, func() { l.write(context.Background(), now, &a) }))
		}
		slices.Sort(counts)
		if n := counts[len(counts)/2]; n > 1 {
			t.Errorf("%s: %.0f allocations a line (median), want at most 1", format, n)
		}
	}
}

// Above info, nothing is written.
func TestAccessLogOffAboveInfo(t *testing.T) {
	var out bytes.Buffer
	a := access{method: "GET", route: "/v1/agents", status: 200, requestID: "req_1", client: "127.0.0.1"}
	NewAccessLog(&out, "text", slog.LevelWarn).write(context.Background(), time.Now(), &a)
	accessLogVia(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn})).write(context.Background(), time.Now(), &a)
	if out.Len() != 0 {
		t.Fatalf("wrote %q at warn", out.String())
	}
}
