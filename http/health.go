package http

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"demosvc/eventlog"
)

// Health is what /readyz reports beyond starting and stopping: whether the
// log still takes writes, and what the background verification of its hash
// chain has found. One Health serves the starting handler and the server.
type Health struct {
	log      *eventlog.Log
	stopping <-chan struct{}
	verified atomic.Uint64
	damage   atomic.Pointer[string]
	cluster  atomic.Pointer[ClusterNode] // set on a cluster node (cluster.go)
}

// NewHealth watches log. /readyz answers "stopping" once stopping closes.
func NewHealth(log *eventlog.Log, stopping <-chan struct{}) *Health {
	return &Health{log: log, stopping: stopping}
}

// Verify checks the log's chain from seq 1, then every new record, until
// ctx is done, publishing the verified seq; on a break it logs an ERROR
// and /readyz reports it. It returns when ctx is done or on a break.
func (h *Health) Verify(ctx context.Context, logger *slog.Logger) {
	start := time.Now()
	reported := false
	err := h.log.VerifyFollow(ctx, func(seq uint64) {
		h.verified.Store(seq)
		if !reported && seq >= h.log.DurableSeq() {
			reported = true
			logger.Info("log verified", "seq", seq, "took", time.Since(start))
		}
	})
	var ve *eventlog.VerifyError
	switch {
	case errors.As(err, &ve):
		msg := ve.Error()
		h.damage.Store(&msg)
		logger.Error("the log's hash chain is broken: restore the data dir from a backup",
			"first_bad_seq", ve.Seq, "reason", ve.Reason, "verified_seq", h.verified.Load())
	case err != nil && ctx.Err() == nil && !errors.Is(err, eventlog.ErrClosed):
		logger.Error("verifying the log stopped", "err", err)
	}
}

// ChainStatus returns what the background verification has found so far:
// the highest seq whose hash chain it checked, the log's durable head, and
// the break it found ("" when none). The dashboard's audit page shows it.
func (h *Health) ChainStatus() (verified, head uint64, damage string) {
	if d := h.damage.Load(); d != nil {
		damage = *d
	}
	return h.verified.Load(), h.log.DurableSeq(), damage
}

// Collectors returns the gauges of the log's health and its store's.
func (h *Health) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		&storeCollector{store: h.log.Store()},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_log_verified_seq",
			Help: "Highest seq whose hash chain the background verification has checked since start-up.",
		}, func() float64 { return float64(h.verified.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_read_only",
			Help: "1 when a storage failure stopped the log from taking writes (a restart is needed), else 0.",
		}, func() float64 {
			if h.log.Unavailable() != nil {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_log_damaged",
			Help: "1 when the background verification found the log's hash chain broken, else 0.",
		}, func() float64 {
			if h.damage.Load() != nil {
				return 1
			}
			return 0
		}),
	}
}

// readiness answers /readyz: 503 "stopping" once shutdown began, 503
// "starting" until the state is rebuilt (ready false), 503 "read_only"
// after a storage failure, 503 "log_damaged" when verification found a
// break, 503 "not_following" on a cluster node that stopped applying the
// replicated log, 503 "disconnected" on one cut off from the cluster, 503 "joining" on a cluster node that does not yet hold a
// current copy of it (so a rolling restart that waits for /readyz does not
// stop the next node too early), else 200 "ready".
func (h *Health) readiness(ready bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-h.stopping:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping"})
			return
		default:
		}
		if !ready {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
			return
		}
		if err := h.log.Unavailable(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "read_only",
				"reason": err.Error() + "; reads go on, writes answer 503: fix the disk, then restart demosvc"})
			return
		}
		if d := h.damage.Load(); d != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "log_damaged", "reason": *d,
				"verified_seq": h.verified.Load(), "head_seq": h.log.DurableSeq()})
			return
		}
		if p := h.cluster.Load(); p != nil {
			if err := (*p).Following(); err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_following",
					"reason": err.Error() + "; this node answers 503 to every request but /healthz, /readyz and /metrics", "applied_seq": h.log.DurableSeq(),
					"applied_position": h.log.ReplPos()})
				return
			}
			if err := (*p).InTouch(); err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "disconnected",
					"reason":      err.Error() + "; this node answers 503 to every request but /healthz, /readyz and /metrics until it hears from the cluster again and has applied what it missed",
					"applied_seq": h.log.DurableSeq(), "applied_position": h.log.ReplPos()})
				return
			}
			if err := (*p).Joined(); err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "joining",
					"reason": err.Error() + "; stopping another node before this one has joined may leave the cluster without a writer"})
				return
			}
		}
		if c := h.clusterInfo(); c != nil {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "cluster": c})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// logThrottle keeps a flood of identical errors (every write refused after
// a storage failure) from flooding the log: one line per interval, which
// says how many were left out since the last one.
type logThrottle struct {
	interval time.Duration
	mu       sync.Mutex
	last     time.Time
	dropped  int
}

// allow reports whether to log now, and how many lines were dropped since
// the last one logged.
func (t *logThrottle) allow(now time.Time) (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < t.interval {
		t.dropped++
		return false, 0
	}
	n := t.dropped
	t.last, t.dropped = now, 0
	return true, n
}

// refusedWrites throttles the "write refused" line of answerError.
var refusedWrites = &logThrottle{interval: 10 * time.Second}

// storeCollector has the storage engine's figures (eventlog.StoreStats)
// as metrics, read once per scrape.
type storeCollector struct{ store *eventlog.Store }

var storeDescs = struct{ disk, flushed, compacted, compactions, debt, l0, errors *prometheus.Desc }{
	disk: prometheus.NewDesc("demosvc_store_disk_bytes",
		"Bytes of the data dir's storage engine on disk: tables, WAL and its other files.", nil, nil),
	flushed: prometheus.NewDesc("demosvc_store_flushed_bytes_total",
		"Table bytes written by memtable flushes since start-up.", nil, nil),
	compacted: prometheus.NewDesc("demosvc_store_compacted_bytes_total",
		"Table bytes written by compactions since start-up: the storage's own write load.", nil, nil),
	compactions: prometheus.NewDesc("demosvc_store_compactions_total",
		"Compactions run since start-up.", nil, nil),
	debt: prometheus.NewDesc("demosvc_store_compaction_debt_bytes",
		"Bytes compactions estimate they still have to write to reach their target shape.", nil, nil),
	l0: prometheus.NewDesc("demosvc_store_l0_tables",
		"Tables in the storage engine's level 0; a growing count means compactions fall behind.", nil, nil),
	errors: prometheus.NewDesc("demosvc_store_errors_total",
		"Errors the storage engine reported since start-up (a failed flush, compaction or file removal, each retry counted); the log shows the first ten of a burst, then one a second.", nil, nil),
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{storeDescs.disk, storeDescs.flushed, storeDescs.compacted,
		storeDescs.compactions, storeDescs.debt, storeDescs.l0, storeDescs.errors} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	ch <- prometheus.MustNewConstMetric(storeDescs.disk, prometheus.GaugeValue, float64(st.DiskBytes))
	ch <- prometheus.MustNewConstMetric(storeDescs.flushed, prometheus.CounterValue, float64(st.FlushedBytes))
	ch <- prometheus.MustNewConstMetric(storeDescs.compacted, prometheus.CounterValue, float64(st.CompactedBytes))
	ch <- prometheus.MustNewConstMetric(storeDescs.compactions, prometheus.CounterValue, float64(st.Compactions))
	ch <- prometheus.MustNewConstMetric(storeDescs.debt, prometheus.GaugeValue, float64(st.CompactionDebt))
	ch <- prometheus.MustNewConstMetric(storeDescs.l0, prometheus.GaugeValue, float64(st.L0Tables))
	ch <- prometheus.MustNewConstMetric(storeDescs.errors, prometheus.CounterValue, float64(st.Errors))
}
