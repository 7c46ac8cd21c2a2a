package ops

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
)

// fleetRecording is one engine of a real agent's /metrics (three private
// overlay2 engines, 50 containers, after a steady and a cold cycle each),
// recorded with LAYERPROBE_RECORD_SCRAPE by TestSeriesBudget.
const fleetRecording = "testdata/agent-scrape.prom"

// TestFleetInPrometheus: a day of history of 50 agents, made from a real
// agent's recorded output (internal/testsupport/fleetgen: hosts on six driver/file
// system pairs and five kernels, 85% with node_exporter, some joining,
// leaving or restarting, a few with an fsync regression), backfilled into
// a real Prometheus with promtool together with the shipped recording
// rules. The fleet rules' joins and aggregations must give what the
// generated fleet says, at the last sample: the kernel of every host (or
// "unknown"), the spread per driver and per kernel, the regressions of the
// last day, the agents that stopped reporting, the databases in layers;
// and every fleet dashboard query answers, the fleet's exceptions with
// data.
//
// Samples every 5 minutes (Prometheus' lookback; the figures change once
// per 6h cycle, so a finer grid changes no answer here) over 26 hours: the
// day-over-day change needs a day and a bit. The rules are backfilled for
// the fleet group only, which the fleet rows read. About 45s.
func TestFleetInPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: backfills a real Prometheus")
	}
	promtool, prom := tool(t, "promtool"), tool(t, "prometheus")
	queue.Parallel(t)
	ctx := t.Context()
	started := time.Now()

	f, err := os.Open(repoPath("test/ops/" + fleetRecording))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fleetgen.ParseRecording(f, "e0")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	step := 5 * time.Minute
	end := time.Now().Truncate(step)
	cfg := fleetgen.Config{Hosts: 50, Start: end.Add(-26 * time.Hour), End: end, Step: step,
		Cycle: 6 * time.Hour, Seed: 47, Clusters: []string{"eu", "us"}}
	hosts := fleetgen.Fleet(cfg)
	at := end.Add(-step) // the last sample

	dir := t.TempDir()
	om := filepath.Join(dir, "fleet.om")
	out, err := os.Create(om)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := fleetgen.WriteOpenMetrics(out, rec, hosts, cfg)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	bed := &fleetgen.Bed{Prometheus: prom, Promtool: promtool, Dir: dir, Rules: repoPath(rulesFile)}
	generated := time.Now()
	if err := bed.BackfillOpenMetrics(ctx, om, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	os.Remove(om)
	backfilled := time.Now()
	if err := bed.Start(ctx, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Stop)
	// The fleet groups only: the dashboard's fleet rows read nothing else.
	if err := bed.BackfillRules(ctx, cfg.Start, end, "", fleetgen.DashboardRuleGroups...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples of %d recorded series for %d hosts: generated in %s, backfilled in %s, rules backfilled in %s",
		samples, len(rec.Series), len(hosts), generated.Sub(started).Round(time.Second),
		backfilled.Sub(generated).Round(time.Second), time.Since(backfilled).Round(time.Second))

	query := func(expr string) []fleetgen.Sample {
		t.Helper()
		r, _, err := bed.Query(ctx, expr, time.Time{}, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	value := func(s fleetgen.Sample) float64 {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		return v
	}
	// expected runs the generator: the value of the recorded series named
	// name with labels matching want, per alive host at time ts.
	expected := func(ts time.Time, name string, want map[string]string) map[int]float64 {
		out := map[int]float64{}
		for i, s := range rec.Series {
			if s.Name != name || !matches(s.Labels, want) {
				continue
			}
			for _, h := range hosts {
				if v, ok := h.Value(rec, i, ts, cfg); ok && h.Alive(ts) {
					out[h.Index] = v
				}
			}
		}
		return out
	}
	fsyncC := map[string]string{"target": "container", "workload": "fsync", "metric": "fsync_p99", "mode": "steady"}

	t.Run("kernel joined per host", func(t *testing.T) {
		want := expected(at, "layerprobe_overhead_ratio", fsyncC)
		got := query(`instance_engine_target:layerprobe_overhead_ratio:kernel{target="container", workload="fsync", metric="fsync_p99"}`)
		if len(got) != len(want) || len(want) < 40 {
			t.Fatalf("%d hosts with a kernel-joined fsync overhead, want %d", len(got), len(want))
		}
		unknown := 0
		for _, s := range got {
			h := hosts[hostIndex(t, s.Metric["instance"])]
			wantKernel := h.Kernel
			if !h.NodeExporter {
				wantKernel = "unknown"
				unknown++
			}
			if s.Metric["release"] != wantKernel || s.Metric["driver"] != h.Driver || s.Metric["cluster"] != h.Cluster {
				t.Errorf("%s: release %q driver %q cluster %q, want %q %q %q", h.Instance, s.Metric["release"], s.Metric["driver"], s.Metric["cluster"], wantKernel, h.Driver, h.Cluster)
			}
			if math.Abs(value(s)-want[h.Index]) > 1e-9 {
				t.Errorf("%s: overhead %v, want %v", h.Instance, value(s), want[h.Index])
			}
		}
		if unknown == 0 {
			t.Error("every host has node_exporter: the unknown kernel is not exercised")
		}
		panel := query(`count(count by (job, instance) (instance_engine_target:layerprobe_overhead_ratio:kernel{release="unknown"})) or vector(0)`)
		if len(panel) != 1 || int(value(panel[0])) != unknown {
			t.Errorf("hosts without a known kernel: %v, want %d", panel, unknown)
		}
	})

	t.Run("distributions per driver and kernel", func(t *testing.T) {
		want := expected(at, "layerprobe_overhead_ratio", fsyncC)
		byDriver, byKernel := map[string][]float64{}, map[string][]float64{}
		for i, v := range want {
			h := hosts[i]
			byDriver[h.Cluster+"/"+h.Driver] = append(byDriver[h.Cluster+"/"+h.Driver], v)
			k := h.Kernel
			if !h.NodeExporter {
				k = "unknown"
			}
			byKernel[h.Cluster+"/"+k+"/"+h.Driver] = append(byKernel[h.Cluster+"/"+k+"/"+h.Driver], v)
		}
		for _, q := range []float64{0.5, 0.9} {
			got := query(fmt.Sprintf(`job_driver_target:layerprobe_overhead_ratio:quantile{quantile="%g", target="container", workload="fsync", metric="fsync_p99", mode="steady"}`, q))
			if len(got) != len(byDriver) {
				t.Errorf("quantile %g: %d cluster/driver groups, want %d", q, len(got), len(byDriver))
			}
			for _, s := range got {
				vs := byDriver[s.Metric["cluster"]+"/"+s.Metric["driver"]]
				if w := quantile(q, vs); math.Abs(value(s)-w) > 1e-9 {
					t.Errorf("quantile %g of %s/%s: %v, want %v over %v", q, s.Metric["cluster"], s.Metric["driver"], value(s), w, vs)
				}
			}
			got = query(fmt.Sprintf(`job_release_driver_target:layerprobe_overhead_ratio:quantile{quantile="%g", target="container", workload="fsync", metric="fsync_p99"}`, q))
			if len(got) != len(byKernel) {
				t.Errorf("quantile %g: %d cluster/kernel/driver groups, want %d", q, len(got), len(byKernel))
			}
			for _, s := range got {
				vs := byKernel[s.Metric["cluster"]+"/"+s.Metric["release"]+"/"+s.Metric["driver"]]
				if w := quantile(q, vs); math.Abs(value(s)-w) > 1e-9 {
					t.Errorf("quantile %g of kernel %s: %v, want %v", q, s.Metric["release"], value(s), w)
				}
			}
		}
	})

	t.Run("regressions of the last day", func(t *testing.T) {
		// Hosts flagged at a sample in the day before the last one.
		want := map[string]bool{}
		for ts := at.Add(-24 * time.Hour).Add(step); !ts.After(at); ts = ts.Add(step) {
			for i, v := range expected(ts, "layerprobe_fsync_regression", map[string]string{"target": "container"}) {
				if v == 1 {
					want[hosts[i].Instance] = true
				}
			}
		}
		got := map[string]bool{}
		for _, s := range query(`instance_engine_target:layerprobe_fsync_regression:max1d`) {
			got[s.Metric["instance"]] = true
		}
		if len(want) == 0 {
			t.Fatal("no regression flagged in the generated day: the case is not exercised")
		}
		if !mapsEqual(got, want) {
			t.Errorf("regressed in the last day: %v, want %v", keys(got), keys(want))
		}
		// The day-over-day change shows a regression that started within
		// the day: 0.6 more overhead.
		for _, h := range hosts {
			if h.RegressionAt.IsZero() || !h.Alive(at) || !h.RegressionAt.After(at.Add(-24*time.Hour)) || !h.Alive(at.Add(-24*time.Hour)) {
				continue
			}
			r := query(fmt.Sprintf(`instance_engine_target:layerprobe_fsync_overhead:delta1d{instance=%q, target="container"}`, h.Instance))
			if len(r) != 1 || value(r[0]) < 0.5 {
				t.Errorf("%s regressed at %s: day-over-day change %v, want about +0.6", h.Instance, h.RegressionAt.Format(time.RFC3339), r)
			}
		}
	})

	t.Run("agents that stopped reporting", func(t *testing.T) {
		got := map[string]bool{}
		for _, s := range query(`instance:layerprobe_agent:stopped_reporting`) {
			got[s.Metric["instance"]] = true
		}
		left := 0
		for _, h := range hosts {
			gone := !h.Alive(at)
			clear := h.Leave.After(at.Add(-24*time.Hour).Add(15*time.Minute)) && h.Leave.Before(at.Add(-15*time.Minute))
			switch {
			case !gone && got[h.Instance]:
				t.Errorf("%s reports, but is listed as stopped", h.Instance)
			case gone && clear && !got[h.Instance]:
				t.Errorf("%s left at %s, but is not listed as stopped", h.Instance, h.Leave.Format(time.RFC3339))
			}
			if gone && clear {
				left++
			}
		}
		if left == 0 {
			t.Error("no host left within the day: the case is not exercised")
		}
	})

	t.Run("databases in layers", func(t *testing.T) {
		want := map[string]float64{}
		for i, s := range rec.Series {
			if s.Name != "layerprobe_container_database_in_layer" {
				continue
			}
			for _, h := range hosts {
				if _, ok := h.Value(rec, i, at, cfg); ok && h.Alive(at) {
					want[s.Labels["database"]]++
				}
			}
		}
		got := map[string]float64{}
		for _, s := range query(`sum by (database) (job_database:layerprobe_container_database_in_layer:count)`) {
			got[s.Metric["database"]] = value(s)
		}
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("databases in layers per kind: %v, want %v", got, want)
		}
	})

	t.Run("fleet dashboard queries", func(t *testing.T) {
		checkFleetDashboard(t, bed, at)
	})
}

// checkFleetDashboard runs every query of the fleet dashboard (variables
// at "All", the default target) at the last sample: none fails, and all
// but the firing alerts' (no alert was evaluated over the history) have
// data, the fleet's exceptions included.
func checkFleetDashboard(t *testing.T, bed *fleetgen.Bed, at time.Time) {
	qs := fleetDashboardQueries(t)
	for _, q := range qs {
		var r []fleetgen.Sample
		var err error
		if q.instant {
			r, _, err = bed.Query(t.Context(), q.expr, time.Time{}, at, 0)
		} else {
			r, _, err = bed.Query(t.Context(), q.expr, at.Add(-fleetQueryRange), at, fleetQueryStep)
		}
		switch {
		case err != nil:
			t.Errorf("%s: %v", q.key, err)
		case len(r) == 0 && !strings.Contains(q.expr, "ALERTS"):
			t.Errorf("%s: no data for %q", q.key, q.expr)
		}
	}
}

// fleetQueryRange and fleetQueryStep are the range and step of the fleet
// dashboard's range queries in the fleet tests: a day, as the dashboard
// opens.
const (
	fleetQueryRange = 24 * time.Hour
	fleetQueryStep  = 10 * time.Minute
)

// fleetQuery is one query of the fleet dashboard, its variables expanded.
type fleetQuery struct {
	key, expr string // key: panel title/refId
	instant   bool
}

// fleetDashboardQueries are the queries of the fleet dashboard's panels,
// with the variables at "All" and the default target.
func fleetDashboardQueries(t testing.TB) []fleetQuery {
	t.Helper()
	subs := map[string]string{"$__rate_interval": "20m", "$__range": "1d", "$__interval": "5m",
		"$cluster": ".*", "$job": ".+", "$instance": ".+", "$engine": ".+", "$target": "container"}
	var out []fleetQuery
	for _, d := range loadDashboards(t) {
		if d.UID != "layerprobe-fleet" {
			continue
		}
		for _, p := range d.dataPanels() {
			for _, tg := range p.Targets {
				out = append(out, fleetQuery{key: p.Title + "/" + tg.RefID, expr: substitute(tg.Expr, subs), instant: tg.Instant})
			}
		}
	}
	if len(out) < 40 {
		t.Errorf("the fleet dashboard has %d queries", len(out))
	}
	return out
}

var instanceIndex = regexp.MustCompile(`^host-(\d+):9811$`)

func hostIndex(t *testing.T, instance string) int {
	t.Helper()
	m := instanceIndex.FindStringSubmatch(instance)
	if m == nil {
		t.Fatalf("instance %q is not a generated host", instance)
	}
	i, _ := strconv.Atoi(m[1])
	return i
}

func matches(l, want map[string]string) bool {
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}

// quantile is PromQL's quantile(): linear between the closest ranks.
func quantile(q float64, vs []float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	rank := q * float64(len(s)-1)
	lo := math.Max(0, math.Floor(rank))
	hi := math.Min(float64(len(s)-1), lo+1)
	w := rank - lo
	return s[int(lo)]*(1-w) + s[int(hi)]*w
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
