package delivery

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
	"demosvc/projections"
)

// Config are the delivery settings (config keys delivery.*).
type Config struct {
	Timeout          time.Duration // the whole exchange of one attempt
	MaxRetries       int           // retries after the first attempt
	Backoff          time.Duration // the first retry's delay
	BackoffFactor    float64       // growth per retry
	Concurrency      int           // attempts in flight per webhook
	AllowPrivate     bool
	StandardWebhooks bool
	UserAgent        string
}

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Delivery is one event for one webhook, with its attempt log. It is kept
// durably in the store's delivery keyspace; Body is the exact bytes every
// attempt sends.
type Delivery struct {
	ID             string `msgpack:"id"`
	WebhookID      string `msgpack:"wh"`
	EventID        string `msgpack:"ev"`
	Event          string `msgpack:"e"`
	Seq            uint64 `msgpack:"s"`
	Body           []byte `msgpack:"b"`
	Status         string `msgpack:"st"`
	Attempts       int    `msgpack:"a"`
	LastStatusCode int    `msgpack:"c"`
	LastError      string `msgpack:"er"`
	NextAttemptAt  int64  `msgpack:"n"` // unix ms; 0 when not pending
	CreatedAt      int64  `msgpack:"ca"`
	EventAt        int64  `msgpack:"t"` // the event's commit, unix ms
	UpdatedAt      int64  `msgpack:"ua"`
}

// Keys: 'd' + webhook id + 0x00 + 'c' -> cursor (8 bytes, big-endian);
// 'd' + webhook id + 0x00 + 'r' + delivery id -> Delivery (msgpack).
func webhookPrefix(wh string) []byte {
	return append(append([]byte{eventlog.KeyspaceDelivery}, wh...), 0)
}
func cursorKey(wh string) []byte { return append(webhookPrefix(wh), 'c') }
func deliveryPrefix(wh string) []byte {
	return append(webhookPrefix(wh), 'r')
}
func deliveryKey(wh, id string) []byte { return append(deliveryPrefix(wh), id...) }

// Manager runs one delivery loop per registered webhook.
type Manager struct {
	log     *eventlog.Log
	state   *projections.Projections
	store   *eventlog.Store
	cfg     Config
	client  *http.Client
	logger  *slog.Logger
	ids     *eventlog.IDs
	metrics *metrics

	mu    sync.Mutex
	loops map[string]*loop
	wg    sync.WaitGroup
}

// New returns a manager; Run starts it.
func New(log *eventlog.Log, state *projections.Projections, cfg Config, logger *slog.Logger) *Manager {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "demosvc"
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		log: log, state: state, store: log.Store(), cfg: cfg, logger: logger,
		client:  newClient(cfg.AllowPrivate, cfg.Timeout),
		ids:     eventlog.NewIDs(time.Now),
		loops:   map[string]*loop{},
		metrics: newMetrics(),
	}
}

// Run keeps one loop per registered webhook, starting and stopping loops as
// webhooks come and go, until ctx is done. Then every loop stops taking new
// work, finishes and records the attempts in flight (each bounded by
// delivery.timeout), and Run returns.
func (m *Manager) Run(ctx context.Context) {
	for {
		changed := m.log.Changed()
		m.reconcile()
		select {
		case <-changed:
		case <-ctx.Done():
			m.mu.Lock()
			for _, l := range m.loops {
				close(l.stopping)
			}
			m.mu.Unlock()
			m.wg.Wait()
			return
		}
	}
}

// reconcile starts loops for new webhooks and cancels those of deleted
// ones, whose attempt in flight is cancelled with them.
func (m *Manager) reconcile() {
	targets, errs := m.state.WebhookTargets()
	for _, err := range errs {
		m.logger.Error("webhook secret does not open; not delivering to it", "err", err)
	}
	// targets holds webhooks whose secret did not open as disabled ones:
	// their state is kept, not forgotten.
	live := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range targets {
		live[t.ID] = true
		if t.Disabled {
			if l := m.loops[t.ID]; l != nil {
				l.cancel()
				delete(m.loops, t.ID)
			}
			continue
		}
		if m.loops[t.ID] != nil {
			continue
		}
		// A loop's context ends only when its webhook is deleted: a
		// shutdown lets attempts in flight finish and be recorded.
		lctx, cancel := context.WithCancel(context.Background())
		l := &loop{m: m, t: t, ctx: lctx, cancel: cancel, stopping: make(chan struct{}), retries: make(chan retryReq),
			results: make(chan result, 64), pending: map[string]*Delivery{}}
		m.loops[t.ID] = l
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := l.run()
			if l.deleted.Load() {
				// Only now that nothing of the loop can write any more.
				m.forget(t.ID)
				return
			}
			if err != nil && lctx.Err() == nil {
				m.logger.Error("delivery loop stopped; it restarts at the next event", "webhook_id", t.ID, "err", err)
				m.mu.Lock()
				if m.loops[t.ID] == l {
					delete(m.loops, t.ID)
				}
				m.mu.Unlock()
			}
		}()
	}
	for id, l := range m.loops {
		if !live[id] {
			l.deleted.Store(true)
			l.cancel()
			delete(m.loops, id)
		}
	}
}

// forget drops a deleted webhook's cursor and attempt log.
func (m *Manager) forget(wh string) {
	p := webhookPrefix(wh)
	end := append([]byte(nil), p...)
	end[len(end)-1]++
	if err := m.store.WriteSync(nil, p, end); err != nil {
		m.logger.Warn("dropping a deleted webhook's delivery state", "webhook_id", wh, "err", err)
	}
}

// errWebhookGone stops an attempt whose webhook was deleted or disabled
// before it was sent; it is not counted as an attempt.
var errWebhookGone = errors.New("webhook deleted or disabled")

// ErrNoDelivery reports a delivery id the webhook does not have.
var ErrNoDelivery = errors.New("no such delivery")

// ErrNotFailed reports a retry of a delivery that has not failed.
var ErrNotFailed = errors.New("only a failed delivery can be retried")

type retryReq struct {
	id   string
	done chan retryResult
}

type retryResult struct {
	d   Delivery
	err error
}

// Retry sends a failed delivery again, with a fresh attempt count. It
// returns ErrNoDelivery for an unknown webhook or delivery and ErrNotFailed
// for one that is pending or succeeded.
func (m *Manager) Retry(ctx context.Context, wh, id string) (Delivery, error) {
	m.mu.Lock()
	l := m.loops[wh]
	m.mu.Unlock()
	if l == nil {
		return Delivery{}, ErrNoDelivery
	}
	req := retryReq{id: id, done: make(chan retryResult, 1)}
	select {
	case l.retries <- req:
	case <-l.ctx.Done():
		return Delivery{}, ErrNoDelivery
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
	r := <-req.done
	return r.d, r.err
}

// retry makes a failed delivery pending again, due now.
func (l *loop) retry(id string) (Delivery, error) {
	v, ok, err := l.m.store.Get(deliveryKey(l.t.ID, id))
	if err != nil {
		return Delivery{}, err
	}
	if !ok {
		return Delivery{}, ErrNoDelivery
	}
	var d Delivery
	if err := msgpack.Unmarshal(v, &d); err != nil {
		return Delivery{}, err
	}
	if d.Status != StatusFailed {
		return d, ErrNotFailed
	}
	now := time.Now()
	d.Status, d.Attempts, d.NextAttemptAt, d.UpdatedAt = StatusPending, 0, now.UnixMilli(), now.Unix()
	b, err := msgpack.Marshal(&d)
	if err != nil {
		return Delivery{}, err
	}
	if err := l.m.store.WriteSync([]eventlog.Put{{Key: deliveryKey(l.t.ID, d.ID), Value: b}}, nil, nil); err != nil {
		return Delivery{}, err
	}
	l.pending[d.ID] = &d
	l.ready = append(l.ready, d.ID)
	return d, nil
}

// Deliveries returns a page of a webhook's attempt log, most recent first:
// at most limit deliveries before startingAfter (a delivery id), and
// whether more remain. Delivery ids sort by creation, so the page is read
// from the store by a reverse scan that stops after it.
func (m *Manager) Deliveries(wh string, limit int, startingAfter string) ([]Delivery, bool, error) {
	var before []byte
	if startingAfter != "" {
		before = deliveryKey(wh, startingAfter)
	}
	var out []Delivery
	more := false
	var decodeErr error
	err := m.store.ScanReverse(deliveryPrefix(wh), before, func(_, v []byte) bool {
		if len(out) == limit {
			more = true
			return false
		}
		var d Delivery
		if decodeErr = msgpack.Unmarshal(v, &d); decodeErr != nil {
			return false
		}
		out = append(out, d)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return out, more, err
}

// loop delivers to one webhook. It alone reads and writes the webhook's
// cursor and pending deliveries; attempts run beside it and report back.
type loop struct {
	m        *Manager
	t        projections.Target
	ctx      context.Context // cancelled when the webhook is deleted
	cancel   context.CancelFunc
	stopping chan struct{} // closed at shutdown
	deleted  atomic.Bool   // set before cancel when the webhook is gone
	retries  chan retryReq
	results  chan result
	pending  map[string]*Delivery // not yet succeeded or failed
	busy     map[string]bool      // attempt in flight
	ready    []string             // pending and due now, oldest first
	gone     bool                 // the receiver answered 410 Gone
	failures int                  // consecutive failed attempts
	later    retryHeap            // pending and due later
}

// retryHeap orders deliveries waiting for a retry by when it is due.
type retryHeap []retryAt

type retryAt struct {
	at int64 // unix ms
	id string
}

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryAt)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// schedule queues a pending delivery for its next attempt.
func (l *loop) schedule(d *Delivery) {
	heap.Push(&l.later, retryAt{at: d.NextAttemptAt, id: d.ID})
}

type result struct {
	id     string
	status int
	err    error
	retry  time.Duration // a Retry-After the receiver asked for
}

func (l *loop) run() error {
	defer l.cancel()
	cursor, err := l.loadState()
	if err != nil {
		return err
	}
	l.busy = map[string]bool{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	lag := l.m.metrics.lag.WithLabelValues(l.t.ID)
	defer l.m.metrics.lag.DeleteLabelValues(l.t.ID)
	for {
		select {
		case <-l.stopping:
			return l.drain()
		default:
		}
		changed := l.m.log.Changed()
		head := l.m.log.DurableSeq()
		lag.Set(float64(head - min(head, cursor)))
		// While the receiver keeps failing, build no new deliveries: the
		// cursor stays (durably) behind, so nothing is lost, and a dead
		// receiver costs neither CPU nor disk for every new event. One
		// success, or no delivery left pending, lifts the pause.
		// Likewise with maxPending deliveries still open: a healthy
		// receiver drains them at once, a dead one does not, and memory
		// stays bounded either way.
		paused := l.failures >= breakerFailures && len(l.pending) > 0 || len(l.pending) >= maxPending
		if head > cursor && !paused {
			// One chunk at a time, then attempts: a backlog never keeps
			// this webhook from sending.
			if cursor, err = l.collect(cursor, head); err != nil {
				return err
			}
		}
		wait := l.dispatch()
		if cursor < l.m.log.DurableSeq() && !paused {
			wait = 0
		}
		timer.Reset(wait)
		select {
		case <-changed:
		case <-timer.C:
		case r := <-l.results:
			// Take every result that is waiting: one synced write for all.
			batch := []result{r}
		more:
			for len(batch) < cap(l.results) {
				select {
				case r := <-l.results:
					batch = append(batch, r)
				default:
					break more
				}
			}
			if err := l.record(batch...); err != nil {
				return err
			}
		case req := <-l.retries:
			d, err := l.retry(req.id)
			req.done <- retryResult{d, err}
		case <-l.stopping:
		case <-l.ctx.Done():
			return l.ctx.Err()
		}
	}
}

// drain records the attempts in flight at shutdown, starting none.
func (l *loop) drain() error {
	for len(l.busy) > 0 {
		select {
		case req := <-l.retries:
			req.done <- retryResult{err: errors.New("deliveries are stopping; retry after the restart")}
		case r := <-l.results:
			if err := l.record(r); err != nil {
				return err
			}
		case <-l.ctx.Done():
			return l.ctx.Err()
		}
	}
	return nil
}

// loadState reads the cursor (or starts after the registration) and the
// deliveries still pending, which a restart resumes.
func (l *loop) loadState() (uint64, error) {
	cursor := l.t.From
	if v, ok, err := l.m.store.Get(cursorKey(l.t.ID)); err != nil {
		return 0, err
	} else if ok && len(v) == 8 {
		cursor = binary.BigEndian.Uint64(v)
	}
	err := l.m.store.Scan(deliveryPrefix(l.t.ID), func(_, v []byte) error {
		var d Delivery
		if err := msgpack.Unmarshal(v, &d); err != nil {
			return err
		}
		if d.Status == StatusPending {
			l.pending[d.ID] = &d
			l.schedule(&d)
		}
		return nil
	})
	return cursor, err
}

// breakerFailures consecutive failed attempts pause building new
// deliveries for a webhook until one succeeds.
const breakerFailures = 3

// maxPending bounds the deliveries a webhook has open: past it, no new ones
// are built until some end.
const maxPending = 1024

// maxCollect bounds the records one step of a loop reads.
const maxCollect = 512

// collect turns the records after cursor into pending deliveries and
// stores them with the new cursor in one synced write, before any is sent:
// after a crash, every event is delivered at least once.
func (l *loop) collect(cursor, head uint64) (uint64, error) {
	to := min(head, cursor+maxCollect)
	var puts []eventlog.Put
	var fresh []*Delivery
	now := time.Now()
	err := l.m.log.Read(cursor+1, to, func(rec *eventlog.Record) error {
		if rec.Account != l.t.Account {
			return nil
		}
		name, data, ok := l.m.state.WebhookEvent(rec)
		if !ok || !l.t.Events[name] {
			return nil
		}
		body, err := json.Marshal(envelope{Event: name, Timestamp: rec.Time.UTC().Truncate(time.Second).Format(time.RFC3339), Data: data})
		if err != nil {
			return err
		}
		d := &Delivery{ID: l.m.ids.New("dlv_"), WebhookID: l.t.ID, EventID: rec.ID, Event: name, Seq: rec.Seq, Body: body,
			Status: StatusPending, NextAttemptAt: now.UnixMilli(), CreatedAt: now.Unix(), UpdatedAt: now.Unix(),
			EventAt: rec.Time.UnixMilli()}
		fresh = append(fresh, d)
		return nil
	})
	if err != nil {
		return cursor, err
	}
	if len(fresh) == 0 {
		// Nothing to send: the cursor moves in memory only. After a crash
		// these records are read again and still match nothing.
		return to, nil
	}
	if l.ctx.Err() != nil {
		return cursor, l.ctx.Err() // deleted meanwhile: write nothing more
	}
	for _, d := range fresh {
		v, err := msgpack.Marshal(d)
		if err != nil {
			return cursor, err
		}
		puts = append(puts, eventlog.Put{Key: deliveryKey(l.t.ID, d.ID), Value: v})
	}
	puts = append(puts, eventlog.Put{Key: cursorKey(l.t.ID), Value: binary.BigEndian.AppendUint64(nil, to)})
	if err := l.m.store.WriteSync(puts, nil, nil); err != nil {
		return cursor, err
	}
	for _, d := range fresh {
		l.pending[d.ID] = d
		l.ready = append(l.ready, d.ID)
	}
	return to, nil
}

// envelope is the seed's body of every delivery, and nothing more.
type envelope struct {
	Event     string `json:"event"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// dispatch starts due attempts, at most delivery.concurrency of this
// webhook at once, and returns how long until the next retry is due. The
// bound is per webhook so that a dead receiver, whose attempts each hold a
// slot for delivery.timeout, never takes a healthy webhook's slots.
func (l *loop) dispatch() time.Duration {
	now := time.Now().UnixMilli()
	for l.later.Len() > 0 && l.later[0].at <= now {
		l.ready = append(l.ready, heap.Pop(&l.later).(retryAt).id)
	}
	for len(l.ready) > 0 && len(l.busy) < l.m.cfg.Concurrency {
		id := l.ready[0]
		l.ready = l.ready[1:]
		d := l.pending[id]
		if d == nil || l.busy[id] {
			continue
		}
		l.busy[id] = true
		go l.attempt(*d)
	}
	if l.later.Len() == 0 {
		return time.Hour
	}
	return time.Duration(l.later[0].at-now) * time.Millisecond
}

// maxResponseBody is what is read of a receiver's answer: enough to reuse
// the connection, never a 100 MB body.
const maxResponseBody = 64 << 10

// attempt sends one delivery once and reports the outcome to the loop.
func (l *loop) attempt(d Delivery) {
	r := result{id: d.ID}
	defer func() {
		select {
		case l.results <- r:
		case <-l.ctx.Done():
		}
	}()
	if !l.m.state.WebhookExists(l.t.ID) {
		r.err = errWebhookGone
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.m.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.t.URL, bytes.NewReader(d.Body))
	if err != nil {
		r.err = err
		return
	}
	if err := setHeaders(req.Header, l.t.Secret, &d, d.Attempts+1, time.Now().Unix(), l.m.cfg.StandardWebhooks, l.m.cfg.UserAgent); err != nil {
		r.err = err
		return
	}
	resp, err := l.m.client.Do(req)
	if err != nil {
		r.err = err
		return
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	resp.Body.Close()
	r.status = resp.StatusCode
	if err != nil && ctx.Err() != nil {
		r.err = fmt.Errorf("the whole exchange took longer than %s: %w", l.m.cfg.Timeout, ctx.Err())
		if l.ctx.Err() != nil {
			r.err = l.ctx.Err() // the webhook was deleted meanwhile
		}
	}
	if s := resp.Header.Get("Retry-After"); s != "" && (r.status == 429 || r.status == 503) {
		var secs int
		if _, err := fmt.Sscan(s, &secs); err == nil && secs > 0 {
			r.retry = min(time.Duration(secs)*time.Second, time.Hour)
		}
	}
}

// record applies attempts' outcomes and stores them in one synced write.
func (l *loop) record(results ...result) error {
	var puts []eventlog.Put
	var ended []string
	for _, r := range results {
		d := l.apply(r)
		if d == nil {
			continue
		}
		v, err := msgpack.Marshal(d)
		if err != nil {
			return err
		}
		puts = append(puts, eventlog.Put{Key: deliveryKey(l.t.ID, d.ID), Value: v})
		if d.Status != StatusPending {
			ended = append(ended, d.ID)
		}
	}
	if len(puts) == 0 || l.ctx.Err() != nil {
		return nil
	}
	if err := l.m.store.WriteSync(puts, nil, nil); err != nil {
		return err
	}
	for _, id := range ended {
		delete(l.pending, id)
	}
	if l.gone {
		return l.disable()
	}
	return nil
}

// disable ends a webhook whose receiver answered 410 Gone: its other
// pending deliveries fail (stored first, so a crash cannot leave them
// pending for ever), then the webhook.disabled event is recorded and the
// loop stops.
func (l *loop) disable() error {
	var puts []eventlog.Put
	now := time.Now().Unix()
	for id, d := range l.pending {
		if l.busy[id] {
			continue
		}
		d.Status, d.NextAttemptAt, d.UpdatedAt = StatusFailed, 0, now
		d.LastError = "not sent: the webhook was disabled after 410 Gone"
		v, err := msgpack.Marshal(d)
		if err != nil {
			return err
		}
		puts = append(puts, eventlog.Put{Key: deliveryKey(l.t.ID, id), Value: v})
		delete(l.pending, id)
	}
	if len(puts) > 0 {
		if err := l.m.store.WriteSync(puts, nil, nil); err != nil {
			return err
		}
	}
	if err := l.m.state.DisableWebhook(context.Background(), l.t.ID, "the receiver answered 410 Gone"); err != nil {
		return fmt.Errorf("disabling the webhook after 410 Gone: %w", err)
	}
	l.cancel()
	return nil
}

// apply updates the delivery an attempt was for, or returns nil when there
// is nothing to record (the webhook is gone).
func (l *loop) apply(r result) *Delivery {
	delete(l.busy, r.id)
	d := l.pending[r.id]
	if d == nil || errors.Is(r.err, errWebhookGone) || errors.Is(r.err, context.Canceled) && l.ctx.Err() != nil {
		return nil // nothing was sent, or the webhook is gone: not an attempt
	}
	now := time.Now()
	d.Attempts++
	d.LastStatusCode = r.status
	d.UpdatedAt = now.Unix()
	switch {
	case r.err == nil && r.status >= 200 && r.status < 300:
		d.Status, d.LastError, d.NextAttemptAt = StatusSucceeded, "", 0
		l.failures = 0
		l.m.metrics.attempts.WithLabelValues("succeeded").Inc()
		if d.EventAt > 0 {
			l.m.metrics.latency.Observe(time.Since(time.UnixMilli(d.EventAt)).Seconds())
		}
	case r.err == nil && r.status == http.StatusGone:
		// The receiver says the endpoint is gone for good: stop sending
		// anything to this webhook.
		d.Status, d.NextAttemptAt = StatusFailed, 0
		d.LastError = "the receiver answered 410 Gone; the webhook is disabled"
		l.m.metrics.attempts.WithLabelValues("disabled").Inc()
		l.gone = true
	default:
		l.failures++
		d.LastError = describe(r, l.m.cfg.Timeout)
		if d.Attempts > l.m.cfg.MaxRetries {
			d.Status, d.NextAttemptAt = StatusFailed, 0
			l.m.metrics.attempts.WithLabelValues("failed").Inc()
		} else {
			l.m.metrics.attempts.WithLabelValues("retrying").Inc()
			wait := l.backoff(d.Attempts)
			if r.retry > wait {
				wait = r.retry
			}
			d.NextAttemptAt = now.Add(wait).UnixMilli()
			l.schedule(d)
		}
	}
	return d
}

// backoff is delivery.backoff * factor^(n-1), ±20% jitter, for the n-th
// retry.
func (l *loop) backoff(n int) time.Duration {
	base := float64(l.m.cfg.Backoff) * math.Pow(l.m.cfg.BackoffFactor, float64(n-1))
	return time.Duration(base * (0.8 + 0.4*rand.Float64()))
}

// describe is the last_error of a failed attempt.
func describe(r result, timeout time.Duration) string {
	switch {
	case r.err == nil:
		return fmt.Sprintf("the receiver answered %d %s", r.status, http.StatusText(r.status))
	case errors.Is(r.err, ErrRefusedAddress):
		return r.err.Error()
	case errors.Is(r.err, context.DeadlineExceeded):
		return fmt.Sprintf("no complete answer within %s", timeout)
	default:
		return r.err.Error()
	}
}
