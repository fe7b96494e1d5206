package delivery

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

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
	Clock            Clock // nil is SystemClock
	// PerWebhookMetrics adds demosvc_delivery_lag_events{webhook_id}: a
	// tenant's identifier in /metrics, off unless asked for.
	PerWebhookMetrics bool
	// DisableAfter disables a webhook (reason failing) whose every attempt
	// failed for this long (delivery.disable_after); 0 never does.
	DisableAfter time.Duration
	// Retention removes deliveries and their attempts this old
	// (delivery.retention); 0 keeps them.
	Retention time.Duration
}

// Dispatcher runs one delivery loop per registered webhook, and answers
// the attempt log and manual retries of the HTTP API. Each loop alone
// writes its webhook's delivery state; the Dispatcher only starts and
// stops loops.
type Dispatcher struct {
	log     *eventlog.Log
	state   *projections.Projections
	store   deliveryStore
	cfg     Config
	clock   Clock
	policy  retryPolicy
	send    *sender
	logger  *slog.Logger
	ids     *eventlog.IDs
	metrics *metrics

	mu    sync.Mutex
	loops map[string]*loop
	// byAccount is loops by account, for fanOut: as of the last
	// reconcile (a loop that ended since is woken for nothing).
	byAccount map[string][]*loop
	// fanOut's buffers, kept for the next (Run's goroutine only).
	fanAccounts []string
	fanHas      []bool
	idle        []string // disabled webhooks, which have no loop: retention.go
	// live is the webhooks the last reconcile found registered: one gone
	// since without a loop (disabled, or its loop stopped by an error)
	// has its delivery state forgotten by the next.
	live map[string]bool
	// ending holds the loops stopped by a disable until they return: a
	// webhook deleted meanwhile has its state dropped by its loop's end.
	ending map[string]*loop
	// again asks the next round of Run to reconcile though no webhook
	// changed: a loop ended with an error (it restarts at the next
	// event), or dropping a deleted webhook's state failed.
	again atomic.Bool
	// restart asks Run to reconcile loopRestartDelay from now: loops that
	// ended because this node stopped taking writes (a cluster writer
	// that stepped down, which may take writes again at once) are
	// started again then, not at the next event or prune, nor at once
	// (which, while the node does not write, would spin).
	restart chan struct{}
	// wake has Run reconcile now (a loop a disable stopped has ended).
	wake chan struct{}
	wg   sync.WaitGroup

	secretErrs sync.Map // secret errors logged already
}

// New returns a dispatcher; Run starts it.
func New(log *eventlog.Log, state *projections.Projections, cfg Config, logger *slog.Logger) *Dispatcher {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "demosvc"
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	return &Dispatcher{
		log: log, state: state, store: deliveryStore{db: log.Store(), w: log}, cfg: cfg, clock: cfg.Clock, logger: logger,
		policy: retryPolicy{maxRetries: cfg.MaxRetries, backoff: cfg.Backoff, factor: cfg.BackoffFactor,
			timeout: cfg.Timeout, jitter: rand.Float64},
		send: &sender{transport: newTransport(cfg.AllowPrivate, cfg.Timeout), clock: cfg.Clock, timeout: cfg.Timeout,
			standardWebhooks: cfg.StandardWebhooks, userAgent: cfg.UserAgent},
		ids:   eventlog.NewIDs(cfg.Clock.Now),
		loops: map[string]*loop{}, byAccount: map[string][]*loop{},
		metrics: newMetrics(cfg.PerWebhookMetrics), restart: make(chan struct{}, 1), wake: make(chan struct{}, 1),
	}
}

// loopRestartDelay is how long after a loop ended with ErrNotWriter or
// ErrStale it is started again: soon enough that a writer that fenced
// again keeps delivering, late enough that a node that no longer writes
// does not spin (its dispatching ends at its next lease round).
const loopRestartDelay = time.Second

// Run keeps one loop per registered webhook, starting and stopping loops as
// webhooks come and go, until ctx is done. Then every loop stops taking new
// work, finishes and records the attempts in flight (each bounded by
// delivery.timeout), and Run returns.
func (dp *Dispatcher) Run(ctx context.Context) {
	// State left by webhooks deleted while no loop ran (deleted while
	// disabled under an earlier build, or while another node dispatched)
	// is forgotten by the first reconcile, as if they had just been
	// deleted. The state holds every webhook whose delivery state the
	// store does: it takes a record before the store takes what follows.
	if stored, err := dp.store.webhooks(); err != nil {
		dp.logger.Warn("listing the webhooks with delivery state", "err", err)
	} else {
		dp.mu.Lock()
		if dp.live == nil {
			dp.live = map[string]bool{}
		}
		for _, id := range stored {
			dp.live[id] = true
		}
		dp.mu.Unlock()
	}
	prune := dp.clock.NewTimer(pruneEvery)
	defer prune.Stop()
	restart := dp.clock.NewTimer(time.Hour)
	restart.Stop()
	defer restart.Stop()
	// Targets are rebuilt only when a webhook changed, or when a loop
	// ended with an error or a forget failed (dp.again): each costs a
	// pass over every webhook, with its secret opened, which at every
	// commit grew the cost of every write with the number of webhooks.
	dp.again.Store(true)
	var reconciled uint64
	var pruning []string // the disabled webhooks retention still looks at
	// Each loop reads what was durable when it starts; from then on it is
	// woken for the records of its account.
	fanned := dp.log.DurableSeq()
	for {
		changed := dp.log.Changed()
		if seq := dp.state.WebhooksChanged(); seq != reconciled || dp.again.Swap(false) {
			reconciled = seq
			dp.reconcile()
		}
		if head := dp.log.DurableSeq(); head > fanned {
			if err := dp.fanOut(fanned, head); err != nil {
				// Every loop looks again, as if each account had a record.
				dp.logger.Warn("reading the log for the delivery loops", "err", err)
				dp.wakeAll()
			}
			fanned = head
		}
		select {
		case <-changed:
		case <-dp.wake:
		case <-dp.restart:
			restart.Reset(loopRestartDelay)
		case <-restart.C():
			dp.again.Store(true) // the loops that ended are started again
		case <-prune.C():
			// One step a turn, the next at once while there is more.
			if len(pruning) == 0 && dp.cfg.Retention > 0 {
				dp.mu.Lock()
				pruning = append(pruning[:0], dp.idle...)
				dp.mu.Unlock()
			}
			if pruning = dp.pruneIdleStep(pruning); len(pruning) > 0 {
				prune.Reset(0)
			} else {
				prune.Reset(pruneEvery)
			}
		case <-ctx.Done():
			dp.mu.Lock()
			for _, l := range dp.loops {
				close(l.stopping)
			}
			dp.mu.Unlock()
			dp.wg.Wait()
			dp.send.transport.CloseIdleConnections()
			// A later Run (a cluster node that holds the dispatcher
			// lease again) starts every loop afresh.
			dp.mu.Lock()
			dp.loops = map[string]*loop{}
			dp.mu.Unlock()
			return
		}
	}
}

// fanOut wakes the loops of the accounts with records in (from, to]: one
// look for every loop, so that a write costs nothing to the loops of other
// accounts (woken at every commit, each loop read every record: 500
// webhooks of other accounts cut the writes to 0.13 of those with none,
// BenchmarkWritesBesideManyWebhooks). It asks the state's index of each
// account's records while there are fewer accounts with loops than
// records in the range, and reads the range of the log otherwise.
func (dp *Dispatcher) fanOut(from, to uint64) error {
	dp.mu.Lock()
	accounts := dp.fanAccounts[:0]
	if n := uint64(len(dp.byAccount)); n > 0 && n <= to-from {
		for acc := range dp.byAccount {
			accounts = append(accounts, acc)
		}
	}
	many := len(dp.byAccount) > 0 && len(accounts) == 0
	dp.mu.Unlock()
	if len(accounts) > 0 {
		dp.fanAccounts = accounts
		dp.fanHas = dp.state.AccountsWithRecords(dp.fanHas[:0], accounts, from, to)
		dp.mu.Lock()
		for i, acc := range accounts {
			if dp.fanHas[i] {
				for _, l := range dp.byAccount[acc] {
					l.poke()
				}
			}
		}
		dp.mu.Unlock()
		return nil
	}
	if !many {
		return nil // no loop to wake
	}
	var last string // records come in runs of one account
	return dp.log.Read(from+1, to, func(rec *eventlog.Record) error {
		if rec.Account == last {
			return nil
		}
		last = rec.Account
		dp.mu.Lock()
		for _, l := range dp.byAccount[rec.Account] {
			l.poke()
		}
		dp.mu.Unlock()
		return nil
	})
}

// wakeAll wakes every loop.
func (dp *Dispatcher) wakeAll() {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, l := range dp.loops {
		l.poke()
	}
}

// reconcile starts loops for new webhooks, stops those of disabled ones
// (their attempts in flight end and are stored) and cancels those of
// deleted ones, whose attempts in flight are cancelled with them.
func (dp *Dispatcher) reconcile() {
	targets, errs := dp.state.WebhookTargets()
	for _, err := range errs {
		// Once per webhook and process: reconcile runs at every webhook change.
		if _, seen := dp.secretErrs.LoadOrStore(err.Error(), true); !seen {
			dp.logger.Error("webhook secret does not open under the master key; not delivering to it", "err", err)
		}
	}
	// targets holds webhooks whose secret did not open as disabled ones:
	// their state is kept, not forgotten.
	live := map[string]bool{}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.idle = dp.idle[:0]
	for _, t := range targets {
		live[t.ID] = true
		if t.Disabled {
			dp.idle = append(dp.idle, t.ID)
			if l := dp.loops[t.ID]; l != nil {
				// Stopped as at shutdown, not cancelled: its attempts in
				// flight end (none starts, the webhook being disabled)
				// and every outcome it holds is stored. Cancelled, the
				// answers a receiver gave were lost, and sent again as
				// first attempts once the webhook was enabled.
				close(l.stopping)
				delete(dp.loops, t.ID)
				if !l.finished { // a loop that disabled its webhook itself may have ended already
					if dp.ending == nil {
						dp.ending = map[string]*loop{}
					}
					dp.ending[t.ID] = l
				}
			}
			continue
		}
		if l := dp.loops[t.ID]; l != nil {
			l.update(t)
			continue
		}
		if dp.ending[t.ID] != nil {
			// Enabled again while the loop its disable stopped still
			// ends its attempts: one loop at a time writes a webhook's
			// state. That loop's end reconciles again.
			continue
		}
		l := newLoop(dp, t)
		dp.loops[t.ID] = l
		dp.wg.Add(1)
		go func() {
			defer dp.wg.Done()
			err := l.run()
			dp.mu.Lock()
			l.finished = true
			if dp.ending[t.ID] == l {
				delete(dp.ending, t.ID)
				// Enabled again meanwhile, it gets its loop now.
				dp.again.Store(true)
				select {
				case dp.wake <- struct{}{}:
				default:
				}
			}
			dp.mu.Unlock()
			if l.deleted.Load() {
				// Only now that nothing of the loop can write any more.
				if err := dp.store.forget(t.ID); err != nil {
					dp.logger.Warn("dropping a deleted webhook's delivery state", "webhook_id", t.ID, "err", err)
				}
				return
			}
			// A loop ends with context.Canceled when its webhook is deleted
			// or disabled; any other error (a store that failed) must not
			// end deliveries for good. l.ctx says nothing here: run
			// cancels it on the way out, to end its attempts.
			if err != nil && !errors.Is(err, context.Canceled) {
				notWriter := errors.Is(err, eventlog.ErrNotWriter) || errors.Is(err, eventlog.ErrStale)
				if notWriter {
					// A cluster node that stepped down as the writer: its
					// dispatching ends at its next lease round, and the
					// next writer's takes over from the state written so
					// far. One that fenced again at once, keeping the
					// dispatcher lease, has the loop back loopRestartDelay
					// later.
					dp.logger.Info("delivery loop stopped: this node no longer writes; it is started again if it does", "webhook_id", t.ID, "err", err)
				} else {
					dp.logger.Error("delivery loop stopped; it restarts at the next event", "webhook_id", t.ID, "err", err)
				}
				dp.mu.Lock()
				if dp.loops[t.ID] == l {
					delete(dp.loops, t.ID)
				}
				dp.mu.Unlock()
				if notWriter {
					// Not at once: Run reconciles loopRestartDelay later.
					select {
					case dp.restart <- struct{}{}:
					default:
					}
					return
				}
				dp.again.Store(true)
			}
		}()
	}
	for id := range dp.live {
		if !live[id] && dp.loops[id] == nil {
			if l := dp.ending[id]; l != nil {
				l.deleted.Store(true) // disabled, still returning: it drops the state when it has
				l.cancel()            // and its attempts in flight end now
				continue
			}
			// Deleted with no loop to forget its state when it ends.
			if err := dp.store.forget(id); err != nil {
				dp.logger.Warn("dropping a deleted webhook's delivery state", "webhook_id", id, "err", err)
				live[id] = true // tried again at the next reconcile
				dp.again.Store(true)
			}
		}
	}
	dp.live = live
	for id, l := range dp.loops {
		if !live[id] {
			l.deleted.Store(true)
			l.cancel()
			delete(dp.loops, id)
		}
	}
	clear(dp.byAccount)
	for _, l := range dp.loops {
		dp.byAccount[l.t.Account] = append(dp.byAccount[l.t.Account], l)
	}
}

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

// ErrNotRunning reports a retry asked of a webhook whose deliveries are
// not running at the moment: disabled, just registered, stopping, or
// stopped by a storage error until its next event.
var ErrNotRunning = errors.New("deliveries of this webhook are not running at the moment")

// Retry sends a failed delivery again, with a fresh attempt count. It
// returns ErrNoDelivery for an unknown delivery, ErrNotFailed for one that
// is pending or succeeded, and ErrNotRunning when the webhook has no
// delivery loop (the caller has checked that the webhook exists).
func (dp *Dispatcher) Retry(ctx context.Context, wh, id string) (Delivery, error) {
	dp.mu.Lock()
	l := dp.loops[wh]
	dp.mu.Unlock()
	if l == nil {
		return Delivery{}, ErrNotRunning
	}
	req := retryReq{id: id, done: make(chan retryResult, 1)}
	select {
	case l.retryReqs <- req:
	case <-l.ctx.Done():
		return Delivery{}, ErrNotRunning
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
	r := <-req.done
	return r.d, r.err
}

// PrefixDelivery begins every delivery id.
const PrefixDelivery = "dlv_"

// Deliveries returns a page of a webhook's attempt log, most recent first:
// at most limit deliveries before startingAfter (a delivery id), and
// whether more remain. A startingAfter the webhook has no delivery of is
// ErrNoDelivery, as a list of the API refuses an unknown starting point.
func (dp *Dispatcher) Deliveries(wh string, limit int, startingAfter string) ([]Delivery, bool, error) {
	if startingAfter != "" {
		_, ok, err := dp.store.get(wh, startingAfter)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, ErrNoDelivery
		}
	}
	return dp.store.page(wh, limit, startingAfter)
}
