package http

import (
	"net/http"
	"slices"
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
	route, method, code string
}

// methodLabel is method if it is one of HTTP's standard methods, else
// "other": a client may send any token as a method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// codeLabel is the status code if the server writes it (the statuses of
// errors.go and the successes), else its class ("5xx"): a fixed set
// whatever a handler does. The labels are made once (codeLabels):
// formatting one was an allocation per request.
func codeLabel(code int) string {
	if code >= 0 && code < len(codeLabels) {
		return codeLabels[code]
	}
	return "other"
}

// codeLabels holds codeLabelOf every status below 600.
var codeLabels = func() (labels [600]string) {
	for code := range labels {
		labels[code] = codeLabelOf(code)
	}
	return labels
}()

func codeLabelOf(code int) string {
	if code == http.StatusOK || code == http.StatusCreated || code == http.StatusNoContent || slices.Contains(statusCodes, code) {
		return strconv.Itoa(code)
	}
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code/100) + "xx"
}

// statusCodes are the statuses of the error table.
var statusCodes = func() []int {
	var out []int
	for _, s := range statuses {
		out = append(out, s)
	}
	return out
}()

type seriesPair struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// observe counts one request and its latency. route is a route pattern
// or "unmatched"; the method and code are reduced to fixed sets (see
// methodLabel, codeLabel), so that no client can add a series.
func (m *Metrics) observe(route, method string, code int, elapsed time.Duration) {
	key := requestSeries{route, methodLabel(method), codeLabel(code)}
	v, ok := m.children.Load(key)
	if !ok {
		v, _ = m.children.LoadOrStore(key, &seriesPair{
			count:   m.requests.WithLabelValues(key.route, key.method, key.code),
			latency: m.latency.WithLabelValues(key.route),
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
			Help: "HTTP requests by route pattern (or unmatched), method (standard ones, else other) and status code.",
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
