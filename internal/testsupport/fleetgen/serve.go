package fleetgen

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Handler serves the fleet's current values for a live scrape:
// /metrics?host=INSTANCE is that host's agent, /node?host=INSTANCE its
// node_exporter's node_uname_info, at the time now returns. A host that is
// not alive then answers 503, as an agent that is down does not answer.
func Handler(rec *Recording, hosts []Host, cfg Config, now func() time.Time) http.Handler {
	byInstance := make(map[string]Host, len(hosts))
	for _, h := range hosts {
		byInstance[h.Instance] = h
		name, _, _ := strings.Cut(h.Instance, ":")
		byInstance[name+":9100"] = h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := byInstance[r.URL.Query().Get("host")]
		if !ok {
			http.Error(w, "unknown host", http.StatusNotFound)
			return
		}
		t := now()
		if !h.Alive(t) {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		// Rendered whole before the first byte goes out: an error is then
		// a 500, never a half-written 200.
		var b bytes.Buffer
		if err := WriteScrape(&b, rec, h, t, cfg, r.URL.Path == "/node"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(b.Bytes()) // a scraper that gave up is not an error here
	})
}

// ScrapeConfigs are Prometheus scrape_configs entries (YAML, indented for
// a top-level scrape_configs:) that scrape hosts through Handler at addr:
// job layerprobe (port 9811) and job node (9100, hosts with node_exporter),
// every interval, with instance the host's own name and, with
// clusterLabel, the host's cluster as a target label.
func ScrapeConfigs(addr string, hosts []Host, interval time.Duration, clusterLabel bool) string {
	var b strings.Builder
	for _, job := range []string{"layerprobe", "node"} {
		path := map[string]string{"layerprobe": "/metrics", "node": "/node"}[job]
		fmt.Fprintf(&b, "  - job_name: %s\n    scrape_interval: %s\n    scrape_timeout: %s\n    metrics_path: %s\n    static_configs:\n",
			job, interval, min(interval, 10*time.Second), path)
		for _, h := range hosts {
			inst := h.Instance
			if job == "node" {
				if !h.NodeExporter {
					continue
				}
				name, _, _ := strings.Cut(h.Instance, ":")
				inst = name + ":9100"
			}
			fmt.Fprintf(&b, "      - targets: [%q]\n", inst)
			if clusterLabel && h.Cluster != "" {
				fmt.Fprintf(&b, "        labels: {cluster: %q}\n", h.Cluster)
			}
		}
		fmt.Fprintf(&b, "    relabel_configs:\n      - source_labels: [__address__]\n        target_label: __param_host\n"+
			"      - source_labels: [__address__]\n        target_label: instance\n"+
			"      - target_label: __address__\n        replacement: %s\n", addr)
	}
	return b.String()
}
