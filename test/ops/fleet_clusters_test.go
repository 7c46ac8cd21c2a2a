package ops

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestFleetClusters: the rules and dashboards with a cluster label that
// Prometheus does not store, as with Thanos or Mimir. Two Prometheus
// servers, each with external_labels {cluster: eu} or {cluster: us},
// scrape half of a generated fleet (live, from a real agent's recorded
// output) and run the shipped rules: their series carry no cluster label
// locally, and their recorded series leave through /federate with their
// own cluster. A third Prometheus federates both (raw series, as Thanos
// Query or Mimir see them) and runs the same rules, as a ruler would: the
// clusters stay apart in every fleet aggregation, the dashboards' cluster
// variable lists both, and each dashboard query answers for one cluster
// alone.
// fleetInterval is the scrape, federation and rule interval of the
// fleet's three Prometheus servers.
const fleetInterval = 5 * time.Second

func TestFleetClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs three real Prometheus servers")
	}
	promtool, prom := tool(t, "promtool"), tool(t, "prometheus")
	queue.Parallel(t)
	ctx := t.Context()

	rec := loadFleetRecording(t)
	now := time.Now()
	cfg := fleetgen.Config{Hosts: 24, Start: now.Add(-2 * time.Hour), End: now.Add(2 * time.Hour), Step: time.Minute,
		Cycle: 6 * time.Hour, Seed: 5, Clusters: []string{"eu", "us"}}
	hosts := fleetgen.Fleet(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: fleetgen.Handler(rec, hosts, cfg, time.Now)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	// The shipped rules, every group at fleetInterval, as often as the
	// scrapes: under the test suite's load a 2 s scrape of the generated
	// hosts timed out now and then, and the counts below waited on series
	// gone stale.
	dir := memDir(t)
	shipped, err := os.ReadFile(repoPath(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rules, rulesEvery(shipped, fleetInterval), 0o644); err != nil {
		t.Fatal(err)
	}
	alive := map[string]int{}
	leaves := map[string]*fleetgen.Bed{}
	for _, cluster := range cfg.Clusters {
		var mine []fleetgen.Host
		for _, h := range hosts {
			if h.Cluster == cluster {
				mine = append(mine, h)
				if h.Alive(now) && h.Alive(now.Add(5*time.Minute)) {
					alive[cluster]++
				}
			}
		}
		b := &fleetgen.Bed{Prometheus: prom, Promtool: promtool, Dir: filepath.Join(dir, cluster), Rules: rules,
			ExternalLabels: map[string]string{"cluster": cluster}, Interval: fleetInterval}
		if err := b.Start(ctx, fleetgen.ScrapeConfigs(l.Addr().String(), mine, fleetInterval, false)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		leaves[cluster] = b
	}
	var fed strings.Builder
	for _, cluster := range cfg.Clusters {
		fmt.Fprintf(&fed, "  - job_name: federate-%s\n    honor_labels: true\n    metrics_path: /federate\n"+
			"    params: {'match[]': ['{__name__=~\"layerprobe_.+|node_uname_info\"}']}\n"+
			"    static_configs: [{targets: [%q]}]\n", cluster, strings.TrimPrefix(leaves[cluster].URL(), "http://"))
	}
	global := &fleetgen.Bed{Prometheus: prom, Promtool: promtool, Dir: filepath.Join(dir, "global"), Rules: rules, Interval: fleetInterval}
	if err := global.Start(ctx, fed.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(global.Stop)

	count := func(b *fleetgen.Bed, expr string) map[string]int {
		t.Helper()
		r, _, err := b.Query(ctx, expr, time.Time{}, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, s := range r {
			var v float64
			fmt.Sscan(s.Value[1].(string), &v)
			out[s.Metric["cluster"]] = int(v)
		}
		return out
	}
	want := fmt.Sprint(alive)
	kernelCount := `count by (cluster) (instance_engine_target:layerprobe_overhead_ratio:kernel{target="container", workload="fsync", metric="fsync_p99"})`
	driverCount := `sum by (cluster) (job_driver_target:layerprobe_overhead_ratio:count{target="container", workload="fsync", metric="fsync_p99", mode="steady"})`
	upCount := `count by (cluster) (instance:layerprobe_agent:up)`
	// The rules are in several groups, each evaluated on its own clock, and
	// a group may run before the last federation scrape: wait until every
	// group the subtests read has seen both clusters' hosts.
	testharness.Eventually(t, 3*time.Minute, 2*time.Second, "the global Prometheus has both clusters' hosts and their fleet rules", func() (bool, string) {
		for _, q := range []string{kernelCount, driverCount, upCount} {
			if got := count(global, q); fmt.Sprint(got) != want {
				return false, fmt.Sprintf("%s: %v, want %v", q, got, want)
			}
		}
		return true, ""
	})

	t.Run("leaves store no cluster label and send theirs", func(t *testing.T) {
		for cluster, b := range leaves {
			if got := count(b, `count(layerprobe_build_info{cluster!=""}) or vector(0)`); got[""] != 0 {
				t.Errorf("%s: %d series with a stored cluster label: external labels are not stored", cluster, got[""])
			}
			// A scrape that times out under the suite's load makes a
			// host's series stale for a moment: the count must reach the
			// cluster's hosts, under no cluster label, not hold at every
			// instant.
			testharness.Eventually(t, 2*time.Minute, 2*time.Second, cluster+": the leaf's own fleet rule counts its hosts", func() (bool, string) {
				got := count(b, kernelCount)
				if got[""] == alive[cluster] {
					return true, ""
				}
				// What the leaf scrapes, to tell a lost scrape from a
				// rule that drops hosts.
				up := count(b, `sum(up)`)
				headline := count(b, `count(count by (instance) (instance_engine_target:layerprobe_overhead_ratio:headline))`)
				return false, fmt.Sprintf("%v hosts, want %d under no cluster label (targets up %v, hosts in the headline %v)",
					got, alive[cluster], up, headline)
			})
			resp, err := http.Get(b.URL() + "/federate?" + url.Values{"match[]": {"job_driver_target:layerprobe_overhead_ratio:quantile"}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			other := "us"
			if cluster == "us" {
				other = "eu"
			}
			if !strings.Contains(string(body), `cluster="`+cluster+`"`) || strings.Contains(string(body), `cluster="`+other+`"`) {
				t.Errorf("%s: recorded series leave without their cluster label:\n%s", cluster, testharness.Tail(string(body), 5))
			}
		}
	})

	t.Run("the ruler keeps clusters apart", func(t *testing.T) {
		for what, q := range map[string]string{"engines per cluster in the driver distributions": driverCount, "agents up per cluster": upCount} {
			testharness.Eventually(t, 2*time.Minute, 2*time.Second, what, func() (bool, string) {
				got := count(global, q)
				return fmt.Sprint(got) == want, fmt.Sprintf("%v, want %v", got, want)
			})
		}
	})

	t.Run("dashboards' cluster variable", func(t *testing.T) {
		var values []string
		q := url.Values{"match[]": {"layerprobe_build_info"}}
		resp, err := http.Get(global.URL() + "/api/v1/label/cluster/values?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, c := range cfg.Clusters {
			if strings.Contains(string(body), `"`+c+`"`) {
				values = append(values, c)
			}
		}
		if !slices.Equal(values, cfg.Clusters) {
			t.Errorf("label_values(layerprobe_build_info, cluster): %s, want %v", body, cfg.Clusters)
		}
		for _, d := range loadDashboards(t) {
			for _, cluster := range cfg.Clusters {
				subs := map[string]string{"$__rate_interval": "20s", "$__range": "10m", "$__interval": "4s",
					"$cluster": cluster, "$job": ".+", "$instance": ".+", "$engine": ".+", "$target": "container",
					"$workload": ".+", "$mode": "steady"}
				for _, p := range d.dataPanels() {
					for _, tg := range p.Targets {
						expr := substitute(tg.Expr, subs)
						if strings.Contains(expr, "$") {
							continue // a host dashboard variable this test does not set
						}
						r, _, err := global.Query(ctx, expr, time.Time{}, time.Time{}, 0)
						if err != nil {
							t.Errorf("%s/%s/%s with cluster %s: %v", d.UID, p.Title, tg.RefID, cluster, err)
						}
						for _, s := range r {
							if c, ok := s.Metric["cluster"]; ok && c != cluster {
								t.Errorf("%s/%s/%s with cluster %s: a series of cluster %s", d.UID, p.Title, tg.RefID, cluster, c)
							}
						}
					}
				}
			}
		}
		agents := `count(count by (job, instance) (layerprobe_build_info{cluster=~"eu", job=~".+", instance=~".+"}))`
		if got := count(global, agents); got[""] != alive["eu"] {
			t.Errorf("agents reporting in cluster eu: %v, want %d", got, alive["eu"])
		}
	})
}
