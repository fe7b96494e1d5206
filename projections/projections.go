// Package projections holds demosvc's domain: the payloads of the events in
// the log, the rules that decide which events a command causes, and the
// in-memory state that every read is served from. It is a pure function of
// the log: nothing here reads a clock, the config or randomness while
// applying an event.
package projections

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"demosvc/eventlog"
)

// Projections is the in-memory state of every account, kept as a pure
// function of the log, and the single writer that changes it (whose
// invariant opens writer.go).
type Projections struct {
	log  *eventlog.Log
	opts Options
	info LoadInfo

	snapMu      sync.Mutex   // one snapshot at a time: SaveSnapshot holds it
	snapSize    atomic.Int64 // the last snapshot's size: how far apart snapshots are
	snapSeq     atomic.Uint64
	snapRunning atomic.Bool
	// snapGo guards starting a background snapshot against Close, which
	// waits for the one running (snapDone) and lets none start after.
	snapGo     sync.Mutex
	snapClosed bool // guarded by snapGo
	snapDone   sync.WaitGroup
	idem       *idemIndex // recorded answers inside the window; writer-owned

	mu    sync.RWMutex
	state *State
	// readers counts those waiting for the read lock: the writer decides
	// no further group while one waits (writer.go).
	readers atomic.Int32
	// broken says the state holds changes the log does not (a failed
	// commit, an event it could not apply); writer-owned.
	broken bool
	// auth is what Authenticate reads, without the state's lock: rebuilt
	// from the state when accounts or keys change, once durable.
	auth atomic.Pointer[authIndex]

	queue   chan *pending
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// Options are the settings commands decide with. They are read when a
// command is decided, never when an event is applied.
type Options struct {
	// HotThreshold is the intent score that makes a lead hot (0..100).
	HotThreshold int
	// SnapshotEvery is how many events may pass between snapshots; 0
	// means only at Close.
	SnapshotEvery int
	// Logger receives snapshot outcomes; nil discards them.
	Logger *slog.Logger
	// Sealer seals webhook secrets under the master key.
	Sealer *eventlog.Sealer
	// MaxWebhooks caps an account's webhooks; 0 means no cap.
	MaxWebhooks int
	// AllowPrivateNetworks lets webhooks point at private addresses.
	AllowPrivateNetworks bool
	// ReplayProgress, if set, is called while Open replays the log, every
	// few thousand events and once at the end, with the seq reached and
	// the head it replays to (serve logs it every few seconds).
	ReplayProgress func(seq, head uint64)
	// Stop, if set, ends Open's replay when it is closed: Open then
	// returns ErrStopped (serve stopped by a signal while it starts).
	Stop <-chan struct{}
}

// ErrStopped ends an Open whose Options.Stop closed during the replay.
var ErrStopped = errors.New("stopped while rebuilding the state")

// DefaultOptions are the settings of an unconfigured service.
var DefaultOptions = Options{HotThreshold: 80, MaxWebhooks: 25}

// LoadInfo says how the state was rebuilt at Open.
type LoadInfo struct {
	SnapshotSeq uint64        // 0 when no snapshot was used
	Ignored     string        // why a stored snapshot was not used, if one was not
	Replayed    uint64        // events replayed from the log
	Took        time.Duration // the whole rebuild
}

// Open rebuilds the state, from the newest usable snapshot and the log
// after it, and starts the writer.
func Open(log *eventlog.Log, opts Options) (*Projections, error) {
	start := time.Now()
	var info LoadInfo
	base, why := loadSnapshot(log.Store())
	if base != nil {
		meta, _ := readSnapMeta(log.Store())
		meta.Seq = base.seq
		if err := snapshotOnLog(log, meta); err != nil {
			return nil, fmt.Errorf("%w: %w", eventlog.ErrDamaged, err)
		}
	}
	if base != nil {
		info.SnapshotSeq = base.seq
	} else {
		info.Ignored = why
	}
	state, err := replayLogTo(log, base, log.DurableSeq(), opts.ReplayProgress, opts.Stop)
	if err != nil {
		return nil, err
	}
	info.Replayed = state.seq - info.SnapshotSeq
	info.Took = time.Since(start)
	idem, err := loadIdempotency(log.Store(), log.IDs().Now())
	if err != nil {
		return nil, err
	}
	p := &Projections{
		log:     log,
		opts:    opts,
		idem:    idem,
		info:    info,
		state:   state,
		queue:   make(chan *pending, maxGroup),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	p.snapSeq.Store(info.SnapshotSeq)
	p.publishAuth()
	if p.opts.Logger == nil {
		p.opts.Logger = slog.New(slog.DiscardHandler)
	}
	go p.writer()
	return p, nil
}

// ReplayLog applies every durable record of log after base's seq to base (a
// new state when nil) and returns it.
func ReplayLog(log *eventlog.Log, base *State) (*State, error) {
	return replayLog(log, base, nil)
}

// replayProgressEvery is how many events pass between two calls of a
// replay's progress callback.
var replayProgressEvery uint64 = 4096

// replayLog is ReplayLog calling progress, if set, as Options.ReplayProgress
// says.
func replayLog(log *eventlog.Log, base *State, progress func(seq, head uint64)) (*State, error) {
	return replayLogTo(log, base, log.DurableSeq(), progress, nil)
}

// replayLogTo is replayLog up to seq head, ended with ErrStopped when
// cancel (if not nil) closes.
func replayLogTo(log *eventlog.Log, base *State, head uint64, progress func(seq, head uint64), cancel <-chan struct{}) (*State, error) {
	s := base
	if s == nil {
		s = NewState()
	}
	reg := log.Registry()
	// Reading, decoding payloads and applying them run on three goroutines:
	// on two cores a replay of a million sessions then takes about half
	// their sum (applying alone takes 40% of it) instead of the sum.
	batches := make(chan *recordBatch, replayBatches)
	decoded := make(chan *recordBatch, replayBatches)
	free := make(chan *recordBatch, 2*replayBatches+3) // more than can exist
	stop := make(chan struct{})
	var readErr error
	go func() {
		defer close(batches)
		readErr = readRecords(log, s.seq+1, head, batches, free, stop)
	}()
	go func() {
		defer close(decoded)
		for batch := range batches {
			batch.decode(reg, stop)
			decoded <- batch
		}
	}()
	var applyErr error
	for batch := range decoded {
		if applyErr != nil {
			continue // draining until the reader sees stop
		}
		select {
		case <-cancel:
			applyErr = ErrStopped
			close(stop)
			continue
		default:
		}
		for i := range batch.recs {
			rec := &batch.recs[i]
			err := batch.errs[i]
			if err == nil {
				err = s.apply(rec, batch.values[i])
			}
			if err != nil {
				applyErr = err
				close(stop)
				break
			}
			if progress != nil && rec.Seq%replayProgressEvery == 0 {
				progress(rec.Seq, head)
			}
		}
		select { // applied: nothing of it is kept (payloads decode to copies)
		case free <- batch:
		default:
		}
	}
	if err := cmp.Or(applyErr, readErr); err != nil {
		return nil, fmt.Errorf("replaying the log: %w", err)
	}
	if progress != nil {
		progress(s.seq, head)
	}
	return s, nil
}

// replayBatch is how many records go to the applier at once (a variable
// for the tests, which make batches small to recycle them often), and
// replayBatches how many batches may wait for it.
var replayBatch = 512

const replayBatches = 4

// errReplayStopped ends a read whose applier has failed.
var errReplayStopped = errors.New("replay stopped")

// recordBatch is records read for the applier, their payloads copied into
// one buffer of the batch's own (Read reuses them). The applier hands a
// batch back once applied, and the reader fills it again: a replay's
// garbage would otherwise be mostly these copies, and the collections they
// cause each mark the whole state built so far.
type recordBatch struct {
	recs     []eventlog.Record
	payloads []byte
	// values and errs are each record's decoded payload, or why it
	// could not be decoded.
	values []any
	errs   []error
}

// decode decodes every record's payload, unless stop is closed (then the
// batch will not be applied).
func (b *recordBatch) decode(reg *eventlog.Registry, stop <-chan struct{}) {
	b.values, b.errs = b.values[:0], b.errs[:0]
	select {
	case <-stop:
		return
	default:
	}
	for i := range b.recs {
		v, err := reg.Decode(&b.recs[i])
		b.values, b.errs = append(b.values, v), append(b.errs, err)
	}
}

// readRecords reads the records from..to and sends them in batches until
// it has sent them all or stop is closed. It takes empty batches from free
// when there are any.
func readRecords(log *eventlog.Log, from, to uint64, out chan<- *recordBatch, free <-chan *recordBatch, stop <-chan struct{}) error {
	next := func() *recordBatch {
		select {
		case b := <-free:
			b.recs, b.payloads = b.recs[:0], b.payloads[:0]
			return b
		default:
			return &recordBatch{recs: make([]eventlog.Record, 0, replayBatch)}
		}
	}
	batch := next()
	send := func() bool {
		off := 0
		for i := range batch.recs { // the buffer has stopped growing: slice it
			n := len(batch.recs[i].Payload)
			batch.recs[i].Payload = batch.payloads[off : off+n : off+n]
			off += n
		}
		select {
		case out <- batch:
			batch = next()
			return true
		case <-stop:
			return false
		}
	}
	err := log.Read(from, to, func(rec *eventlog.Record) error {
		batch.payloads = append(batch.payloads, rec.Payload...)
		batch.recs = append(batch.recs, *rec)
		if len(batch.recs) == replayBatch && !send() {
			return errReplayStopped
		}
		return nil
	})
	if errors.Is(err, errReplayStopped) {
		return nil // the applier's error says why
	}
	if err == nil && len(batch.recs) > 0 {
		send()
	}
	return err
}

// LoadInfo says how the state was rebuilt at Open.
func (p *Projections) LoadInfo() LoadInfo { return p.info }

// View calls fn with the state read-locked. fn must not keep pointers into
// the state after it returns.
func (p *Projections) View(fn func(s *State)) {
	p.rlock()
	defer p.mu.RUnlock()
	fn(p.state)
}

// rlock takes the read lock, counted in p.readers while it waits.
func (p *Projections) rlock() {
	p.readers.Add(1)
	p.mu.RLock()
	p.readers.Add(-1)
}

// Seq returns the seq of the last event applied to the state.
func (p *Projections) Seq() uint64 {
	p.rlock()
	defer p.mu.RUnlock()
	return p.state.seq
}

// Close stops the writer after the group in flight and saves a snapshot
// if the state moved since the last one.
func (p *Projections) Close() { p.close(true) }

// CloseWithoutSnapshot is Close that saves no snapshot: serve, refusing
// a data dir it has read, leaves it as it found it.
func (p *Projections) CloseWithoutSnapshot() { p.close(false) }

func (p *Projections) close(save bool) {
	p.once.Do(func() {
		close(p.stop)
		<-p.stopped
		// A background snapshot must not outlive Close: the caller closes
		// the log and the store next.
		p.snapGo.Lock()
		p.snapClosed = true
		p.snapGo.Unlock()
		p.snapDone.Wait()
		if save && p.Seq() > p.snapSeq.Load() {
			p.snapshot()
		}
	})
}
