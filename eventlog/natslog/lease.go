package natslog

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseValue is what a lease key holds: who holds it, where its API
// answers, and until when (unix ms). Another node may take it over only
// after Expires; the holder itself stops acting on it earlier (valid).
type LeaseValue struct {
	Node    string `json:"node"`
	Addr    string `json:"addr"` // the holder's API address, host:port
	Expires int64  `json:"expires_ms"`
}

// lease is one key of the lease bucket, taken and renewed with
// compare-and-set on the key's revision: of two nodes that saw the same
// revision, only one's write goes through.
type lease struct {
	kv    jetstream.KeyValue
	key   string
	ttl   time.Duration
	heard func() // called when the bucket's quorum took a write (may be nil)

	mu         sync.Mutex
	rev        uint64    // revision of our own last write
	validUntil time.Time // our lease, by our own clock; zero when not held
	seen       LeaseValue
}

// try takes the lease, or renews it if we hold it, and returns whether we
// hold it now. It measures the lease from before the request left, so a
// holder paused anywhere past that point thinks its lease ran out no
// later than any other node does.
func (l *lease) try(ctx context.Context, node, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/2)
	defer cancel()
	start := time.Now()
	val := LeaseValue{Node: node, Addr: addr, Expires: start.Add(l.ttl).UnixMilli()}
	data, err := json.Marshal(val)
	if err != nil {
		return false, err
	}
	var rev uint64
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err = l.kv.Create(ctx, l.key, data)
	case err != nil:
		l.lose()
		return false, err
	default:
		var cur LeaseValue
		_ = json.Unmarshal(e.Value(), &cur) // a garbled value counts as expired
		l.note(cur)
		if cur.Node != node && start.UnixMilli() <= cur.Expires {
			l.lose()
			return false, nil
		}
		rev, err = l.kv.Update(ctx, l.key, data, e.Revision())
	}
	if err != nil {
		l.lose()
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return false, nil
		}
		return false, err
	}
	l.mu.Lock()
	l.rev, l.validUntil, l.seen = rev, start.Add(l.ttl), val
	l.mu.Unlock()
	if l.heard != nil {
		// A write the bucket's quorum took. A read is no word from the
		// cluster: a node's own server answers it from its copy, cut off
		// or not.
		l.heard()
	}
	return true, nil
}

func (l *lease) note(v LeaseValue) {
	l.mu.Lock()
	l.seen = v
	l.mu.Unlock()
}

func (l *lease) lose() {
	l.mu.Lock()
	l.validUntil = time.Time{}
	l.mu.Unlock()
}

// valid reports whether we hold the lease by our own clock.
func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.validUntil)
}

// holder returns the last value this node saw under the key.
func (l *lease) holder() LeaseValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen
}

// read returns what the key holds now: LeaseValue{} when no one holds the
// lease, and the last value seen when the bucket does not answer.
func (l *lease) read(ctx context.Context) LeaseValue {
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return LeaseValue{}
	case err != nil:
		return l.holder()
	}
	var v LeaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v
}

// release gives the lease up if we still hold it, so another node need
// not wait for it to run out (a clean shutdown).
func (l *lease) release(ctx context.Context) {
	l.mu.Lock()
	rev, held := l.rev, !l.validUntil.IsZero()
	l.validUntil = time.Time{}
	l.mu.Unlock()
	if held {
		_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev))
	}
}
