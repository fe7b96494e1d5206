package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"demosvc/projections"
)

// EHeaderTooLarge is the code of a request whose header block is larger
// than http.max_header_bytes (431), answered by net/http before any
// handler runs.
const EHeaderTooLarge = "header_too_large"

// ENotImplemented is the code of a request net/http cannot read, such as
// an unknown Transfer-Encoding (501).
const ENotImplemented = "not_implemented"

// JSONErrorListener wraps ln so that the few answers net/http writes by
// itself, before any handler runs, are error objects like every other
// answer: 431 for a header block over MaxHeaderBytes, 400 for a request it
// cannot parse (a malformed request line or header, a missing Host), 501
// for an unknown transfer coding, and the other statuses it gives with a
// reason. net/http writes each of these in one Write on the raw
// connection, as a status line followed by exactly
// "Content-Type: text/plain; charset=utf-8" and "Connection: close" and a
// blank line; a response a handler writes always has a Date header, and
// every body of this API is JSON (no raw CR LF), so no other write has
// that shape. Anything else passes through unchanged.
func JSONErrorListener(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

// Write passes p on, or its JSON form if p is one of net/http's own plain
// error answers; it reports all of p written when the JSON form is.
func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if j, ok := jsonForPlainError(p); ok {
		if _, err := c.Conn.Write(j); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// plainErrorHeaders is what net/http writes after the status line of its
// own error answers (net/http/server.go, conn.serve).
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// jsonForPlainError returns the JSON answer for p if p is one of net/http's
// plain error answers: "HTTP/1.1 <code> <text>[: <reason>]" then
// plainErrorHeaders then the body.
func jsonForPlainError(p []byte) ([]byte, bool) {
	if (bytes.HasPrefix(p, expectationFailed) || bytes.HasPrefix(p, expectationFailed10)) &&
		bytes.HasSuffix(p, []byte("\r\nContent-Length: 0\r\n\r\n")) {
		return jsonAnswer(http.StatusExpectationFailed, ErrorObject{Code: EExpectationFailed,
			Message: "the Expect header asks for something other than 100-continue, the only expectation this server meets"}), true
	}
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	line, _, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(p[len(line):], []byte(plainErrorHeaders)) {
		return nil, false
	}
	status := strings.TrimPrefix(string(line), "HTTP/1.1 ")
	codeText, rest, _ := strings.Cut(status, " ")
	code, err := strconv.Atoi(codeText)
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	_, reason, _ := strings.Cut(rest, ": ")
	e := ErrorObject{Code: projections.EInvalid, Message: "the request could not be read as HTTP/1.1"}
	switch {
	case code == http.StatusRequestHeaderFieldsTooLarge:
		e = ErrorObject{Code: EHeaderTooLarge, Message: "the request header block is too large (http.max_header_bytes)"}
	case code == http.StatusNotImplemented:
		e = ErrorObject{Code: ENotImplemented, Message: "the request uses a transfer coding this server does not implement"}
	case reason != "":
		e.Message = "the request could not be read: " + reason
	}
	if code != http.StatusBadRequest && code != http.StatusRequestHeaderFieldsTooLarge && code != http.StatusNotImplemented {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(code), " ", "_"))
	}
	return jsonAnswer(code, e), true
}

// expectationFailed begins net/http's answer to an Expect header other
// than 100-continue: a 417 with no body, written through the response
// (so with a Date header) before any handler runs. No handler of this API
// answers 417.
var expectationFailed = []byte("HTTP/1.1 417 Expectation Failed\r\n")

// expectationFailed10 is the same answer to an HTTP/1.0 request.
var expectationFailed10 = []byte("HTTP/1.0 417 Expectation Failed\r\n")

// EExpectationFailed is the code of a request whose Expect header asks for
// anything but 100-continue (417).
const EExpectationFailed = "expectation_failed"

// jsonAnswer is a whole answer with status code and e as its body, and a
// request id of its own, as every answer has; the connection closes after
// it, as it does after net/http's own.
func jsonAnswer(code int, e ErrorObject) []byte {
	body, _ := json.Marshal(ErrorBody{Error: e})
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		code, http.StatusText(code), headerRequestID, plainErrorIDs.New(time.Now()), len(body), body)
}

// plainErrorIDs mints the request ids of the answers net/http gives before
// any handler runs.
var plainErrorIDs = newRequestIDs()
