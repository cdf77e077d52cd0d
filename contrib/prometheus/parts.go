package prometheus

import "github.com/prometheus/client_golang/prometheus"

// parts are the metrics one of this package's collectors is made of: its
// Describe and Collect are theirs, in this order.
type parts []prometheus.Collector

// Describe sends every part's descriptions.
func (p parts) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range p {
		m.Describe(ch)
	}
}

// Collect sends every part's metrics.
func (p parts) Collect(ch chan<- prometheus.Metric) {
	for _, m := range p {
		m.Collect(ch)
	}
}
