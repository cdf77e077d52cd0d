package prometheus_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// pedanticRegistry is a registry that checks every metric it gathers for
// consistency (prometheus.NewPedanticRegistry), holding cs.
func pedanticRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	return reg
}

// scrape serves reg on a real /metrics endpoint and returns the body.
func scrape(t *testing.T, reg *prometheus.Registry) (url, body string) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %v\n%s", res.StatusCode, err, b)
	}
	return srv.URL + "/metrics", string(b)
}

// sample returns the value of one series in a scraped body; a series
// missing from the scrape fails the test.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("scrape lacks %s", series)
	return 0
}
