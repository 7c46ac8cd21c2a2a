package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	// For its init: it hands layerprobe's version to the version collector.
	_ "github.com/layerprobe/layerprobe/internal/version"
)

// maxScrapesInFlight bounds concurrent /metrics requests. A scrape is cheap
// (no I/O, one snapshot), so the limit only matters against floods; a few
// Prometheus replicas plus a curl fit well below it.
const maxScrapesInFlight = 10

// NewRegistry returns a fresh registry (not the global default, so no
// package init elsewhere can add series to /metrics) holding the snapshot
// collector, the Go runtime and process collectors, and
// layerprobe_build_info (client_golang's version collector). detail
// chooses the level (NewCollector).
func NewRegistry(src Source, detail bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(src, detail),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(namespace),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition format. Errors while
// gathering (say, one invalid label value) are logged through logger and
// the remaining series are still served: a partial scrape beats a failed
// one, and the error is counted in promhttp_metric_handler_errors_total.
// Handler registers the promhttp_metric_handler_* self-metrics on reg;
// calling it twice with one registry is fine.
func Handler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.With("component", "metrics").Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: maxScrapesInFlight,
	})
	return promhttp.InstrumentMetricHandler(reg, h)
}
