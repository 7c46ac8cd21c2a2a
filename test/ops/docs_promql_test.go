package ops

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// docExample is one PromQL query of a ```promql block in the docs.
type docExample struct {
	where string // file:line
	expr  string
}

var promqlFence = regexp.MustCompile("(?s)```promql\n(.*?)```")

// promqlSpan is an inline code span that selects a layerprobe series with
// a label matcher, such as `layerprobe_fsync_regression{target="container"}`
// in running text.
var promqlSpan = regexp.MustCompile("`([^`\n]*layerprobe_[a-z_]+\\{[^`\n}]*=[^`\n]*)`")

// docExamples reads every ```promql block of README.md, docs/ and the
// kit's READMEs and splits it into queries: a query starts on a line at
// the block's indentation and goes on over the more indented lines below
// it; # lines are comments. Inline spans (promqlSpan) outside the blocks
// are queries too, but Grafana's label_values() variable queries, which
// the dashboard tests run.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	files := []string{"README.md", "dashboards/README.md", "deploy/README.md", "mixin/README.md"}
	docs, _ := filepath.Glob(repoPath("docs/*.md"))
	for _, d := range docs {
		rel, _ := filepath.Rel(repoRoot, d)
		files = append(files, rel)
	}
	var out []docExample
	for _, f := range files {
		b, err := os.ReadFile(repoPath(f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range promqlSpan.FindAllStringSubmatchIndex(promqlFence.ReplaceAllStringFunc(text, blank), -1) {
			if expr := text[m[2]:m[3]]; !strings.HasPrefix(expr, "label_values(") {
				out = append(out, docExample{fmt.Sprintf("%s:%d", f, strings.Count(text[:m[2]], "\n")+1), expr})
			}
		}
		for _, m := range promqlFence.FindAllStringSubmatchIndex(text, -1) {
			first := strings.Count(text[:m[2]], "\n") + 1
			lines := strings.Split(strings.TrimRight(text[m[2]:m[3]], "\n "), "\n")
			indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
			open := false // the last query may take continuation lines
			for i, l := range lines {
				body := strings.TrimSpace(l)
				switch {
				case body == "" || strings.HasPrefix(body, "#"):
					open = false
				case open && len(l)-len(strings.TrimLeft(l, " ")) > indent:
					out[len(out)-1].expr += "\n" + body
				default:
					out = append(out, docExample{fmt.Sprintf("%s:%d", f, first+i), body})
					open = true
				}
			}
		}
	}
	return out
}

// blank replaces every byte of s but newlines with a space, so that
// offsets into the result are offsets into s.
func blank(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// troubledAgent is a synthetic agent in every state the docs' examples
// look for: steady and cold results, a stale steady success, a confirmed
// fsync regression, failing cycles, no reflink, a database in its
// writable layer, and a second engine on vfs that never succeeded.
func troubledAgent(now time.Time) *synthAgent {
	a := newSynthAgent(kindCold, now)
	for i, s := range a.samples {
		switch {
		case s.name == "layerprobe_last_success_timestamp_seconds" && s.labels["mode"] == "steady":
			a.samples[i].value = constant(float64(now.Add(-20 * time.Hour).Unix()))
		case s.name == "layerprobe_fsync_regression" && s.labels["target"] == "container":
			a.samples[i].value = constant(1)
		case s.name == "layerprobe_databases_in_layer":
			a.samples[i].value = constant(1)
		case s.name == "layerprobe_host_arm_cgroup_joined":
			a.samples[i].value = constant(0)
		}
	}
	// A database keeping its data in its layer, for the advisor's examples.
	a.samples = append(a.samples, synthSample{"layerprobe_container_database_in_layer", prometheus.GaugeValue, prometheus.Labels{
		"engine": "default", "container": "db", "image": "postgres:16", "database": "postgres",
	}, constant(1)})
	a.samples = append(a.samples, synthSample{"layerprobe_engine_info", prometheus.GaugeValue, prometheus.Labels{
		"engine": "fresh", "driver": "vfs", "backing_fs": "extfs", "engine_version": "27.5.1",
		"data_root": "/srv/docker", "fio_version": "fio-3.33",
	}, constant(1)})
	return a
}

// TestDocsPromQLExamples runs every PromQL example of the docs against a
// real Prometheus with the shipped rules, scraping a synthetic agent that
// is in every state the examples look for; each must parse and return
// data. Grafana-style $instance and $engine stand for that agent.
func TestDocsPromQLExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Prometheus")
	}
	queue.Parallel(t)
	examples := docExamples(t)
	if len(examples) < 30 {
		t.Fatalf("found only %d PromQL examples in the docs: %v", len(examples), examples)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(troubledAgent(time.Now()))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	prom := startPrometheus(t, addr)

	// increase() and rate() need two samples, the recording rules a few
	// evaluations, the failed-cycle counter a rise: about 10s at the 2s
	// scrape and evaluation interval, far longer with both cores busy.
	testharness.Eventually(t, 3*time.Minute, time.Second, "four scrapes and the recording rules", func() (bool, string) {
		r := prom.query(t, `count_over_time(layerprobe_build_info[1m]) >= 4`)
		rr := prom.query(t, `engine:layerprobe_cycles:ok_ratio1d`)
		return len(r) == 1 && len(rr) == 1, fmt.Sprint(r, rr)
	})
	subs := strings.NewReplacer("$instance", addr, "$engine", "default")
	for _, ex := range examples {
		expr := subs.Replace(ex.expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a variable this test does not know in %q", ex.where, ex.expr)
			continue
		}
		res, err := prom.tryQuery(t, expr)
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", ex.where, err, ex.expr)
		case len(res) == 0:
			t.Errorf("%s: no data\n%s", ex.where, ex.expr)
		}
	}
}
