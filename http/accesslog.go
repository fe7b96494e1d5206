package http

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// AccessLog writes the request log: one line per request at info, the
// line slog's text or JSON handler writes for it, byte for byte
// (accesslog_test.go holds them equal). It formats the line itself: going
// through slog (a Record of seven attributes, then the handler's generic
// formatting) was 3% of a POST's CPU (perf, under wrk). A line whose
// strings need quoting or escaping, which no request the API serves
// normally has, goes through the slog handler.
type AccessLog struct {
	w    io.Writer    // nil: every line goes through slow
	json bool         // the format of w
	on   bool         // info is enabled
	slow slog.Handler // writes what cannot be written plainly
	bufs sync.Pool    // *[]byte
}

// NewAccessLog writes lines to w in format ("json" or "text", the
// log.format key) when level lets info through.
func NewAccessLog(w io.Writer, format string, level slog.Level) *AccessLog {
	opts := &slog.HandlerOptions{Level: level}
	l := &AccessLog{w: w, json: format == "json", on: level <= slog.LevelInfo}
	if l.json {
		l.slow = slog.NewJSONHandler(w, opts)
	} else {
		l.slow = slog.NewTextHandler(w, opts)
	}
	return l
}

// accessLogVia writes every line through h; it serves the servers that
// are given no AccessLog.
func accessLogVia(h slog.Handler) *AccessLog {
	return &AccessLog{slow: h, on: h.Enabled(context.Background(), slog.LevelInfo)}
}

// access is one request's line.
type access struct {
	method, route string
	status        int
	duration      time.Duration
	requestID     string
	account       string
	client        string
}

// attrs are the line's attributes, in the order they are written.
func (a *access) attrs() []slog.Attr {
	return []slog.Attr{slog.String("method", a.method), slog.String("route", a.route), slog.Int("status", a.status),
		slog.Duration("duration", a.duration), slog.String("request_id", a.requestID),
		slog.String("account_id", a.account), slog.String("client", a.client)}
}

// write writes a's line, stamped t.
func (l *AccessLog) write(ctx context.Context, t time.Time, a *access) {
	if !l.on {
		return
	}
	if l.w == nil || !plain(a.method) || !plain(a.route) || !plain(a.requestID) || !plain(a.account) || !plain(a.client) {
		rec := slog.NewRecord(t, slog.LevelInfo, "request", 0)
		rec.AddAttrs(a.attrs()...)
		_ = l.slow.Handle(ctx, rec)
		return
	}
	bp, _ := l.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := (*bp)[:0]
	if l.json {
		b = append(b, `{"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":"INFO","msg":"request","method":"`...)
		b = append(b, a.method...)
		b = append(b, `","route":"`...)
		b = append(b, a.route...)
		b = append(b, `","status":`...)
		b = strconv.AppendInt(b, int64(a.status), 10)
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(a.duration), 10)
		b = append(b, `,"request_id":"`...)
		b = append(b, a.requestID...)
		b = append(b, `","account_id":"`...)
		b = append(b, a.account...)
		b = append(b, `","client":"`...)
		b = append(b, a.client...)
		b = append(b, "\"}\n"...)
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t)
		b = append(b, " level=INFO msg=request method="...)
		b = appendText(b, a.method)
		b = append(b, " route="...)
		b = appendText(b, a.route)
		b = append(b, " status="...)
		b = strconv.AppendInt(b, int64(a.status), 10)
		b = append(b, " duration="...)
		b = append(b, a.duration.String()...)
		b = append(b, " request_id="...)
		b = appendText(b, a.requestID)
		b = append(b, " account_id="...)
		b = appendText(b, a.account)
		b = append(b, " client="...)
		b = appendText(b, a.client)
		b = append(b, '\n')
	}
	_, _ = l.w.Write(b) // a log that cannot be written has nowhere to say so
	*bp = b
	l.bufs.Put(bp)
}

// plain reports whether s is written as it is by both of slog's handlers:
// printable ASCII that neither needs quoting in text (space, '=', '"',
// '\\') nor escaping in JSON. The empty string is plain: text writes it
// as "" (appendText).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainBytes[s[i]] {
			return false
		}
	}
	return true
}

// plainBytes holds the bytes plain allows: a table lookup a byte, where
// five comparisons were 6% of a GET's own CPU.
var plainBytes = func() (t [256]bool) {
	for c := '!'; c < 0x7f; c++ {
		t[c] = c != '=' && c != '"' && c != '\\'
	}
	return t
}()

// appendText appends a plain s as slog's text handler does.
func appendText(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	return append(b, s...)
}

// appendRFC3339Millis appends t as slog's text handler writes a record's
// time: RFC 3339 with exactly three digits of fraction (log/slog's
// function of the same name). The lines of one second share everything
// but the milliseconds, so the rest is formatted once a second
// (lastSecond): formatting was a fifth of an access line's cost.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	sec := t.Unix()
	c := lastSecond.Load()
	if c == nil || c.sec != sec || c.loc != t.Location() {
		const prefixLen = len("2006-01-02T15:04:05.")
		full := t.Truncate(time.Second).AppendFormat(nil, "2006-01-02T15:04:05.000Z07:00")
		c = &formattedSecond{sec: sec, loc: t.Location(), date: full[:prefixLen], zone: full[prefixLen+3:]}
		lastSecond.Store(c)
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b, c.date...)
	b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, c.zone...)
}

// formattedSecond is one second's time text, in one location, split
// around its milliseconds; never changed once made.
type formattedSecond struct {
	sec        int64
	loc        *time.Location
	date, zone []byte // "2006-01-02T15:04:05." and "Z07:00"
}

var lastSecond atomic.Pointer[formattedSecond]
