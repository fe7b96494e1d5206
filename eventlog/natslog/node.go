package natslog

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"demosvc/eventlog"
)

// Names of what the cluster keeps in JetStream.
const (
	StreamName  = "DEMOSVC_LOG"    // the log: one message per transaction
	subject     = "demosvc.log"    // the stream's one subject
	LeaseBucket = "demosvc_leases" // writer and dispatcher leases
)

// Config configures a Node.
type Config struct {
	Server *ServerConfig // the embedded server; nil with NATSURL
	// NATSURL connects to an external NATS cluster instead of running a
	// server in the process.
	NATSURL string
	// TLS, with NATSURL, is the connection's mutual TLS (RouteTLS builds
	// it from cluster.tls_*): this node's certificate, and the CA the
	// servers' must chain to.
	TLS      *tls.Config
	Replicas int           // the stream's and the lease bucket's replicas (3 in a three-node cluster)
	LeaseTTL time.Duration // how long a lease lasts without renewal
	Logger   *slog.Logger
}

// Node is one node's connection to the replicated log. It implements
// eventlog.Replicator: Writable and Append.
type Node struct {
	cfg    Config
	srv    *server.Server // nil with an external cluster
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	logger *slog.Logger

	writer     *lease
	dispatcher *lease
	// writable is set once this node holds the writer lease and has
	// applied its own fence (roles.go); an append that fails clears it.
	writable atomic.Bool
	// lag is how many entries of the stream this node had yet to apply
	// when it applied its last one.
	lag     atomic.Uint64
	refused atomic.Uint64 // appends refused as stale
	// contact is when a quorum of the cluster's NATS last took a write of
	// this node's (its heartbeat, a lease, an entry), as the monotonic
	// time since born; 0 until Open has connected.
	born    time.Time
	contact atomic.Int64
	// rejoin is the stream's head when this node heard from the cluster
	// again after a silence: it is not in touch until it has applied
	// that far (what it missed meanwhile). 0 when none; unknownHead until
	// the heartbeat has read it (rejoinHead). silentFrom and rejoinAt are
	// when the silence began (the last contact before it) and ended, as
	// contact is. follows is the log Follow applies to.
	rejoin     atomic.Uint64
	silentFrom atomic.Int64
	rejoinAt   atomic.Int64
	follows    atomic.Pointer[eventlog.Log]
	// joined is set once Joined has found this node's NATS server
	// current (join.go).
	joined atomic.Bool
	// fence is the position of the fence this node appended to take over
	// as writer and is catching up to; 0 when none; fencedAt is when it
	// was appended. restUntil: a node that held the lease a TTL without
	// reaching its fence leaves the lease to others until then. Only Run
	// touches these.
	fence     uint64
	fencedAt  time.Time
	restUntil time.Time
	// stopped holds why Follow stopped for good: an entry it could not
	// apply. Nil while it follows.
	stopped atomic.Pointer[error]
}

// Open starts (or connects to) NATS and makes sure the stream and the
// lease bucket exist, retrying until ctx is done: on a first start the
// other nodes may not be up yet, and a replicated stream needs them.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, logger: cfg.Logger, born: time.Now()}
	var err error
	if cfg.Server != nil {
		srvCfg := *cfg.Server
		if srvCfg.ClientToken == "" {
			srvCfg.ClientToken = RandomToken() // only this connection will know it
		}
		if n.srv, err = StartServer(srvCfg); err != nil {
			return nil, err
		}
		n.nc, err = nats.Connect("", nats.InProcessServer(n.srv), nats.Token(srvCfg.ClientToken), nats.Name("demosvc"), nats.MaxReconnects(-1))
	} else {
		opts := []nats.Option{nats.Name("demosvc"), nats.MaxReconnects(-1)}
		if cfg.TLS != nil {
			opts = append(opts, nats.Secure(cfg.TLS))
		}
		n.nc, err = nats.Connect(cfg.NATSURL, opts...)
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		n.Close()
		return nil, err
	}
	for {
		err = n.ensure(ctx)
		if err == nil {
			break
		}
		var differ *ReplicasDifferError
		if errors.As(err, &differ) {
			n.Close()
			return nil, err
		}
		n.logger.Info("waiting for the NATS cluster to take the stream", "err", err)
		select {
		case <-ctx.Done():
			n.Close()
			return nil, fmt.Errorf("creating the stream %s: %w (last error: %v)", StreamName, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond): // retry pace while peers start
		}
	}
	n.writer = &lease{kv: n.kv, key: "writer", ttl: cfg.LeaseTTL, heard: n.touch}
	n.dispatcher = &lease{kv: n.kv, key: "dispatcher", ttl: cfg.LeaseTTL, heard: n.touch}
	n.touch()
	return n, nil
}

// ReplicasDifferError refuses a node whose cluster.replicas is not the
// replica count of the stream or bucket the cluster already has: updating
// it would change how many copies of every acknowledged write the whole
// cluster keeps, by one node's setting.
type ReplicasDifferError struct {
	Stream      string
	Have, Asked int
}

func (e *ReplicasDifferError) Error() string {
	return fmt.Sprintf("the cluster's stream %s keeps %d copies, but this node's cluster.replicas is %d: "+
		"set cluster.replicas to %d, as on the other nodes (a node does not change the cluster's replication)",
		e.Stream, e.Have, e.Asked, e.Have)
}

// ensure creates the stream and the bucket, or finds them. One that exists
// with another replica count is a ReplicasDifferError, not changed.
func (n *Node) ensure(ctx context.Context) error {
	// Short attempts: while the cluster elects its meta leader a request
	// may go unanswered, and the next one may be answered at once.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, name := range []string{StreamName, "KV_" + LeaseBucket} {
		st, err := n.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if have := st.CachedInfo().Config.Replicas; have != n.cfg.Replicas {
			return &ReplicasDifferError{Stream: name, Have: have, Asked: n.cfg.Replicas}
		}
	}
	stream, err := n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Subjects:    []string{subject},
		Storage:     jetstream.FileStorage,
		Replicas:    n.cfg.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgSize:  maxPayload,
		DenyDelete:  true,
		DenyPurge:   true,
		Description: "demosvc event log: one message per committed transaction",
	})
	if err != nil {
		return err
	}
	kv, err := n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:   LeaseBucket,
		History:  1,
		Storage:  jetstream.FileStorage,
		Replicas: n.cfg.Replicas,
	})
	if err != nil {
		return err
	}
	n.stream, n.kv = stream, kv
	return nil
}

// Writable implements eventlog.Replicator: nil while this node is the
// writer and its lease has not run out by its own clock.
func (n *Node) Writable() error {
	if !n.writable.Load() || !n.writer.valid() {
		return eventlog.ErrNotWriter
	}
	return nil
}

// Append implements eventlog.Replicator: a publish with
// Nats-Expected-Last-Sequence, acknowledged once the stream's replicas
// hold it (a quorum, each fsynced).
func (n *Node) Append(entry []byte, after uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := n.js.Publish(ctx, subject, entry, jetstream.WithExpectLastSequence(after), jetstream.WithExpectStream(StreamName))
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			// Another writer appended: this node's lease is stale. Step
			// down; the role loop fences and catches up before this node
			// writes again.
			n.writable.Store(false)
			n.refused.Add(1)
			n.logger.Warn("append refused: the log moved on; stepping down as writer", "after", after)
			return 0, fmt.Errorf("%w (expected last position %d): %v", eventlog.ErrStale, after, err)
		}
		if errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
			// Refused before it was stored: only this group fails.
			return 0, err
		}
		// Whether the entry reached the stream is unknown (a timeout, a
		// lost connection or quorum): it may have. Step down too, so that
		// before this node writes again it appends a fence, applies
		// everything before it, this entry if it landed, and reloads the
		// recorded answers (Roles.Prepare). Writing on instead, a client's
		// retry under its Idempotency-Key would find no answer recorded
		// and make the change a second time.
		n.writable.Store(false)
		n.logger.Warn("append failed, and it may have reached the stream: stepping down as writer until this node has caught up behind a fence",
			"after", after, "err", err)
		return 0, err
	}
	n.touch()
	return ack.Sequence, nil
}

// ErrStalled ends followFrom when its consumer delivered nothing for two
// checks in a row while the stream held entries past the last one
// applied: an ordered consumer can stay stuck after the stream's leader
// moved, and Follow starts a new one where the last left off.
var ErrStalled = errors.New("following the stream: no progress while entries wait")

// stallCheck is how often followFrom compares its progress with the stream's head.
var stallCheck = 2 * time.Second

// ErrNotApplied ends Follow for good: apply refused an entry (it does not
// continue this node's chain, it holds a record this build cannot read or
// this node's state refuses, or storage failed). Starting over would only
// meet the same entry again.
var ErrNotApplied = errors.New("an entry of the stream could not be applied here")

// retryPace is how long Follow waits before starting over after the
// connection or its consumer failed.
var retryPace = time.Second

// Follow applies the stream's entries after the last one log holds, in
// order, waiting for new ones, until ctx is done; a failure of the
// connection or of its consumer starts it over from the last one applied.
// An entry apply refuses ends it with ErrNotApplied: from then on
// Following returns why, and this node gives up the writer lease and does
// not take it again, since it can never catch up to a fence. It goes on
// serving what it holds; /readyz says it is not following.
func (n *Node) Follow(ctx context.Context, log *eventlog.Log, apply func(pos uint64, data []byte) error) error {
	n.follows.Store(log)
	for {
		err := n.followFrom(ctx, log.ReplPos(), apply)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrNotApplied):
			n.stopped.Store(&err)
			n.logger.Error("stopped following the cluster's log: this node answers 503 to every request but /healthz, /readyz and /metrics",
				"err", err, "applied_seq", log.DurableSeq(), "position", log.ReplPos())
			return err
		}
		n.logger.Warn("following the cluster's log; starting over", "err", err, "position", log.ReplPos())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryPace):
		}
	}
}

// outOfTouch is how many lease TTLs without a write a quorum took make a
// node out of touch (and at least minOutOfTouch). Every node writes its
// heartbeat four times a TTL: a node none of whose writes went through for
// two TTLs is cut off, and a writer elected meanwhile takes writes it does
// not see.
// Reads are no proof: a node's own server answers a lease read from its
// copy of the bucket, and a stream's info from a leader that has lost its
// quorum, cut off or not.
const outOfTouch = 2

// minOutOfTouch is the shortest silence that makes a node out of touch:
// longer than NATS takes to elect a new leader of the lease bucket after
// its leader died (4 to 9 s), during which no node's heartbeat goes
// through, though nothing is cut off and no writer can be elected.
const minOutOfTouch = 15 * time.Second

func (n *Node) touch() {
	if n.silence() != nil {
		// Back after a silence: the stream may have taken entries this
		// node has yet to apply (a key revoked meanwhile). It is in touch
		// once it has applied as far as the head, which the heartbeat
		// reads now that a quorum answers.
		n.silentFrom.Store(n.contact.Load() - 1)
		n.rejoinAt.Store(int64(time.Since(n.born)))
		n.rejoin.Store(unknownHead)
	}
	n.contact.Store(int64(time.Since(n.born)) + 1)
}

// unknownHead is rejoin until the heartbeat has read the stream's head.
const unknownHead = math.MaxUint64

// InTouch returns nil while this node's writes go through the cluster's
// NATS, and once none has for two lease TTLs (at least minOutOfTouch),
// why: it may miss any change made since (a key revoked, a user
// disabled), so it serves no requests until one goes through again
// (/readyz: "disconnected") and it has applied what the stream took
// meanwhile.
func (n *Node) InTouch() error {
	if err := n.silence(); err != nil {
		return err
	}
	if head := n.rejoin.Load(); head != 0 {
		var pos uint64
		if l := n.follows.Load(); l != nil {
			pos = l.ReplPos()
		}
		switch {
		case head == unknownHead:
			return errors.New("back in touch with the cluster's NATS, reading how far the log goes")
		case pos < head:
			return fmt.Errorf("back in touch with the cluster's NATS, applying what this node missed: at position %d of %d", pos, head)
		}
		n.rejoin.CompareAndSwap(head, 0)
	}
	return nil
}

// silence returns nil while this node's writes go through, and once none
// has for two lease TTLs (at least minOutOfTouch), how long it has been.
func (n *Node) silence() error {
	last := n.contact.Load()
	if last == 0 {
		return nil
	}
	since := time.Since(n.born) - time.Duration(last-1) // monotonic: a clock step is no silence
	limit := max(outOfTouch*n.cfg.LeaseTTL, minOutOfTouch)
	if since > limit {
		return fmt.Errorf("no answer from the cluster's NATS for %s (more than %s): this node may miss changes made since",
			since.Round(time.Second), limit)
	}
	return nil
}

// heartbeat writes this node's heartbeat to the lease bucket four times a
// lease TTL until ctx is done: each write a quorum takes is word from the
// cluster (InTouch). It runs beside the role loop, which a dispatcher
// stopping can hold up.
func (n *Node) heartbeat(ctx context.Context, node string) {
	key := "heartbeat_" + hex.EncodeToString([]byte(node))
	var read headRead
	tick := time.NewTicker(n.cfg.LeaseTTL / 4)
	defer tick.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL/2)
		_, err := n.kv.Put(hctx, key, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		if err == nil {
			n.touch()
			if n.rejoin.Load() == unknownHead {
				n.rejoinHead(hctx, &read)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// rejoinConfirm is how long after its first read of the stream's head,
// back from a silence, a node reads it again before it takes the higher
// of the two as what it must apply: longer than NATS takes (its Raft
// heartbeat, 1 s) to tell a stream leader that was cut off with this node,
// and still answers as the leader, that another was elected meanwhile.
const rejoinConfirm = 2 * time.Second

// staleLeaderGone is how long after it was cut off a stream leader that
// hears from none of its peers (an external cluster with more servers
// than replicas: routes back to the lease bucket's servers, not to the
// stream's) has stepped down: NATS's Raft checks for a lost quorum every
// 10 s, over the last 10 s. The second read comes that long (and a lease
// TTL, within which the cut came) after this node's last word before its
// silence.
const staleLeaderGone = 21 * time.Second

// headRead is the heartbeat's first read of the stream's head since a
// silence ended.
type headRead struct {
	head uint64
	at   time.Duration // since born; 0 when none
}

// rejoinHead reads the stream's head for rejoin: from the stream's leader
// only (a member that has none, as one cut off, answers stream info from
// its own copy, short of what it missed), twice, rejoinConfirm apart.
func (n *Node) rejoinHead(ctx context.Context, first *headRead) {
	head, err := n.leaderHead(ctx)
	if err != nil {
		return
	}
	now := time.Since(n.born)
	switch {
	case first.at <= time.Duration(n.rejoinAt.Load()):
		*first = headRead{head: head, at: now} // the first since this silence ended
	case now-first.at >= rejoinConfirm && now >= time.Duration(n.silentFrom.Load())+staleLeaderGone+n.cfg.LeaseTTL:
		n.rejoin.CompareAndSwap(unknownHead, max(first.head, head))
	}
}

// leaderHead returns the position of the stream's last entry as its
// leader knows it: a message get, which only the leader answers (the
// stream has no direct gets), where stream info is answered from a
// member's own copy while it knows of no leader.
func (n *Node) leaderHead(ctx context.Context) (uint64, error) {
	msg, err := n.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// The stream is empty, or its leader failed to read its last
		// message (NATS answers both alike): the stream is never
		// purged, so once this node has applied an entry it is the
		// second.
		if l := n.follows.Load(); l != nil && l.ReplPos() > 0 {
			return 0, fmt.Errorf("the stream's leader found no last entry, where this node has applied up to position %d", l.ReplPos())
		}
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return msg.Sequence, nil
}

// Following returns nil while this node follows the stream (or has yet to
// start), and once Follow stopped for good, why.
func (n *Node) Following() error {
	if err := n.stopped.Load(); err != nil {
		return *err
	}
	return nil
}

// followFrom calls apply with every entry of the stream after position
// from, in order, waiting for new ones, until ctx is done, apply fails
// (ErrNotApplied) or the consumer stalls (ErrStalled; call it again from
// the last position).
func (n *Node) followFrom(ctx context.Context, from uint64, apply func(pos uint64, data []byte) error) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1}
	}
	// The request that makes the consumer waits as long as its ctx lets
	// it: one lost with a connection (cut while it was on its way) would
	// hold this node's following for good.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cons, err := n.js.OrderedConsumer(cctx, StreamName, cfg)
	cancel()
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	var applied atomic.Uint64
	applied.Store(from)
	var stalled atomic.Bool
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		defer it.Stop()
		tick := time.NewTicker(stallCheck)
		defer tick.Stop()
		last, behind := applied.Load(), 0
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-tick.C:
			}
			hctx, cancel := context.WithTimeout(watchCtx, stallCheck)
			head, err := n.Head(hctx)
			cancel()
			pos := applied.Load()
			if err == nil && pos < head && pos == last {
				if behind++; behind >= 2 {
					stalled.Store(true)
					return
				}
			} else {
				behind = 0
			}
			last = pos
		}
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case stalled.Load():
				return fmt.Errorf("%w (at position %d)", ErrStalled, applied.Load())
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if err := apply(meta.Sequence.Stream, msg.Data()); err != nil {
			return fmt.Errorf("%w: position %d: %w", ErrNotApplied, meta.Sequence.Stream, err)
		}
		applied.Store(meta.Sequence.Stream)
		n.lag.Store(meta.NumPending)
	}
}

// Head returns the position of the stream's last entry.
func (n *Node) Head(ctx context.Context) (uint64, error) {
	info, err := n.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Lag returns how many entries this node had yet to apply when it applied
// its last one.
func (n *Node) Lag() uint64 { return n.lag.Load() }

// RefusedAppends counts this node's appends the stream refused as stale.
func (n *Node) RefusedAppends() uint64 { return n.refused.Load() }

// Close drains the connection and shuts the embedded server down.
func (n *Node) Close() {
	if n.nc != nil {
		n.nc.Close()
	}
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// AheadError refuses a data dir that has applied the stream further than
// the stream goes: a node restored from a backup onto a cluster whose NATS
// storage was lost or replaced. Its next entries would never come (the
// stream's next positions are other entries), and as the writer its
// appends, which expect its own last position, would all be refused.
type AheadError struct{ Applied, Head uint64 }

func (e *AheadError) Error() string {
	return fmt.Sprintf("this data dir has applied the cluster's stream up to position %d, but the stream ends at %d: "+
		"its NATS storage (DATA/nats) is not the one this data dir was written with, as after a restore "+
		"from a backup without it. Restore the NATS storage with the data dir, or restore a cluster as README "+
		"\"Backup and restore\" says (export the log, import it into a new data dir, serve it as a single node)",
		e.Applied, e.Head)
}

// headWait is how long CatchUp asks for the stream's head before it gives
// the start up.
var headWait = time.Minute

// CatchUp waits until this node has applied every entry the stream held
// when it was called, Follow has stopped for good (it then returns nil:
// the node starts, answering 503 but for /healthz, /readyz and /metrics,
// and /readyz says why), or ctx is done.
func (n *Node) CatchUp(ctx context.Context, log *eventlog.Log) error {
	// The stream may be between leaders, or this node's own server still
	// recovering it after a restart (its head reads short of what this
	// data dir applied): the head is asked again for a while before the
	// start is given up.
	var head uint64
	var err error
	for give := time.Now().Add(headWait); ; {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		head, err = n.Head(hctx)
		cancel()
		pos := log.ReplPos()
		if err == nil && pos <= head {
			break
		}
		if ctx.Err() != nil || time.Now().After(give) {
			if err != nil {
				return fmt.Errorf("reading the stream's head: %w", err)
			}
			return &AheadError{Applied: pos, Head: head}
		}
		if err != nil {
			n.logger.Warn("reading the stream's head; trying again", "err", err)
		} else {
			n.logger.Warn("the stream's head is short of what this data dir applied; asking again", "head", head, "applied", pos)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // retry pace while the stream elects a leader or recovers
		}
	}
	for log.ReplPos() < head && n.Following() == nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("applied position %d of %d: %w", log.ReplPos(), head, ctx.Err())
		case <-time.After(5 * time.Millisecond): // polling the follower's progress
		}
	}
	return nil
}
