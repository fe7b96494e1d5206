package delivery

import (
	"errors"
	"time"

	"github.com/oklog/ulid/v2"

	"demosvc/eventlog"
)

// Retention (delivery.retention): deliveries and their attempts older
// than the retention are removed, in steps of bounded work, by the one
// writer of each webhook's delivery state: its loop, or, for a disabled
// webhook without a loop, the dispatcher under its lock. The log's events
// stay: they are the audit history.

// pruneBatch bounds the deliveries one retention step reads and removes.
const pruneBatch = 256

// pruneEvery is how often retention looks again once a step found nothing
// more to remove.
const pruneEvery = time.Minute

// errStop ends a scan early.
var errStop = errors.New("stop")

// idFloor is the smallest id with prefix minted at t: every id minted at
// or after t sorts at or after it.
func idFloor(prefix string, t time.Time) string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	return eventlog.FormatID(prefix, id)
}

// pruneStep removes, oldest first, at most pruneBatch deliveries of wh
// created before cutoff, and their attempts, stopping at the first one
// that is younger, pending in the store (a disabled webhook keeps its
// pending deliveries for when it is enabled again), of an event past the
// stored cursor (a test sent ahead of it), or that keep holds (a delivery
// pending in a loop's memory). Delivery ids sort by creation, so
// what it removes is a run at the start of the keyspace: range deletions,
// attempts and the event index first, deliveries last (a crash between
// leaves deliveries without attempts, which the next step removes). It
// reports whether more may remain.
func (s deliveryStore) pruneStep(wh string, cutoff time.Time, keep func(id string) bool) (bool, error) {
	// A delivery of an event past the stored cursor is a test sent ahead
	// of it (testNow): removed, it would be built and sent again when the
	// cursor passes its event.
	cursor, _, err := s.cursor(wh)
	if err != nil {
		return false, err
	}
	prefix := deliveryPrefix(wh)
	var firstKept string
	var lastSeq uint64 // the highest event seq of the removed deliveries
	n := 0
	err = s.db.Scan(prefix, func(k, v []byte) error {
		id := string(k[len(prefix):])
		d, err := decodeDelivery(v)
		if err != nil {
			return err
		}
		if n == pruneBatch || !time.Unix(d.CreatedAt, 0).Before(cutoff) || d.Status == StatusPending || d.Seq > cursor || keep(id) {
			firstKept = id
			return errStop
		}
		n++
		lastSeq = max(lastSeq, d.Seq)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	end := func(space byte) []byte {
		if firstKept == "" {
			e := append(webhookPrefix(wh), space)
			e[len(e)-1]++
			return e
		}
		return append(append(webhookPrefix(wh), space), firstKept...)
	}
	if err := s.w.WriteSync(nil, append(webhookPrefix(wh), 'a'), end('a')); err != nil {
		return false, err
	}
	// The event index (outcomes.go) up to the removed deliveries' events:
	// a replayed delivery of an older event, younger than these, loses its
	// place on the session timeline, not its delivery.
	if err := s.w.WriteSync(nil, append(webhookPrefix(wh), 's'), eventIndexKey(wh, lastSeq+1, "")); err != nil {
		return false, err
	}
	if err := s.w.WriteSync(nil, prefix, end('r')); err != nil {
		return false, err
	}
	return n == pruneBatch, nil
}

// prune runs one retention step of the loop's webhook when one is due and
// returns how long until the next is.
func (l *loop) prune() (time.Duration, error) {
	keep := l.dp.cfg.Retention
	if keep <= 0 {
		return time.Hour, nil
	}
	now := l.dp.clock.Now()
	if now.Before(l.nextPrune) {
		return l.nextPrune.Sub(now), nil
	}
	more, err := l.dp.store.pruneStep(l.t.ID, now.Add(-keep), func(id string) bool { return l.pending[id] != nil })
	if err != nil || more {
		return 0, err // more: the next step after this round's work
	}
	l.nextPrune = now.Add(pruneEvery)
	return pruneEvery, nil
}

// pruneIdleStep runs one retention step for queue[0], of the webhooks that
// have no loop (the disabled ones) and may have old deliveries to remove,
// and returns the queue left: queue[0] stays first while it has more. The
// dispatcher's lock keeps a loop from starting for it meanwhile. Their
// pending deliveries stay: enabled again, a webhook is sent what it
// missed.
//
// Run takes one step at a time, between the rest of its work: all of a
// large backlog at once (a webhook disabled after 220,000 deliveries, its
// retention due) held up every other webhook's deliveries, and the
// cancellation of attempts on delete, for 40 s.
func (dp *Dispatcher) pruneIdleStep(queue []string) []string {
	keep := dp.cfg.Retention
	if keep <= 0 || len(queue) == 0 {
		return nil
	}
	wh := queue[0]
	dp.mu.Lock()
	more := false
	var err error
	if dp.loops[wh] == nil && dp.ending[wh] == nil { // no loop writes its state, nor still ends
		more, err = dp.store.pruneStep(wh, dp.clock.Now().Add(-keep), func(string) bool { return false })
	}
	dp.mu.Unlock()
	if err != nil {
		dp.logger.Warn("removing old deliveries of a disabled webhook", "webhook_id", wh, "err", err)
	}
	if more && err == nil {
		return queue
	}
	return queue[1:]
}
