package delivery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"demosvc/projections"
)

// result is the outcome of one attempt on the wire.
type result struct {
	id         string
	status     int   // the receiver's answer; 0 when there was none
	err        error // why there was no complete answer
	retryAfter time.Duration
	// detail is what the attempt detail shows of the exchange: times,
	// headers both ways, the start of the answer's body.
	detail Attempt
}

// maxResponseBody is what is read of a receiver's answer: enough to reuse
// the connection, never a 100 MB body.
const maxResponseBody = 64 << 10

// sender makes one attempt on the wire: a signed POST of a delivery's body
// to its webhook, bounded by delivery.timeout for the whole exchange. It
// knows nothing of retries or storage.
type sender struct {
	transport        *transport
	clock            Clock // the webhook-timestamp header
	timeout          time.Duration
	standardWebhooks bool
	userAgent        string
}

// send POSTs d to t once. ctx ends the attempt early (the webhook was
// deleted); the exchange's own deadline is the network's, on real time.
func (s *sender) send(ctx context.Context, t projections.Target, d Delivery, keys *signers, reqs *requests) (r result) {
	r = result{id: d.ID}
	now := s.clock.Now()
	began := time.Now() // the duration is the network's, on real time
	r.detail.StartedAt = now.UnixMilli()
	defer func() {
		r.detail.DurationMS = time.Since(began).Milliseconds()
		r.detail.StatusCode = r.status
		if r.err != nil {
			r.detail.Error = r.err.Error()
		}
	}()
	to, err := reqs.to(t.URL)
	if err != nil {
		r.err = err
		return r
	}
	sg := keys.get(t.Signing(now))
	header := sg.header()
	if err = setHeaders(header, sg, &d, d.Attempts+1, now.Unix(), s.standardWebhooks, s.userAgent, &r.detail.sent); err != nil {
		keys.put(sg)
		r.err = err
		return r
	}
	// No redirect is followed. The error reads as an http.Client's would,
	// an HTTP answer to TLS named as http.Client names it.
	resp, err := s.transport.post(ctx, began.Add(s.timeout), to, header, d.Body)
	if err != nil {
		keys.put(sg) // nothing holds its header block once post returns
		var tlsErr tls.RecordHeaderError
		if errors.As(err, &tlsErr) && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		r.err = &url.Error{Op: "Post", URL: to.URL.Redacted(), Err: err}
		return r
	}
	r.detail.answer = keptHeader(resp.Header)
	// The head is kept, in a buffer of its size when the answer says it;
	// the rest is read through io.Discard's pooled buffer, not a 32 KiB
	// one of io.Copy's per attempt.
	body := io.LimitReader(resp.Body, maxResponseBody)
	var head []byte
	if resp.ContentLength >= 0 {
		head = make([]byte, min(resp.ContentLength, maxKeptBody))
		var n int
		n, err = io.ReadFull(body, head)
		head = head[:n]
	} else {
		head, err = io.ReadAll(io.LimitReader(body, maxKeptBody))
	}
	if err == nil {
		_, err = io.Copy(io.Discard, body)
	}
	resp.Body.Close()
	keys.put(sg)
	if len(head) > 0 {
		r.detail.ResponseBody = head
	}
	r.status = resp.StatusCode
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.err = ctx.Err() // the webhook was deleted meanwhile
	default:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("the whole exchange took longer than %s: %w", s.timeout, context.DeadlineExceeded)
		} else {
			err = fmt.Errorf("reading the answer's body: %w", err)
		}
		if r.status/100 == 2 {
			// A 2xx succeeds with its whole answer only (DESIGN.md: the
			// whole exchange within delivery.timeout): one that stalls or
			// breaks off (cut short, a malformed chunk) fails.
			r.err = err
		} else {
			// Any other status fails, or disables (410), by itself: the
			// body's error is the attempt detail's.
			r.detail.Error = err.Error()
		}
	}
	r.retryAfter = retryAfter(r.status, resp.Header.Get("Retry-After"), now)
	return r
}

// requests holds a loop's attempts' target: the webhook's URL parsed once
// into a request that the transport only reads. Attempts of one loop share
// it; an updated URL replaces it.
type requests struct{ template atomic.Pointer[postTemplate] }

type postTemplate struct {
	url string
	req *http.Request
}

// to returns the request of url, parsed once.
func (p *requests) to(url string) (*http.Request, error) {
	t := p.template.Load()
	if t == nil || t.url != url {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		if err != nil {
			return nil, err
		}
		t = &postTemplate{url: url, req: req}
		p.template.Store(t)
	}
	return t.req, nil
}
