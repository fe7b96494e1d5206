package delivery

import (
	"errors"
	"strconv"
	"time"

	"demosvc/eventlog"
	"demosvc/projections"
)

// Planning a recover or a replay: what one call queues, read before its
// request is recorded, so that the request names exactly that (see
// projections.WebhookRedeliveryRequested) and its answer says how many.
// Each call queues at most projections.MaxRedelivery and reads at most
// maxPlanScan entries; the answer's Next continues where it stopped.

// maxPlanScan bounds the deliveries or records one plan reads.
const maxPlanScan = 50_000

// Window selects what a recover or replay covers: from Since, before
// Until (zero: no end), after the point After (a previous answer's Next).
type Window struct {
	Since, Until time.Time
	After        string
}

// Plan is what one recover or replay call queues.
type Plan struct {
	DeliveryIDs []string // recover
	Seqs        []uint64 // replay
	Answer      projections.RedeliveryAnswer
}

// ErrBadAfter reports an After that is not a Next of this kind of call.
var ErrBadAfter = errors.New("after is not a next value of this call")

func (w Window) contains(t time.Time) bool {
	return !t.Before(w.Since) && (w.Until.IsZero() || t.Before(w.Until))
}

// PlanRecover selects the failed deliveries of webhook wh created in the
// window, oldest first.
func (dp *Dispatcher) PlanRecover(wh string, w Window) (Plan, error) {
	prefix := deliveryPrefix(wh)
	from := deliveryKey(wh, idFloor(PrefixDelivery, w.Since))
	if w.After != "" {
		if _, ok := projections.ParseID(PrefixDelivery, w.After); !ok {
			return Plan{}, ErrBadAfter
		}
		from = append(deliveryKey(wh, w.After), 0) // just after it
	}
	var p Plan
	scanned := 0
	last := ""
	err := dp.store.db.ScanFrom(prefix, from, func(k, v []byte) error {
		id := string(k[len(prefix):])
		if !w.Until.IsZero() && id >= idFloor(PrefixDelivery, w.Until) {
			return errStop
		}
		if scanned == maxPlanScan {
			p.Answer.More, p.Answer.Next = true, last
			return errStop
		}
		scanned++
		d, err := decodeDelivery(v)
		if err != nil {
			return err
		}
		if d.Status != StatusFailed || !w.contains(time.Unix(d.CreatedAt, 0)) {
			last = id
			return nil
		}
		if len(p.DeliveryIDs) == projections.MaxRedelivery {
			p.Answer.More, p.Answer.Next = true, p.DeliveryIDs[len(p.DeliveryIDs)-1]
			return errStop
		}
		p.DeliveryIDs = append(p.DeliveryIDs, id)
		last = id
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Plan{}, err
	}
	p.Answer.Queued = len(p.DeliveryIDs)
	return p, nil
}

// PlanReplay selects the events of the log in the window that webhook t
// would be sent now (its account, its subscription, after its
// registration), oldest first. The window is on the events' times.
func (dp *Dispatcher) PlanReplay(t projections.Target, w Window) (Plan, error) {
	head := dp.log.DurableSeq()
	var start uint64
	if w.After != "" {
		n, err := strconv.ParseUint(w.After, 10, 64)
		if err != nil || n > head {
			return Plan{}, ErrBadAfter
		}
		start = n + 1
	} else {
		var err error
		if start, err = dp.firstAtOrAfter(w.Since, head); err != nil {
			return Plan{}, err
		}
	}
	start = max(start, t.From+1)
	// A replay sends what the webhook is subscribed to now, whatever it
	// was subscribed to when the events happened.
	t = t.Now()
	var p Plan
	if start > head {
		return p, nil
	}
	to := min(head, start+maxPlanScan-1)
	var last uint64
	err := dp.log.Read(start, to, func(rec *eventlog.Record) error {
		if !w.Until.IsZero() && !rec.Time.Before(w.Until) {
			return errStop
		}
		if rec.Account == t.Account && w.contains(rec.Time) {
			name, _, ok := dp.state.WebhookEventFor(rec, &t)
			if ok && name != "webhook.test" {
				if len(p.Seqs) == projections.MaxRedelivery {
					p.Answer.More, p.Answer.Next = true, strconv.FormatUint(last, 10)
					return errStop
				}
				p.Seqs = append(p.Seqs, rec.Seq)
			}
		}
		last = rec.Seq
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return Plan{}, err
	}
	if err == nil && to < head {
		// The read bound ended this call, not the window.
		p.Answer.More, p.Answer.Next = true, strconv.FormatUint(to, 10)
	}
	p.Answer.Queued = len(p.Seqs)
	return p, nil
}

// firstAtOrAfter is the first seq whose record's time is at or after t
// (head+1 if none), found by bisection: records are appended in time
// order.
func (dp *Dispatcher) firstAtOrAfter(t time.Time, head uint64) (uint64, error) {
	lo, hi := uint64(1), head+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		var at time.Time
		if err := dp.log.Read(mid, mid, func(rec *eventlog.Record) error { at = rec.Time; return nil }); err != nil {
			return 0, err
		}
		if at.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// Filter selects deliveries of a list: by Status and Event when not "",
// created from Since and before Until when not zero.
type Filter struct {
	Status, Event string
	Since, Until  time.Time
	// Budget bounds the deliveries examined that do not match; 0: none.
	// The dashboard sets it so a page costs what it shows.
	Budget int
}

func (f Filter) matches(d *Delivery) bool {
	created := time.Unix(d.CreatedAt, 0)
	return (f.Status == "" || d.Status == f.Status) && (f.Event == "" || d.Event == f.Event) &&
		(f.Since.IsZero() || !created.Before(f.Since)) && (f.Until.IsZero() || created.Before(f.Until))
}

// DeliveriesWhere is Deliveries with a filter: the page holds only
// deliveries that match, and more says another follows. A startingAfter
// that is no delivery of wh is ErrNoDelivery.
func (dp *Dispatcher) DeliveriesWhere(wh string, limit int, startingAfter string, f Filter) ([]Delivery, bool, error) {
	if f == (Filter{}) {
		return dp.Deliveries(wh, limit, startingAfter)
	}
	if startingAfter != "" {
		if _, ok, err := dp.store.get(wh, startingAfter); err != nil || !ok {
			if err == nil {
				err = ErrNoDelivery
			}
			return nil, false, err
		}
	}
	ds, next, _, err := dp.SearchDeliveries(wh, limit, startingAfter, f)
	return ds, next != "", err
}

// SearchDeliveries returns at most limit deliveries of wh that match f,
// most recent first, before startingAfter ("": the most recent). next is
// where the following page starts ("" at the end); partial says f.Budget
// ran out before the page was full. Ids sort by creation, so the time
// range bounds the scan; a filter on status or event reads past the ones
// it skips, up to the budget.
func (dp *Dispatcher) SearchDeliveries(wh string, limit int, startingAfter string, f Filter) (ds []Delivery, next string, partial bool, err error) {
	var before []byte
	if startingAfter != "" {
		before = deliveryKey(wh, startingAfter)
	}
	if !f.Until.IsZero() {
		// The first second after Until: ids carry milliseconds.
		u := deliveryKey(wh, idFloor(PrefixDelivery, f.Until.Add(time.Second)))
		if before == nil || string(u) < string(before) {
			before = u
		}
	}
	var sinceKey string
	if !f.Since.IsZero() {
		sinceKey = string(deliveryKey(wh, idFloor(PrefixDelivery, f.Since.Add(-time.Second))))
	}
	examined := 0
	var decodeErr error
	err = dp.store.db.ScanReverse(deliveryPrefix(wh), before, func(k, v []byte) bool {
		if sinceKey != "" && string(k) < sinceKey {
			return false
		}
		d, err := decodeDelivery(v)
		if err != nil {
			decodeErr = err
			return false
		}
		if f.matches(&d) {
			if len(ds) == limit {
				next = ds[len(ds)-1].ID
				return false
			}
			ds = append(ds, d)
			return true
		}
		if examined++; f.Budget > 0 && examined >= f.Budget {
			if len(ds) == limit { // a full page: the next may be empty
				next = ds[len(ds)-1].ID
			} else {
				next, partial = d.ID, true
			}
			return false
		}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	return ds, next, partial, err
}

// NewDeliveryID mints a delivery id on the dispatcher's clock, as the
// loops do: for a test event, whose request names its delivery.
func (dp *Dispatcher) NewDeliveryID() string { return dp.ids.New(PrefixDelivery) }
