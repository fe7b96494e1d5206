package delivery

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// transport is the HTTP/1.1 client of deliveries, with keep-alive
// connections per host. An attempt's goroutine writes its request and
// reads the answer on the connection itself, where http.Transport hands
// each request to a connection's write loop and the answer back from a
// read loop: two goroutines and their wake-ups per request. Delivering
// through it took 13 µs less CPU than through http.Transport (59.8 and
// 46.8 µs a delivery, BenchmarkDeliveries; see the README). It speaks
// HTTP/1.1 only, over TLS too (ALPN "http/1.1"), as every webhook
// receiver does; it follows no redirect, uses no proxy and asks for no
// compression.
//
// An exchange ends at its deadline, on the connection's own timers, and
// at once when its context is cancelled. A kept connection is peeked at
// before it takes a request (idleBroken): one the receiver closed, or
// wrote an answer nobody asked for to, is closed instead. A request whose
// write fails on a kept connection before a byte left is sent once more
// on a new one; a request that may have reached the receiver is not. An
// answer given before the request was read to its end (a 401, a 413)
// is read even when the write then failed, and its connection closed; a
// 2xx given so is an error, the request not having been taken whole. A
// delivery's body is a few KiB, which the sockets' buffers take whole: a
// receiver that answers early and then neither reads nor closes ends the
// exchange at its deadline only for a request far larger than that.
type transport struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	tls         *tls.Config // nil: the system's roots
	idleTimeout time.Duration
	maxIdle     int // kept connections per host

	mu     sync.Mutex
	idle   map[hostKey][]*conn // most recently used last
	reaper *time.Timer         // closes connections kept past their expiry
	reapAt time.Time           // when reaper runs
}

type hostKey struct{ scheme, host string }

// maxResponseHeader bounds the head of an answer: a receiver cannot grow
// an attempt's memory past it.
const maxResponseHeader = 64 << 10

// errResponseHeaderTooLarge ends an answer whose head is over
// maxResponseHeader.
var errResponseHeaderTooLarge = fmt.Errorf("the answer's head is larger than %d bytes", maxResponseHeader)

// conn is one kept connection. Only the attempt that holds it touches it.
type conn struct {
	net.Conn
	key    hostKey
	br     *bufio.Reader
	budget int64 // bytes the answer's head may still take
	// timedOut says a read met the exchange's deadline.
	timedOut bool
	// idleFor is how long it may be kept idle: the transport's
	// idleTimeout, or less when the receiver's last answer said it closes
	// idle connections sooner (keepAliveFor). expires is its end, from
	// the moment it was kept.
	idleFor time.Duration
	expires time.Time
}

func (c *conn) Read(p []byte) (int, error) {
	if c.budget <= 0 {
		return 0, errResponseHeaderTooLarge
	}
	if int64(len(p)) > c.budget {
		p = p[:c.budget]
	}
	n, err := c.Conn.Read(p)
	c.budget -= int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.timedOut = true
	}
	return n, err
}

// requestBufs holds requests as written, so that one goes out in one write,
// and again on a new connection if need be.
var requestBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// post POSTs body with header to the URL of to, a request only read, and
// returns the head of the answer, whose body hands the connection back
// when closed. The exchange ends at deadline; ctx's cancellation ends it
// at once.
func (t *transport) post(ctx context.Context, deadline time.Time, to *http.Request, header http.Header, body []byte) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := hostKey{to.URL.Scheme, to.URL.Host}
	if key.scheme != "http" && key.scheme != "https" {
		return nil, fmt.Errorf("unsupported protocol scheme %q", key.scheme)
	}
	buf := requestBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledRequest {
			requestBufs.Put(buf)
		}
	}()
	if err := writeRequest(buf, to, header, body); err != nil {
		return nil, err
	}
	c := t.get(key)
	for {
		reused := c != nil
		if !reused {
			var err error
			dctx, cancel := context.WithDeadline(ctx, deadline)
			c, err = t.connect(dctx, to.URL)
			cancel()
			if err != nil {
				return nil, exchangeErr(ctx, err)
			}
		}
		resp, err := t.exchange(ctx, deadline, c, to, buf.Bytes())
		if err == nil {
			return resp, nil
		}
		c.Close()
		// A kept connection the receiver closed after get's peek fails
		// its write before a byte leaves: sent once more, on a new one.
		// Anything else may have reached the receiver, which a POST is
		// not sent twice for (as http.Transport does not).
		var nothing nothingWritten
		if !reused || !errors.As(err, &nothing) || ctx.Err() != nil {
			return nil, exchangeErr(ctx, err)
		}
		c = nil
	}
}

// nothingWritten is a write that failed before any of the request left.
type nothingWritten struct{ err error }

func (e nothingWritten) Error() string { return e.err.Error() }
func (e nothingWritten) Unwrap() error { return e.err }

// maxPooledRequest is the largest request buffer kept for another: a rare
// large body does not pin its memory.
const maxPooledRequest = 64 << 10

// writeTarget writes a request's target, percent-encoding every byte a
// request line cannot carry as it is: a space, a control character, or
// each byte of a non-ASCII character. A URL's query keeps what it was given
// (RequestURI escapes the path alone), and registration refuses spaces and
// control characters only since 2026-11-27: a webhook stored before then
// is still sent a request its receiver can read.
func writeTarget(buf *bytes.Buffer, target string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			buf.WriteString(target[:i])
			for ; i < len(target); i++ {
				if c := target[i]; c <= ' ' || c >= 0x7f {
					buf.Write([]byte{'%', hex[c>>4], hex[c&15]})
				} else {
					buf.WriteByte(c)
				}
			}
			return
		}
	}
	buf.WriteString(target)
}

// writeRequest writes a POST of body to req's URL, with header, as
// HTTP/1.1 into buf: the request line, Host, the headers in no particular
// order (Request.Write sorts them, a sixth of an attempt's CPU),
// Content-Length and the body.
func writeRequest(buf *bytes.Buffer, req *http.Request, header http.Header, body []byte) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHeaderValue(host) {
		return fmt.Errorf("invalid host %q", host)
	}
	buf.WriteString("POST ")
	writeTarget(buf, req.URL.RequestURI())
	buf.WriteString(" HTTP/1.1\r\nHost: ")
	buf.WriteString(host)
	buf.WriteString("\r\n")
	for k, vs := range header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue // the transport's own
		}
		if !validHeaderName(k) {
			return fmt.Errorf("invalid header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return fmt.Errorf("invalid value for header %q", k)
			}
			buf.WriteString(k)
			buf.WriteString(": ")
			buf.WriteString(v)
			buf.WriteString("\r\n")
		}
	}
	var num [20]byte
	buf.WriteString("Content-Length: ")
	buf.Write(strconv.AppendInt(num[:0], int64(len(body)), 10))
	buf.WriteString("\r\n\r\n")
	buf.Write(body)
	return nil
}

// validHeaderName reports whether k is a token (RFC 9110, 5.6.2).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !tokenChar[k[i]] {
			return false
		}
	}
	return true
}

// tokenChar says which bytes a token may hold: visible ASCII but the
// delimiters.
var tokenChar = func() (t [256]bool) {
	for c := '!'; c <= '~'; c++ {
		t[c] = !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
	}
	return t
}()

// validHeaderValue reports whether v holds no control character but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// exchange sends the request's bytes on c and reads the head of its
// answer; the answer's body hands c back when it is closed.
func (t *transport) exchange(ctx context.Context, deadline time.Time, c *conn, req *http.Request, wire []byte) (*http.Response, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// Cancelling the request ends a read or write under way.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	c.budget, c.timedOut = maxResponseHeader, false
	if err := ctx.Err(); err != nil { // AfterFunc's deadline lands in a goroutine of its own
		stop()
		return nil, err
	}
	n, werr := c.Write(wire)
	if werr != nil && n == 0 {
		stop()
		return nil, nothingWritten{werr}
	}
	// A write that failed part-way may have met an answer the receiver
	// gave before reading the whole request (a 401, a 413, a 410), then
	// closing: that answer is read as any other, and the connection is
	// not kept. Without one, the write's error is the attempt's.
	resp, err := readAnswer(c, req)
	if err != nil {
		stop()
		if werr != nil {
			return nil, werr
		}
		return nil, err
	}
	if werr != nil && resp.StatusCode/100 == 2 {
		// A receiver cannot have taken a request it did not read to its
		// end: a 2xx before it is no success (its connection is closed).
		stop()
		return nil, fmt.Errorf("the receiver answered %d before the whole request was sent: %w", resp.StatusCode, werr)
	}
	c.budget = math.MaxInt64
	c.idleFor = keepAliveFor(resp.Header["Keep-Alive"], t.idleTimeout)
	resp.Body = &body{ReadCloser: resp.Body, t: t, c: c, stop: stop,
		keep: werr == nil && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols && c.idleFor > 0}
	return resp, nil
}

// keepAliveFor is how long a connection whose answer had the Keep-Alive
// header values vs may be kept idle: at most max, and a second less than
// the receiver's "timeout=N" (RFC 2068, 19.7.1.1; Node.js sends
// "timeout=5" by default), so that a request is not sent just as the
// receiver closes the connection, which fails the attempt (a POST is not
// sent twice). 0 or less: not kept.
func keepAliveFor(vs []string, max time.Duration) time.Duration {
	for _, v := range vs {
		// Parameters are separated by commas (some servers write
		// semicolons), a value may be quoted.
		for param := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ';' }) {
			name, value, _ := strings.Cut(strings.TrimSpace(param), "=")
			if !strings.EqualFold(strings.TrimSpace(name), "timeout") {
				continue
			}
			secs, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 32)
			if err != nil {
				continue
			}
			return min(max, time.Duration(secs)*time.Second-time.Second)
		}
	}
	return max
}

// readAnswer reads the head of the answer on c. Informational answers
// (100 Continue, 103 Early Hints) precede it; 101 switches protocols,
// which a delivery never asks for.
func readAnswer(c *conn, req *http.Request) (*http.Response, error) {
	resp, err := http.ReadResponse(c.br, req)
	for i := 0; err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols; i++ {
		if i == 5 {
			return nil, errors.New("too many informational answers")
		}
		resp, err = http.ReadResponse(c.br, req)
	}
	if err != nil && c.budget <= 0 {
		// The budget can cut a header line anywhere, which textproto
		// may report as a malformed line before the budget's error.
		return nil, errResponseHeaderTooLarge
	}
	if err != nil && c.timedOut {
		// So can the deadline, which bufio then drops for the part of
		// the line it holds: the answer did not come in time, it was not
		// malformed.
		return nil, os.ErrDeadlineExceeded
	}
	return resp, err
}

// exchangeErr is the error of a failed exchange as http.Transport words
// it: the context's error when it was cancelled, context.DeadlineExceeded
// when the deadline passed.
func exchangeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// body is an answer's body: read to its end and closed, it hands its
// connection back to be kept; closed before, the connection is closed.
type body struct {
	io.ReadCloser
	t    *transport
	c    *conn
	stop func() bool
	keep bool // the answer allows keeping the connection
	eof  bool
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// stop reports false once the cancellation has run or started: its
	// deadline may still land on the connection. An answer not read to
	// its end closes the connection first, or net/http's Close would read
	// the rest of it.
	if !b.stop() || !b.eof || !b.keep || b.c.br.Buffered() > 0 {
		b.c.Close()
		b.ReadCloser.Close()
		return nil
	}
	if err := b.ReadCloser.Close(); err != nil {
		b.c.Close()
		return err
	}
	// Kept without the attempt's deadline: idleBroken's peek fails on a
	// connection whose deadline has passed.
	if err := b.c.SetDeadline(time.Time{}); err != nil {
		b.c.Close()
		return nil
	}
	b.t.put(b.c)
	return nil
}

// connect dials u's host (at its port, or the scheme's) and, for https,
// makes the TLS handshake, all within ctx.
func (t *transport) connect(ctx context.Context, u *url.URL) (*conn, error) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	raw, err := t.dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	nc := raw
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if t.tls != nil {
			cfg = t.tls.Clone()
		}
		cfg.ServerName, cfg.NextProtos = host, []string{"http/1.1"}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{Conn: nc, key: hostKey{u.Scheme, u.Host}}
	c.br = bufio.NewReaderSize(c, 4<<10)
	return c, nil
}

// get returns a kept connection to key's host that may take a request,
// or nil. It closes those idle too long, and those the receiver closed or
// wrote to while they were idle (idleBroken, tlsBuffered).
func (t *transport) get(key hostKey) *conn {
	for {
		c := t.pop(key)
		if c == nil || time.Now().Before(c.expires) && !idleBroken(c.Conn) && !tlsBuffered(c) {
			return c
		}
		c.Close()
	}
}

// tlsBuffered reports whether a kept TLS connection holds a record that
// arrived with the last answer: tls.Conn reads what the socket has, so
// the socket's peek does not see it. A read with a deadline in the past
// returns such a record without a syscall, and fails at once otherwise (a
// timeout leaves tls.Conn usable); exchange sets the next deadline. Run
// after idleBroken, whose peek fails on a connection whose deadline has
// passed.
func tlsBuffered(c *conn) bool {
	if _, ok := c.Conn.(*tls.Conn); !ok {
		return false
	}
	if c.SetReadDeadline(time.Unix(1, 0)) != nil {
		return true
	}
	_, err := c.br.Peek(1)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// pop takes the most recently kept connection to key's host, or nil.
func (t *transport) pop(key hostKey) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.idle[key]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	if cs = cs[:len(cs)-1]; len(cs) == 0 {
		delete(t.idle, key)
	} else {
		t.idle[key] = cs
	}
	return c
}

// put keeps c for the next request to its host.
func (t *transport) put(c *conn) {
	c.expires = time.Now().Add(c.idleFor)
	t.mu.Lock()
	full := len(t.idle[c.key]) >= t.maxIdle
	if !full {
		if t.idle == nil {
			t.idle = map[hostKey][]*conn{}
		}
		t.idle[c.key] = append(t.idle[c.key], c)
		switch {
		case t.reaper == nil:
			t.reaper, t.reapAt = time.AfterFunc(c.idleFor, t.reap), c.expires
		case c.expires.Before(t.reapAt) && t.reaper.Stop():
			// Sooner. A reaper that could not be stopped is under way, and
			// comes back for c once it has the lock.
			t.reaper, t.reapAt = time.AfterFunc(c.idleFor, t.reap), c.expires
		}
	}
	t.mu.Unlock()
	if full {
		c.Close() // not under t.mu
	}
}

// reap closes the connections kept past their expiry, and comes back
// when the first left expires.
func (t *transport) reap() {
	var stale []*conn
	defer func() { closeAll(stale) }()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reaper = nil
	now := time.Now()
	next := now.Add(t.idleTimeout) // no connection expires later
	for key, cs := range t.idle {
		kept := cs[:0]
		for _, c := range cs {
			if now.Before(c.expires) {
				kept = append(kept, c)
				if c.expires.Before(next) {
					next = c.expires
				}
			} else {
				stale = append(stale, c)
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, key)
		} else {
			t.idle[key] = kept
		}
	}
	if len(t.idle) > 0 {
		t.reaper, t.reapAt = time.AfterFunc(next.Sub(now), t.reap), next
	}
}

// CloseIdleConnections closes every kept connection.
func (t *transport) CloseIdleConnections() {
	t.mu.Lock()
	var all []*conn
	for _, cs := range t.idle {
		all = append(all, cs...)
	}
	t.idle = nil
	t.mu.Unlock()
	closeAll(all)
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.Close()
	}
}
