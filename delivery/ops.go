package delivery

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"demosvc/eventlog"
	"demosvc/projections"
)

// What the loop does for webhook operations (issue 12): it takes updated
// targets (PATCH, rotation), builds deliveries of test events and of
// recover and replay requests when its cursor passes them, keeps every
// attempt's detail, and tracks since when a webhook has been failing.

// target is the webhook as last updated: URL, events, secrets, rate.
func (l *loop) target() *projections.Target { return l.cur.Load() }

// update hands the loop a newer target; attempts started after it use it.
func (l *loop) update(t projections.Target) {
	if l.target().Version != t.Version {
		l.cur.Store(&t)
	}
}

// current is the target as the state has it now: a rotation or PATCH
// acknowledged before an attempt starts is in force for it, whether or
// not the dispatcher has handed it over yet. It reports false when the
// webhook was deleted or disabled.
func (l *loop) current() (*projections.Target, bool) {
	v, ok := l.dp.state.WebhookVersion(l.t.ID)
	if !ok {
		return nil, false
	}
	if t := l.target(); t.Version == v {
		return t, true
	}
	if t, found := l.dp.state.WebhookTarget(l.t.ID); found && !t.Disabled {
		l.update(t)
	}
	return l.target(), true
}

// newDelivery builds the delivery of rec to t, if t is sent it: a
// subscribed event, or a test event of t (whose delivery id and times the
// request fixed, so that its answer shows the delivery made here).
func (l *loop) newDelivery(rec *eventlog.Record, t *projections.Target, now time.Time) (*Delivery, bool, error) {
	name, data, ok := l.dp.state.WebhookEventFor(rec, t)
	if !ok {
		return nil, false, nil
	}
	id := ""
	if req, ok := l.dp.state.TestRequest(rec); ok {
		id = req.DeliveryID
	} else {
		id = l.dp.ids.New(PrefixDelivery)
	}
	d, err := buildDelivery(rec, t.ID, name, data, id, now)
	if err != nil {
		return nil, false, err
	}
	if name == "webhook.test" {
		*d = TestDelivery(rec, id, t.ID, d.Body)
		d.NextAttemptAt = min(d.NextAttemptAt, now.UnixMilli()) // a record time ahead of this clock does not hold it back
	}
	return d, true, nil
}

func buildDelivery(rec *eventlog.Record, wh, name string, data any, id string, now time.Time) (*Delivery, error) {
	body, err := json.Marshal(envelope{Event: name, Timestamp: rec.Time.UTC().Truncate(time.Second).Format(time.RFC3339), Data: data})
	if err != nil {
		return nil, err
	}
	return &Delivery{ID: id, WebhookID: wh, EventID: rec.ID, Event: name, Seq: rec.Seq, Body: body,
		Status: StatusPending, NextAttemptAt: now.UnixMilli(), CreatedAt: now.Unix(), UpdatedAt: now.Unix(),
		EventAt: rec.Time.UnixMilli()}, nil
}

// SendTest records a webhook.test event for webhook wh of pr's account
// and answers its delivery, pending (a Replay under an Idempotency-Key
// already used): the one path of POST /v1/webhooks/{id}/test and the
// dashboard's button. The test is sent at once even while the webhook's
// loop is paused (its breaker open, or maxPending deliveries open), ahead
// of the events held back (testNow), so that a receiver just repaired can
// be checked without waiting for a failing delivery's next retry; its
// success closes the breaker.
func (dp *Dispatcher) SendTest(ctx context.Context, pr projections.Principal, wh, message string, idem *projections.Idempotency) (any, error) {
	id := dp.NewDeliveryID()
	var seq uint64
	v, err := dp.state.TestWebhook(ctx, pr, wh, message, id, idem, func(rec *eventlog.Record) any {
		seq = rec.Seq
		return TestDelivery(rec, id, wh, nil)
	})
	if err == nil && seq > 0 {
		dp.mu.Lock()
		l := dp.loops[wh]
		dp.mu.Unlock()
		if l != nil {
			select {
			case l.tests <- seq:
			default: // 64 asked at once: the loop reads the rest in turn
			}
		}
	}
	return v, err
}

// testsNow acts on the tests asked for: one the cursor has passed was
// read in turn; with the loop paused (its breaker open, or maxPending
// deliveries open), so reading nothing until it closes, each other is sent
// at once (testNow). The rest wait: the loop is reading toward them, and
// may pause before it reaches them.
func (l *loop) testsNow(cursor uint64, paused bool) error {
	keep := l.testSeqs[:0]
	for _, seq := range l.testSeqs {
		switch {
		case seq <= cursor:
		case paused:
			if err := l.testNow(seq); err != nil {
				return err
			}
		default:
			keep = append(keep, seq)
		}
	}
	l.testSeqs = keep
	return nil
}

// testNow sends the test of record seq, past the cursor, at once: it reads
// that record alone, stores its delivery without moving the cursor, and
// sends it once stored. When the cursor later passes the record, collect
// finds the delivery stored and builds it no more (and retention keeps a
// delivery past the stored cursor).
func (l *loop) testNow(seq uint64) error {
	t := l.target()
	if cur, ok := l.current(); ok {
		t = cur
	}
	var d *Delivery
	err := l.dp.log.ReadSeqs([]uint64{seq}, func(rec *eventlog.Record) error {
		var ok bool
		var err error
		if d, ok, err = l.newDelivery(rec, t, l.dp.clock.Now()); !ok {
			d = nil
		}
		return err
	})
	if err != nil || d == nil {
		return err
	}
	if build, err := l.notSentEarly(d.ID); err != nil || !build {
		return err
	}
	fresh := []*Delivery{d}
	if err := l.start(write{fresh: fresh}, func() func() error { return l.dp.store.startPutFresh(l.t.ID, fresh) }); err != nil {
		return err
	}
	l.pending[d.ID] = d
	return nil
}

// notSentEarly reports whether the test delivery id is still to be built:
// testNow has not sent it ahead of the cursor.
func (l *loop) notSentEarly(id string) (bool, error) {
	if l.pending[id] != nil {
		return false, nil
	}
	_, found, err := l.dp.store.get(l.t.ID, id)
	return !found, err
}

// TestDelivery is the delivery of a webhook.test record, as the loop
// stores it and as POST /v1/webhooks/{id}/test answers it: pending, its
// times the record's.
func TestDelivery(rec *eventlog.Record, id, wh string, body []byte) Delivery {
	return Delivery{ID: id, WebhookID: wh, EventID: rec.ID, Event: "webhook.test", Seq: rec.Seq, Body: body,
		Status: StatusPending, NextAttemptAt: rec.Time.UnixMilli(), CreatedAt: rec.Time.Unix(), UpdatedAt: rec.Time.Unix(),
		EventAt: rec.Time.UnixMilli()}
}

// redeliver carries out recover and replay requests: failed deliveries
// become pending with a fresh attempt count (those no longer failed are
// left alone), and each replayed event becomes a new delivery with the
// event's id, so that receivers dedupe.
func (l *loop) redeliver(reqs []*projections.WebhookRedeliveryRequested, t *projections.Target, now time.Time) ([]*Delivery, error) {
	var out []*Delivery
	seen := map[string]bool{}
	for _, req := range reqs {
		for _, id := range req.DeliveryIDs {
			if seen[id] || l.pending[id] != nil {
				continue
			}
			d, ok, err := l.dp.store.get(l.t.ID, id)
			if err != nil {
				return nil, err
			}
			if !ok || d.Status != StatusFailed {
				continue
			}
			seen[id] = true
			d.Status, d.Attempts, d.NextAttemptAt, d.UpdatedAt = StatusPending, 0, now.UnixMilli(), now.Unix()
			out = append(out, &d)
		}
		for _, seq := range req.Seqs {
			err := l.dp.log.Read(seq, seq, func(rec *eventlog.Record) error {
				if rec.Account != l.t.Account {
					return nil // never another account's record (the request's check holds it too)
				}
				name, data, ok := l.dp.state.WebhookEvent(rec)
				if !ok || name == "webhook.test" {
					return nil
				}
				d, err := buildDelivery(rec, l.t.ID, name, data, l.dp.ids.New(PrefixDelivery), now)
				if err == nil {
					out = append(out, d)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// failingFor returns the failing mark, void if the webhook changed since
// it was set.
func (l *loop) failingFor(version uint64) int64 {
	if version != l.failingVersion {
		return 0
	}
	return l.failing
}

// keepAttempt numbers the attempt r of d, moves the failing mark, and
// returns the attempt's detail to store.
func (l *loop) keepAttempt(d *Delivery, r result, failing *int64) keptAttempt {
	d.Serial++
	r.detail.N = d.Serial
	if r.detail.Error == "" && d.Status != StatusSucceeded {
		r.detail.Error = d.LastError // an answer that is not 2xx, in words
	}
	if d.Status == StatusSucceeded {
		*failing = 0
	} else if *failing == 0 {
		*failing = r.detail.StartedAt
	}
	return keptAttempt{id: d.ID, detail: r.detail}
}

// failedTooLong reports whether every attempt has failed for
// delivery.disable_after.
func (l *loop) failedTooLong() bool {
	after := l.dp.cfg.DisableAfter
	return after > 0 && l.failing != 0 && l.dp.clock.Now().Sub(time.UnixMilli(l.failing)) >= after
}

// Key: 'd' + webhook id + 0x00 + 'f' -> unix ms since every attempt has
// failed (0: the last attempt succeeded), then the webhook's version when
// it was set (8 bytes each, big-endian). A mark of another version is
// void: enabling, PATCHing or rotating starts the count again.
func failingKey(wh string) []byte { return append(webhookPrefix(wh), 'f') }

func failingPut(wh string, since int64, version uint64) eventlog.Put {
	v := binary.BigEndian.AppendUint64(nil, uint64(since))
	return eventlog.Put{Key: failingKey(wh), Value: binary.BigEndian.AppendUint64(v, version)}
}

// failingSince returns the webhook's failing mark for version, 0 if none.
func (s deliveryStore) failingSince(wh string, version uint64) (int64, error) {
	v, ok, err := s.db.Get(failingKey(wh))
	if err != nil || !ok || len(v) != 16 || binary.BigEndian.Uint64(v[8:]) != version {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// throttle is a token bucket of rate_limit_per_second on the delivery
// clock: a burst of one second's worth, refilled evenly.
type throttle struct {
	tokens float64
	last   time.Time
	rate   int
}

// take spends one token and returns 0, or returns how long until one is
// there; with limit 0 it always returns 0.
func (b *throttle) take(limit int, now time.Time) time.Duration {
	if limit <= 0 {
		return 0
	}
	if b.rate != limit || b.last.IsZero() {
		b.rate, b.tokens, b.last = limit, float64(limit), now
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(float64(limit), b.tokens+dt.Seconds()*float64(limit))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return max(time.Millisecond, time.Duration((1-b.tokens)/float64(limit)*float64(time.Second)))
}

// Detail returns one delivery of webhook wh with every attempt kept of
// it, or ErrNoDelivery.
func (dp *Dispatcher) Detail(wh, id string) (DeliveryDetail, error) {
	d, ok, err := dp.store.get(wh, id)
	if err != nil {
		return DeliveryDetail{}, err
	}
	if !ok {
		return DeliveryDetail{}, ErrNoDelivery
	}
	log, err := dp.store.attemptsOf(wh, id)
	if err != nil {
		return DeliveryDetail{}, err
	}
	if log == nil {
		log = []Attempt{}
	}
	for i := range log {
		log[i].withDerived(&d, dp.cfg.UserAgent)
	}
	return DeliveryDetail{Delivery: d, Log: log}, nil
}

// decodeDelivery decodes a stored delivery.
func decodeDelivery(v []byte) (Delivery, error) {
	var d Delivery
	err := msgpack.Unmarshal(v, &d)
	return d, err
}
