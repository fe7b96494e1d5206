package delivery

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"demosvc/projections"
)

// result is the outcome of one attempt on the wire.
type result struct {
	id         string
	status     int   // the receiver's answer; 0 when there was none
	err        error // why there was no complete answer
	retryAfter time.Duration
	took       time.Duration // the exchange, as the attempt log shows it
}

// maxResponseBody is what is read of a receiver's answer: enough to reuse
// the connection, never a 100 MB body.
const maxResponseBody = 64 << 10

// sender makes one attempt on the wire: a signed POST of a delivery's body
// to its webhook, bounded by delivery.timeout for the whole exchange. It
// knows nothing of retries or storage.
type sender struct {
	client           *http.Client
	clock            Clock // the webhook-timestamp header
	timeout          time.Duration
	standardWebhooks bool
	userAgent        string
}

// send POSTs d to t once. ctx ends the attempt early (the webhook was
// deleted); the exchange's own deadline is the network's, on real time.
func (s *sender) send(ctx context.Context, t projections.Target, d Delivery) (r result) {
	r = result{id: d.ID}
	start := time.Now() // a duration shown to people; the clock is for schedules
	defer func() { r.took = time.Since(start) }()
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, t.URL, bytes.NewReader(d.Body))
	if err != nil {
		r.err = err
		return r
	}
	if err := setHeaders(req.Header, t.Secret, &d, d.Attempts+1, s.clock.Now().Unix(), s.standardWebhooks, s.userAgent); err != nil {
		r.err = err
		return r
	}
	resp, err := s.client.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	r.status = resp.StatusCode
	if err != nil && actx.Err() != nil {
		r.err = fmt.Errorf("the whole exchange took longer than %s: %w", s.timeout, actx.Err())
		if ctx.Err() != nil {
			r.err = ctx.Err() // the webhook was deleted meanwhile
		}
	}
	r.retryAfter = retryAfter(r.status, resp.Header.Get("Retry-After"))
	return r
}
