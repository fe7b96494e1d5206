package delivery

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the delivery side. No label names a tenant unless
// Config.PerWebhookMetrics asks for it: /metrics needs no key, and a
// webhook id belongs to an account.
type metrics struct {
	attempts *prometheus.CounterVec // by result: a verdict, one of four
	latency  prometheus.Histogram   // event commit to 2xx
	maxLag   prometheus.GaugeFunc   // the largest lag over all webhooks
	lag      *prometheus.GaugeVec   // per webhook id; nil unless PerWebhookMetrics

	mu   sync.Mutex
	lags map[string]uint64 // webhook id -> the records of its account its loop has still to read
}

func newMetrics(perWebhook bool) *metrics {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "demosvc_delivery_attempts_total",
			Help: "Webhook delivery attempts by result: succeeded, failed, retrying or disabled.",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "demosvc_delivery_latency_seconds",
			Help:    "From an event's commit to its webhook's 2xx.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 5, 30, 120, 600, 3600},
		}),
		lags: map[string]uint64{},
	}
	m.maxLag = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "demosvc_delivery_max_lag_events",
		Help: "The most records of a webhook's account not yet read by its delivery loop, over all webhooks.",
	}, m.largestLag)
	if perWebhook {
		m.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "demosvc_delivery_lag_events",
			Help: "Records of a webhook's account not yet read by its delivery loop (metrics.per_webhook).",
		}, []string{"webhook_id"})
	}
	return m
}

// setLag records webhook wh's lag.
func (m *metrics) setLag(wh string, lag uint64) {
	m.mu.Lock()
	m.lags[wh] = lag
	m.mu.Unlock()
	if m.lag != nil {
		m.lag.WithLabelValues(wh).Set(float64(lag))
	}
}

// forgetLag drops webhook wh, whose loop has stopped.
func (m *metrics) forgetLag(wh string) {
	m.mu.Lock()
	delete(m.lags, wh)
	m.mu.Unlock()
	if m.lag != nil {
		m.lag.DeleteLabelValues(wh)
	}
}

func (m *metrics) largestLag() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var most uint64
	for _, l := range m.lags {
		most = max(most, l)
	}
	return float64(most)
}

// Collectors returns the delivery metrics, to register with the server's.
func (dp *Dispatcher) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{dp.metrics.attempts, dp.metrics.latency, dp.metrics.maxLag}
	if dp.metrics.lag != nil {
		cs = append(cs, dp.metrics.lag)
	}
	return cs
}
