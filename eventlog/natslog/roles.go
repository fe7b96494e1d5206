package natslog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"demosvc/eventlog"
)

// Roles is what a node does when it takes or loses a lease.
type Roles struct {
	Node string // this node's name
	Addr string // this node's API address, where other nodes forward writes
	Log  *eventlog.Log
	// Prepare runs once this node holds the writer lease and has applied
	// every entry up to its fence, before it takes writes.
	Prepare func() error
	// Became runs once this node takes writes (it bootstraps an empty
	// log).
	Became func()
	// Dispatch runs while this node holds the dispatcher lease, which only
	// the writer takes; its ctx ends when either lease is lost or the node
	// stops.
	Dispatch func(ctx context.Context)
}

// Run keeps the leases, renewing each a few times per TTL, until ctx is
// done; it then releases them, so another node need not wait them out.
//
// The dispatcher lease is taken only by the writer, and given up when it
// steps down: the delivery state (cursors, deliveries, attempts) is
// written through the replicated log, which only the writer appends to,
// so every node holds it and the next writer resumes from it. The lease
// keeps two nodes from sending at once across a handover: the new writer
// starts dispatching once the old one released it or it ran out, and the
// old one's writes are refused from the moment the new one's fence is in.
func (n *Node) Run(ctx context.Context, r Roles) {
	beating := make(chan struct{})
	go func() { defer close(beating); n.heartbeat(ctx, r.Node) }()
	defer func() { <-beating }()
	tick := time.NewTicker(n.cfg.LeaseTTL / 4)
	defer tick.Stop()
	var d struct {
		stop context.CancelFunc // nil while not dispatching
		// done is closed once the last dispatch has returned; nil once
		// that was seen. A dispatch told to stop finishes its attempts
		// in flight (up to their timeout) while this loop goes on
		// renewing the writer lease.
		done chan struct{}
	}
	stopped := func() bool {
		if d.done == nil {
			return true
		}
		select {
		case <-d.done:
			d.done = nil
			n.logger.Info("stopped dispatching webhooks: the attempts in flight have finished")
			return true
		default:
			return false
		}
	}
	defer func() {
		// The deliveries stop first, while this node still takes writes:
		// they store the outcomes of the attempts in flight, which the
		// next writer would otherwise send again.
		if d.stop != nil {
			d.stop()
		}
		if d.done != nil {
			<-d.done
		}
		n.writable.Store(false)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n.writer.release(rctx)
		n.dispatcher.release(rctx)
	}()
	for {
		// A node that stepped down takes the writer lease again only once
		// its attempts in flight have finished: writing again, it would
		// take their outcomes, which may overwrite what a writer elected
		// meanwhile stored. One that still holds it (an append that
		// failed) renews it: no other writer can have been elected.
		if n.writable.Load() || n.writer.valid() || stopped() {
			n.keepWriter(ctx, r)
		}
		held := false
		if n.writable.Load() {
			var err error
			held, err = n.dispatcher.try(ctx, r.Node, r.Addr)
			if err != nil && ctx.Err() == nil {
				n.logger.Warn("dispatcher lease", "err", err)
			}
		}
		switch {
		case held && d.stop == nil && r.Dispatch != nil && stopped():
			var dctx context.Context
			// Ended by d.stop alone (not by ctx): at shutdown, only once
			// the deferred stop has it end, while this node still writes.
			dctx, d.stop = context.WithCancel(context.WithoutCancel(ctx))
			d.done = make(chan struct{})
			n.logger.Info("dispatching webhooks: this node holds the dispatcher lease")
			go func(done chan struct{}) { defer close(done); r.Dispatch(dctx) }(d.done)
		case !held && d.stop != nil:
			n.logger.Info("stopping dispatching webhooks: the writer or dispatcher lease is lost; the attempts in flight finish")
			d.stop()
			d.stop = nil
		}
		if !held && stopped() {
			// Not the writer any more (or never was), and no attempt of
			// this node's is in flight: the next one need not wait for
			// this lease to run out.
			n.dispatcher.release(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keepWriter renews or takes the writer lease. A node that takes it
// appends a fence (an entry with no records) and waits until it has
// applied everything up to it: from then on, an append by the previous
// writer, which expects an earlier last position, is refused.
func (n *Node) keepWriter(ctx context.Context, r Roles) {
	if n.Following() != nil {
		// This node cannot apply the log past where it stopped, so it
		// could never catch up to a fence: holding the lease would only
		// keep the cluster without a writer.
		n.fence = 0
		if n.writable.Swap(false) {
			n.logger.Warn("stepped down as writer: this node stopped following the log")
		}
		n.writer.release(ctx)
		return
	}
	if time.Now().Before(n.restUntil) {
		// This node could not catch up to its fence in time: the lease
		// is left to a node that is caught up, for a while.
		return
	}
	held, err := n.writer.try(ctx, r.Node, r.Addr)
	if err != nil && ctx.Err() == nil {
		n.logger.Warn("writer lease", "err", err)
	}
	if !held {
		n.fence = 0
		if n.writable.Swap(false) {
			n.logger.Warn("stepped down as writer: the writer lease is lost")
		}
		return
	}
	if n.writable.Load() {
		return
	}
	start := time.Now()
	if err := n.becomeWriter(ctx, r); err != nil {
		if errors.Is(err, errCatchingUp) && time.Since(n.fencedAt) > n.cfg.LeaseTTL {
			// Far behind (back from a long stop, or a new node): holding
			// the lease through the whole catch-up would keep the cluster
			// without a writer while another node is ready. Give it up,
			// and stay out for a TTL; the next take-over fences anew.
			n.fence = 0
			n.writer.release(ctx)
			n.restUntil = time.Now().Add(n.cfg.LeaseTTL)
			n.logger.Warn("left the writer lease to a node that is caught up: this one is still far behind", "err", err)
			return
		}
		if ctx.Err() == nil {
			n.logger.Warn("taking over as writer", "err", err)
		}
		return
	}
	n.fence = 0
	n.writable.Store(true)
	n.logger.Info("this node is the writer", "seq", r.Log.DurableSeq(), "position", r.Log.ReplPos(), "took", time.Since(start))
	if r.Became != nil {
		r.Became()
	}
}

// errCatchingUp: a node taking over has not yet applied the stream up to
// its fence.
var errCatchingUp = errors.New("still catching up")

func (n *Node) becomeWriter(ctx context.Context, r Roles) error {
	// One fence per take-over: while this node catches up, later attempts
	// wait for the same fence rather than append another.
	fence := n.fence
	if fence == 0 {
		var err error
		if fence, err = n.appendFence(ctx); err != nil {
			return fmt.Errorf("appending the fence: %w", err)
		}
		n.fence, n.fencedAt = fence, time.Now()
	}
	deadline := time.Now().Add(n.cfg.LeaseTTL / 2)
	for r.Log.ReplPos() < fence {
		if err := n.Following(); err != nil {
			return fmt.Errorf("applied up to position %d of fence %d: %w", r.Log.ReplPos(), fence, err)
		}
		if time.Now().After(deadline) || !n.writer.valid() {
			return fmt.Errorf("applied up to position %d of fence %d: %w", r.Log.ReplPos(), fence, errCatchingUp)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // polling the follower's progress
		}
	}
	if r.Prepare != nil {
		return r.Prepare()
	}
	return nil
}

// appendFence appends an empty entry with no expectation: whatever the
// stream holds, the fence goes after it.
func (n *Node) appendFence(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ack, err := n.js.Publish(ctx, subject, emptyEntry)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// emptyEntry is an entry with no records, puts or deletes: a msgpack map
// with no keys, which eventlog decodes as an empty entry.
var emptyEntry = []byte{0x80}

// Status is one node's view of the cluster.
type Status struct {
	Node       string     `json:"node"`
	Roles      []string   `json:"roles"` // "writer", "dispatcher", or "follower"
	Writer     LeaseValue `json:"writer"`
	Dispatcher LeaseValue `json:"dispatcher"`
	Seq        uint64     `json:"applied_seq"`      // the last log seq applied here
	Position   uint64     `json:"applied_position"` // the last stream entry applied here
	Head       uint64     `json:"stream_head"`      // the stream's last entry (0 when unknown)
	Lag        uint64     `json:"lag"`              // entries of the stream not applied here
	Refused    uint64     `json:"refused_appends"`  // appends refused as stale since start
	// Joining says what this node's NATS server still lacks before it
	// holds a current copy of the cluster's log (Joined); "" once it has.
	Joining string `json:"joining,omitempty"`
	// NotFollowing says why this node stopped applying the log
	// (Following); "" while it follows.
	NotFollowing string `json:"not_following,omitempty"`
}

// IsWriter reports whether this node takes writes now.
func (n *Node) IsWriter() bool { return n.Writable() == nil }

// IsDispatcher reports whether this node holds the dispatcher lease.
func (n *Node) IsDispatcher() bool { return n.dispatcher.valid() }

// WriterAddr returns the API address of the writer as last seen, or ""
// when its lease has run out.
func (n *Node) WriterAddr() string {
	v := n.writer.holder()
	if v.Expires < time.Now().UnixMilli() {
		return ""
	}
	return v.Addr
}

// Roles names the roles this node holds now.
func (n *Node) Roles() []string {
	var roles []string
	if n.IsWriter() {
		roles = append(roles, "writer")
	} else {
		roles = append(roles, "follower")
	}
	if n.IsDispatcher() {
		roles = append(roles, "dispatcher")
	}
	return roles
}

// Status reports this node's view; the stream head is asked of NATS.
func (n *Node) Status(ctx context.Context, node string, log *eventlog.Log) Status {
	s := Status{Node: node, Roles: n.Roles(), Seq: log.DurableSeq(), Position: log.ReplPos(), Refused: n.refused.Load()}
	if err := n.Joined(); err != nil {
		s.Joining = err.Error()
	}
	if err := n.Following(); err != nil {
		s.NotFollowing = err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Read from the bucket: a follower never reads the dispatcher's key
	// otherwise (only a writer takes that lease).
	s.Writer, s.Dispatcher = n.writer.read(ctx), n.dispatcher.read(ctx)
	if head, err := n.Head(ctx); err == nil {
		s.Head = head
		if head > s.Position {
			s.Lag = head - s.Position
		}
	} else {
		s.Lag = n.Lag()
	}
	return s
}
