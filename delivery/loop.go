package delivery

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// loop delivers to one webhook. Invariant: it alone reads and writes the
// webhook's cursor and pending deliveries, and it stores a delivery (with
// the cursor past its event) before the delivery's first attempt, and each
// attempt's outcome before acting on it. Attempts run beside it and report
// back on results.
type loop struct {
	dp        *Dispatcher
	t         projections.Target
	ctx       context.Context // cancelled when the webhook is deleted
	cancel    context.CancelFunc
	stopping  chan struct{} // closed at shutdown
	deleted   atomic.Bool   // set before cancel when the webhook is gone
	finished  bool          // run has returned; guarded by the dispatcher's mu
	retryReqs chan retryReq
	sends     chan Delivery // to an idle sender (sendOne)
	results   chan result
	retry     retryState
	pending   map[string]*Delivery // not yet succeeded or failed
	busy      map[string]bool      // attempt in flight
	ready     []string             // pending and due now, oldest first
	later     retryHeap            // pending and due later

	// wake is poked when a record of the webhook's account is durable
	// (Dispatcher.fanOut): the loop reads only its account's records.
	wake chan struct{}
	seqs []uint64 // collect's seqs, kept for the next
	// tests takes the seqs of webhook.test records asked for
	// (Dispatcher.SendTest); testSeqs keeps them until the cursor passes
	// them or, the loop paused, they are sent at once (testsNow).
	tests    chan uint64
	testSeqs []uint64

	cur            atomic.Pointer[projections.Target] // l.t as updated since (ops.go)
	failing        int64                              // unix ms since every attempt failed; 0: not failing
	failingVersion uint64                             // the target version failing was counted for
	throttle       throttle                           // rate_limit_per_second
	nextPrune      time.Time                          // the next retention step (retention.go)
	hours          hourlyCounts                       // attempts' outcomes of the current hours
	signers        signers                            // attempts' keyed MACs and header blocks
	requests       requests                           // attempts' requests, from the URL parsed once

	// Writes whose fsync has not returned, oldest first: the loop starts
	// them and goes on; awaitWrites waits for each in turn and hands it
	// back on written, where the loop acts on it (stored).
	writes    chan write
	written   chan write
	inflight  int
	unwritten write     // outcomes recorded since the last write started
	heldSince time.Time // when the oldest of them was recorded
	spare     write     // a stored write's slices of outcomes, for the next unwritten
}

// maxWritesInFlight bounds a loop's writes awaiting their fsync; written
// holds as many, so that awaitWrites never waits for the loop. Outcomes
// gather in unwritten meanwhile (see maybeFlush).
const maxWritesInFlight = 2

// Outcomes are written in batches: a write, and its fsync, cost the loop
// about as much whether it holds one outcome or a hundred, and writing
// each handful of outcomes as it came (every 7 deliveries at 12k/s) halved
// the deliveries per second (BenchmarkDeliveries, unstored=outcomes). A
// batch is written when it holds outcomeBatch outcomes, or no attempt is
// in flight to add to it, or its oldest has waited maxOutcomeHold; and
// then at once unless maxWritesInFlight are syncing, so that a stream of
// new deliveries' writes never holds it back. Holding an outcome delays
// only what waits for it to be durable: leaving the pending set, a retry's
// schedule, and the attempt log's view of it.
const (
	outcomeBatch   = 128
	maxOutcomeHold = 20 * time.Millisecond
)

// write is one started write of new deliveries or attempts' outcomes.
type write struct {
	wait     func() error
	err      error       // wait's result
	fresh    []*Delivery // new deliveries, sent once stored
	outcomes []*Delivery // deliveries with an attempt's outcome
	attempts []keptAttempt
}

func newLoop(dp *Dispatcher, t projections.Target) *loop {
	// A loop's context ends only when its webhook is deleted: a shutdown
	// lets attempts in flight finish and be recorded.
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{dp: dp, t: t, ctx: ctx, cancel: cancel, stopping: make(chan struct{}), retryReqs: make(chan retryReq),
		sends: make(chan Delivery), results: make(chan result, 64), retry: retryState{policy: dp.policy},
		pending: map[string]*Delivery{}, busy: map[string]bool{}, wake: make(chan struct{}, 1), tests: make(chan uint64, 64),
		writes: make(chan write, maxWritesInFlight), written: make(chan write, maxWritesInFlight)}
	l.cur.Store(&t)
	return l
}

// setLag records the loop's lag: the records of its account after cursor,
// up to head, that it has still to read.
func (l *loop) setLag(cursor, head uint64) {
	_, n := l.dp.state.AccountSeqsBetween(nil, l.t.Account, cursor, head, 0)
	l.dp.metrics.setLag(l.t.ID, uint64(n))
}

// poke wakes the loop if it waits, or makes its next wait return at once.
func (l *loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// schedule queues a pending delivery for its next attempt.
func (l *loop) schedule(d *Delivery) { l.later.push(d) }

func (l *loop) run() error {
	defer l.cancel()
	cursor, err := l.loadState()
	if err != nil {
		return err
	}
	go l.awaitWrites()
	defer l.endWrites()
	timer := l.dp.clock.NewTimer(time.Hour)
	defer timer.Stop()
	defer l.dp.metrics.forgetLag(l.t.ID)
	l.setLag(cursor, l.dp.log.DurableSeq())
	for {
		select {
		case <-l.stopping:
			return l.drain()
		default:
		}
		head := l.dp.log.DurableSeq()
		paused := l.retry.paused(len(l.pending))
		if len(l.testSeqs) > 0 {
			if err := l.testsNow(cursor, paused); err != nil {
				return err
			}
		}
		more := false
		if head > cursor && paused {
			l.setLag(cursor, head) // it grows while the loop reads nothing
		}
		if head > cursor && !paused {
			// One chunk at a time, between attempts: a backlog never
			// keeps this webhook from sending, nor its free slots idle
			// while the chunk is built.
			l.dispatch()
			if cursor, more, err = l.collect(cursor, head); err != nil {
				return err
			}
		}
		wait := l.dispatch()
		if more {
			wait = 0
		}
		if err := l.maybeFlush(); err != nil {
			return err
		}
		if len(l.unwritten.outcomes) > 0 && l.inflight < maxWritesInFlight {
			// A batch held for more outcomes is written by its deadline.
			wait = min(wait, max(0, l.heldSince.Add(maxOutcomeHold).Sub(l.dp.clock.Now())))
		}
		next, err := l.prune()
		if err != nil {
			return err
		}
		wait = min(wait, next)
		timer.Reset(wait)
		select {
		case <-l.wake:
		case <-timer.C():
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
		case w := <-l.written:
			if err := l.stored(w); err != nil {
				return err
			}
			if err := l.maybeFlush(); err != nil {
				return err
			}
		case req := <-l.retryReqs:
			d, err := l.retryFailed(req.id)
			req.done <- retryResult{d, err}
		case seq := <-l.tests:
			l.testSeqs = append(l.testSeqs, seq) // acted on at the top of the loop
		case <-l.stopping:
		case <-l.ctx.Done():
			return l.ctx.Err()
		}
	}
}

// drain records the attempts in flight at shutdown, starting none, and
// waits for every outcome write to be durable.
func (l *loop) drain() error {
	for len(l.busy) > 0 || l.inflight > 0 || len(l.unwritten.outcomes) > 0 {
		if l.inflight == 0 && len(l.unwritten.outcomes) > 0 {
			// No write in flight would take them when it is stored: the
			// outcome of the last attempt to end waited for ever, and the
			// dispatcher's shutdown with it.
			if err := l.flush(); err != nil {
				return err
			}
		}
		select {
		case req := <-l.retryReqs:
			req.done <- retryResult{err: ErrNotRunning}
		case r := <-l.results:
			if err := l.record(r); err != nil {
				return err
			}
		case w := <-l.written:
			if err := l.stored(w); err != nil {
				return err
			}
			if err := l.flush(); err != nil {
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
	cursor, ok, err := l.dp.store.cursor(l.t.ID)
	if err != nil {
		return 0, err
	}
	if !ok {
		cursor = l.t.From
	}
	l.failingVersion = l.t.Version
	if l.failing, err = l.dp.store.failingSince(l.t.ID, l.t.Version); err != nil {
		return 0, err
	}
	err = l.dp.store.eachPending(l.t.ID, func(d *Delivery) {
		l.pending[d.ID] = d
		l.schedule(d)
	})
	return cursor, err
}

// maxCollect bounds the records one step of a loop reads, and
// maxCollectBytes the bodies of the new deliveries it stores: on a cluster
// node a step's write is one entry of the replicated log, and NATS bounds
// a message. A recover or replay request (at most
// projections.MaxRedelivery deliveries) is a step of its own.
const (
	maxCollect      = 512
	maxCollectBytes = 512 << 10
)

// collect turns the records after cursor, up to head, into pending
// deliveries and starts their write with the new cursor, one synced batch;
// they are sent once it is durable (stored): after a crash, every event is
// delivered at least once. It reads only the records of the webhook's
// account, found by the state's index of them, and reports whether it
// stopped before head.
func (l *loop) collect(cursor, head uint64) (uint64, bool, error) {
	// The target first: the state it is read from has applied head (see
	// the guard below), so the index holds every record up to head.
	t, ok := l.current()
	if !ok {
		// Disabled or deleted since this loop's target was taken: what
		// came after is not its to judge. The dispatcher stops the loop;
		// enabled again, the webhook's new target (with the window
		// skip_backlog made, if it did) judges those records. Judged by
		// the old one, the records just after a disable were sent though
		// skipped.
		return cursor, false, nil
	}
	seqs, total := l.dp.state.AccountSeqsBetween(l.seqs[:0], l.t.Account, cursor, head, maxCollect)
	l.seqs = seqs
	to, more := head, false
	if len(seqs) < total {
		to, more = seqs[len(seqs)-1], true
	}
	var fresh []*Delivery
	var requests []*projections.WebhookRedeliveryRequested
	now := l.dp.clock.Now()
	size := 0
	err := l.dp.log.ReadSeqs(seqs, func(rec *eventlog.Record) error {
		if size >= maxCollectBytes || len(requests) > 0 {
			to, more = rec.Seq-1, true // the next step starts at rec
			return errStop
		}
		if rec.Account != l.t.Account {
			return nil
		}
		if rec.Seq > t.Version && l.dp.state.ChangesEvents(rec, l.t.ID) {
			// A change of its events that t does not show: t is the
			// loop's own, since the webhook was disabled by the same
			// PATCH (current() reports it gone). The records after the
			// change are not judged by the list before it; the disable
			// ends the loop at the reconcile it sets off. (The state shows
			// every change up to head otherwise: it takes a record under
			// its write lock before the log publishes it.)
			to, more = rec.Seq-1, true
			return errStop
		}
		if req, ok := l.dp.state.Redelivery(rec, l.t.ID); ok {
			if len(fresh) > 0 {
				to, more = rec.Seq-1, true // the request's deliveries are a write of their own
				return errStop
			}
			requests = append(requests, req) // carried out after this read
			return nil
		}
		d, ok, err := l.newDelivery(rec, t, now)
		if ok && d.Event == "webhook.test" {
			// Sent already, ahead of the cursor (testNow)?
			if ok, err = l.notSentEarly(d.ID); err != nil {
				return err
			}
		}
		if ok {
			fresh = append(fresh, d)
			size += len(d.Body)
		}
		return err
	})
	if err != nil && !errors.Is(err, errStop) {
		return cursor, false, err
	}
	// Its lag: the records of its account it has still to read.
	read, _ := slices.BinarySearch(seqs, to+1)
	l.dp.metrics.setLag(l.t.ID, uint64(total-read))
	if len(requests) > 0 {
		// The requests name deliveries that are failed in the store:
		// the loop first takes in every write of its own that stored one.
		if err := l.settle(); err != nil {
			return cursor, false, err
		}
		// Re-sent deliveries go in the same write as the cursor past
		// their request: carried out once, even across a crash.
		again, err := l.redeliver(requests, t, now)
		if err != nil {
			return cursor, false, err
		}
		fresh = append(fresh, again...)
	}
	if len(fresh) == 0 && len(requests) == 0 {
		// Nothing to send: the cursor moves in memory only. After a crash
		// these records are read again and still match nothing (each is
		// judged by the subscription in force when it was recorded). A
		// request moves it on disk even when it queued nothing: read
		// again, it could find failed what it did not.
		return to, more, nil
	}
	if l.ctx.Err() != nil {
		return cursor, false, l.ctx.Err() // deleted meanwhile: write nothing more
	}
	if err := l.start(write{fresh: fresh}, func() func() error {
		return l.dp.store.startPutWithCursor(l.t.ID, to, fresh)
	}); err != nil {
		return cursor, false, err
	}
	for _, d := range fresh {
		l.pending[d.ID] = d // counted against maxPending, not sent yet
	}
	return to, more, nil
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
	now := l.dp.clock.Now().UnixMilli()
	l.ready = l.later.popDue(now, l.ready)
	if wait := l.startReady(now); wait > 0 {
		return min(wait, l.later.untilNext(now))
	}
	return l.later.untilNext(now)
}

// startReady starts attempts of the ready deliveries, oldest first, while
// the webhook has free slots. Over rate_limit_per_second it stops and
// returns how long the first in line must wait.
func (l *loop) startReady(now int64) time.Duration {
	limit := l.target().RateLimit
	for len(l.ready) > 0 && len(l.busy) < l.dp.cfg.Concurrency {
		id := l.ready[0]
		d := l.pending[id]
		if d == nil || l.busy[id] {
			l.ready = l.ready[1:]
			continue
		}
		if wait := l.throttle.take(limit, time.UnixMilli(now)); wait > 0 {
			return wait
		}
		l.ready = l.ready[1:]
		l.busy[id] = true
		l.sendOne(*d)
	}
	return 0
}

// senderIdle is how long a sender waits for another attempt before it
// ends.
const senderIdle = 5 * time.Second

// sendOne hands d to an idle sender, or starts one. A sender makes one
// attempt after another: a goroutine started for each attempt grew its
// stack on every exchange (runtime.newstack and copystack were up to a
// tenth of the CPU of a delivery, as the runtime's estimate of a new
// goroutine's stack moved with the others it had seen).
func (l *loop) sendOne(d Delivery) {
	select {
	case l.sends <- d:
	default:
		go l.sender(d)
	}
}

// sender makes the attempt of first, then those handed to it on sends,
// until it has waited senderIdle for one or the loop has ended. A loop
// has at most delivery.concurrency attempts in flight, so as many senders
// are busy; a few more may be on their way back to sends.
func (l *loop) sender(first Delivery) {
	l.attempt(first)
	idle := l.dp.clock.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		select {
		case d := <-l.sends:
			l.attempt(d)
			idle.Reset(senderIdle)
		case <-idle.C():
			return
		case <-l.ctx.Done():
			return
		}
	}
}

// errWebhookGone stops an attempt whose webhook was deleted or disabled
// before it was sent; it is not counted as an attempt.
var errWebhookGone = errors.New("webhook deleted or disabled")

// goneRetry is when an attempt stopped by errWebhookGone is tried again
// if its loop still runs then.
const goneRetry = time.Second

// attempt sends one delivery once and reports the outcome to the loop.
func (l *loop) attempt(d Delivery) {
	r := result{id: d.ID, err: errWebhookGone}
	if t, ok := l.current(); ok {
		r = l.dp.send.send(l.ctx, *t, d, &l.signers, &l.requests)
	}
	select {
	case l.results <- r:
	case <-l.ctx.Done():
	}
}

// record applies attempts' outcomes; they are stored by the next write of
// a batch (maybeFlush). The freed slots send the next ready deliveries
// meanwhile.
// What acts on an outcome (ending the delivery, scheduling its retry,
// disabling the webhook) waits until it is durable: see stored.
func (l *loop) record(results ...result) error {
	if !l.take(results...) {
		return nil
	}
	ending := func() bool { return l.retry.gone || l.failedTooLong() }
	if !ending() {
		return l.maybeFlush()
	}
	// The loop ends here. The attempts still in flight end first, so that
	// an answer a receiver gave is recorded as the attempt it was, not
	// dropped and sent again as a first one once the webhook is enabled;
	// then every outcome is stored, and disable fails what is left.
	for len(l.busy) > 0 {
		select {
		case r := <-l.results:
			l.take(r)
		case <-l.ctx.Done():
			return l.ctx.Err()
		}
	}
	if !ending() {
		// One of them succeeded: the receiver is not failing after all.
		return l.maybeFlush()
	}
	if err := l.settle(); err != nil {
		return err
	}
	if l.retry.gone {
		return l.disable(projections.DisabledGone, "the receiver answered 410 Gone")
	}
	return l.disable(projections.DisabledFailing, fmt.Sprintf("every attempt failed for %s (delivery.disable_after)", l.dp.cfg.DisableAfter))
}

// take applies attempts' outcomes to their deliveries and queues them for
// the next write; it reports whether any was an attempt.
func (l *loop) take(results ...result) bool {
	version := l.target().Version
	failing := l.failingFor(version)
	n := len(l.unwritten.outcomes)
	for _, r := range results {
		d := l.apply(r)
		if d == nil {
			continue
		}
		kept := l.keepAttempt(d, r, &failing)
		if len(l.unwritten.outcomes) == 0 {
			l.heldSince = l.dp.clock.Now()
		}
		l.unwritten.outcomes = append(l.unwritten.outcomes, d)
		l.unwritten.attempts = append(l.unwritten.attempts, kept)
	}
	if len(l.unwritten.outcomes) == n {
		return false
	}
	l.failing, l.failingVersion = failing, version
	return true
}

// maybeFlush flushes the outcomes recorded since the last write when they
// make a batch (see outcomeBatch).
func (l *loop) maybeFlush() error {
	n := len(l.unwritten.outcomes)
	if n == 0 || l.inflight == maxWritesInFlight {
		return nil
	}
	if n < outcomeBatch && len(l.busy) > 0 && l.dp.clock.Now().Sub(l.heldSince) < maxOutcomeHold {
		return nil
	}
	return l.flush()
}

// flush starts the write of the outcomes recorded since the last one, with
// the hourly counts and the failing mark.
func (l *loop) flush() error {
	w := l.unwritten
	if len(w.outcomes) == 0 || l.ctx.Err() != nil {
		return nil // nothing, or the webhook is gone: write nothing more
	}
	l.unwritten, l.spare = l.spare, write{}
	hours, err := l.hourPuts()
	if err != nil {
		return err
	}
	extra := append(hours, failingPut(l.t.ID, l.failing, l.failingVersion))
	delFrom, delTo := l.hours.prune(l.t.ID)
	return l.start(w, func() func() error {
		return l.dp.store.startPutOutcomes(l.t.ID, w.outcomes, w.attempts, extra, delFrom, delTo)
	})
}

// start starts a write, after waiting for the oldest one syncing if
// maxWritesInFlight are; none once the loop is cancelled meanwhile (its
// webhook disabled or deleted: a deleted one's state is being dropped).
func (l *loop) start(w write, begin func() (wait func() error)) error {
	if l.inflight == maxWritesInFlight {
		if err := l.stored(<-l.written); err != nil {
			return err
		}
	}
	if err := l.ctx.Err(); err != nil {
		return err
	}
	w.wait = begin()
	l.inflight++
	l.writes <- w
	return nil
}

// awaitWrites waits for each write's fsync, oldest first, and hands the
// write back to the loop. It ends when writes is closed.
func (l *loop) awaitWrites() {
	for w := range l.writes {
		w.err = w.wait()
		l.written <- w
	}
}

// stored acts on a write that is now durable: its new deliveries are
// ready to send, ended deliveries leave the pending set, failed attempts'
// retries are scheduled. The outcomes gathered meanwhile are written next.
func (l *loop) stored(w write) error {
	l.inflight--
	if w.err != nil {
		return w.err
	}
	for _, d := range w.fresh {
		l.ready = append(l.ready, d.ID)
	}
	for _, d := range w.outcomes {
		switch {
		case d.Status == StatusPending:
			l.schedule(d) // its retry, now that its failed attempt is stored
		case l.pending[d.ID] == d:
			delete(l.pending, d.ID)
		default:
			// Retried by hand since this write stored it as failed (the
			// attempt log showed it so): the retry's delivery stays.
		}
	}
	if w.outcomes != nil {
		// Kept for the next batch, not grown anew for each.
		clear(w.outcomes)
		clear(w.attempts)
		l.spare = write{outcomes: w.outcomes[:0], attempts: w.attempts[:0]}
	}
	return nil
}

// settle writes what is recorded and waits until every write is durable.
func (l *loop) settle() error {
	if err := l.flush(); err != nil {
		return err
	}
	for l.inflight > 0 {
		if err := l.stored(<-l.written); err != nil {
			return err
		}
	}
	return nil
}

// endWrites stops awaitWrites once the writes it was given are durable
// (or failed): a loop started after this one reads them from the store.
func (l *loop) endWrites() {
	close(l.writes)
	for ; l.inflight > 0; l.inflight-- {
		<-l.written
	}
}

// apply updates the delivery an attempt was for, or returns nil when there
// is nothing to record (the webhook is gone).
func (l *loop) apply(r result) *Delivery {
	delete(l.busy, r.id)
	d := l.pending[r.id]
	if d != nil && errors.Is(r.err, errWebhookGone) && l.ctx.Err() == nil {
		// The webhook was disabled as the attempt began. The dispatcher
		// stops this loop when it sees that; if the webhook is enabled
		// again before it does, the loop goes on, and the delivery must
		// not be left pending with no attempt to come: it is tried again
		// in a second, without a write, as nothing was sent.
		heap.Push(&l.later, retryAt{at: l.dp.clock.Now().UnixMilli() + goneRetry.Milliseconds(), id: d.ID})
		return nil
	}
	if d == nil || errors.Is(r.err, errWebhookGone) || errors.Is(r.err, context.Canceled) && l.ctx.Err() != nil {
		return nil // nothing was sent, or the webhook is gone: not an attempt
	}
	now := l.dp.clock.Now()
	v := l.retry.settle(d, r, now)
	l.count(v, now)
	l.dp.metrics.attempts.WithLabelValues(string(v)).Inc()
	switch v {
	case verdictSucceeded:
		if d.EventAt > 0 {
			l.dp.metrics.latency.Observe(now.Sub(time.UnixMilli(d.EventAt)).Seconds())
		}
	}
	return d
}

// disable ends delivery to a webhook whose receiver answered 410 Gone or
// kept failing: its other pending deliveries fail (stored first, so a
// crash cannot leave them pending for ever), then the webhook.disabled
// event is recorded and the loop stops.
func (l *loop) disable(reason, detail string) error {
	var failed []*Delivery
	now := l.dp.clock.Now().Unix()
	// No delivery is busy: record waits for the attempts in flight first.
	for _, d := range l.pending {
		d.Status, d.NextAttemptAt, d.UpdatedAt = StatusFailed, 0, now
		if d.Attempts == 0 {
			d.LastError = "not sent: the webhook was disabled (" + reason + ")"
		} else {
			d.LastError += "; not retried: the webhook was disabled (" + reason + ")"
		}
		failed = append(failed, d)
	}
	// The failing mark goes with them: enabled again, the webhook
	// starts a new count.
	if err := l.dp.store.putWith(l.t.ID, []eventlog.Put{failingPut(l.t.ID, 0, 0)}, nil, nil, failed...); err != nil {
		return err
	}
	for _, d := range failed {
		delete(l.pending, d.ID)
	}
	if err := l.dp.state.DisableWebhook(context.Background(), l.t.ID, reason, detail); err != nil {
		return fmt.Errorf("disabling the webhook (%s): %w", reason, err)
	}
	l.cancel()
	return nil
}

// retryFailed makes a failed delivery pending again, due now, with a fresh
// attempt count.
func (l *loop) retryFailed(id string) (Delivery, error) {
	d, ok, err := l.dp.store.get(l.t.ID, id)
	if err != nil {
		return Delivery{}, err
	}
	if !ok {
		return Delivery{}, ErrNoDelivery
	}
	if d.Status != StatusFailed {
		return d, ErrNotFailed
	}
	now := l.dp.clock.Now()
	d.Status, d.Attempts, d.NextAttemptAt, d.UpdatedAt = StatusPending, 0, now.UnixMilli(), now.Unix()
	if err := l.dp.store.put(l.t.ID, &d); err != nil {
		return Delivery{}, err
	}
	l.pending[d.ID] = &d
	l.ready = append(l.ready, d.ID)
	return d, nil
}
