package http

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's Prometheus metrics, in a registry of their own
// so that tests can run servers side by side.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	commits  prometheus.Histogram

	// children caches the series of each (route, method, code): the label
	// lookup hashes strings under a lock, too much for every request.
	children sync.Map // requestSeries -> *seriesPair
}

type requestSeries struct {
	route, method string
	code          int
}

type seriesPair struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// observe counts one request and its latency.
func (m *Metrics) observe(route, method string, code int, elapsed time.Duration) {
	key := requestSeries{route, method, code}
	v, ok := m.children.Load(key)
	if !ok {
		v, _ = m.children.LoadOrStore(key, &seriesPair{
			count:   m.requests.WithLabelValues(route, method, strconv.Itoa(code)),
			latency: m.latency.WithLabelValues(route),
		})
	}
	p := v.(*seriesPair)
	p.count.Inc()
	p.latency.Observe(elapsed.Seconds())
}

// NewMetrics registers the server's metrics. headSeq reports the log's
// durable head.
func NewMetrics(headSeq func() float64) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "demosvc_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "demosvc_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "demosvc_log_commit_records",
			Help:    "Records per log commit: how many events share one fsync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
	}
	m.Registry.MustRegister(m.requests, m.latency, m.commits,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "demosvc_log_head_seq",
			Help: "Seq of the last durable event in the log.",
		}, headSeq),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// ObserveCommit records the number of records one fsync carried.
func (m *Metrics) ObserveCommit(records int) { m.commits.Observe(float64(records)) }

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
