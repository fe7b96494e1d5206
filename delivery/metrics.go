package delivery

import "github.com/prometheus/client_golang/prometheus"

// metrics of the delivery side.
type metrics struct {
	attempts *prometheus.CounterVec // by result: succeeded, failed, retrying, disabled
	latency  prometheus.Histogram   // event commit to 2xx
	lag      *prometheus.GaugeVec   // log head minus a webhook's cursor, in events
}

func newMetrics() *metrics {
	return &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "demosvc_delivery_attempts_total",
			Help: "Webhook delivery attempts by result.",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "demosvc_delivery_latency_seconds",
			Help:    "From an event's commit to its webhook's 2xx.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 5, 30, 120, 600, 3600},
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "demosvc_delivery_lag_events",
			Help: "Events in the log not yet read by a webhook's delivery loop.",
		}, []string{"webhook_id"}),
	}
}

// Collectors returns the delivery metrics, to register with the server's.
func (dp *Dispatcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{dp.metrics.attempts, dp.metrics.latency, dp.metrics.lag}
}
