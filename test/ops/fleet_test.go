package ops

import (
	"fmt"
	"maps"
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

// loadFleetRecording reads fleetRecording, one engine ("e0") of a real
// agent's scrape, which the fleet tests make their agents of.
func loadFleetRecording(t testing.TB) *fleetgen.Recording {
	t.Helper()
	f, err := os.Open(repoPath("test/ops/" + fleetRecording))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := fleetgen.ParseRecording(f, "e0")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

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

	rec := loadFleetRecording(t)
	step := 5 * time.Minute
	// The bed's clock is pinned to half past an hour. The agents that join
	// at its start end their cycles on the same minute, and with the wall
	// clock's minute that minute could fall within a step of an hourly
	// record, which leaves checkHourlyPanels no agent to compare.
	end := time.Now().Truncate(time.Hour).Add(-30 * time.Minute)
	cfg := fleetgen.Config{Hosts: 50, Start: end.Add(-26 * time.Hour), End: end, Step: step,
		Cycle: 6 * time.Hour, Seed: 47, Clusters: []string{"eu", "us"}}
	hosts := fleetgen.Fleet(cfg)
	at := end.Add(-step) // the last sample

	dir := memDir(t)
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

	t.Run("panels over hourly records equal the raw counters", func(t *testing.T) {
		checkHourlyPanels(t, bed, hosts, cfg, at)
	})

	t.Run("the fleet's hourly records sum the engines' hours", func(t *testing.T) {
		checkFleetHourlyRecords(t, bed, at)
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
			r, _, err = bed.Query(t.Context(), q.expr, at.Add(-fleetQueryRange), at, q.step)
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
	step      time.Duration // a range query's step: fleetQueryStep, or the panel's min step
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
				s, step := grafanaMinStep(t, subs, fleetQueryStep, tg.Interval)
				out = append(out, fleetQuery{key: p.Title + "/" + tg.RefID, expr: substitute(tg.Expr, s), instant: tg.Instant, step: step})
			}
		}
	}
	if len(out) < 40 {
		t.Errorf("the fleet dashboard has %d queries", len(out))
	}
	return out
}

// hourlyRecords are the hourly records of counters that fleet panels count
// over their range, and the counter each sums.
var hourlyRecords = map[string]string{
	"engine:layerprobe_written_bytes_total:sum":      "layerprobe_written_bytes_total",
	"engine_reason:layerprobe_cycle_skips_total:sum": "layerprobe_cycle_skips_total",
	"engine:layerprobe_cycle_skips_total:sum":        "layerprobe_cycle_skips_total",
	"engine_result:layerprobe_cycles_total:sum":      "layerprobe_cycles_total",
}

// checkHourlyPanels: every fleet panel query that reads an hourly record
// of a counter answers, at the records' last evaluation over a day, what
// the same query over the raw counter answers, series by series, within
// the raw query's own extrapolation (its first and last samples are up to
// a step inside the range, and increase() stretches what they span to
// it; the records fall on the range's ends). The agents compared are
// those that reported all along the day and the hour before it (restarts
// included: the counters start again from 0 and the sums with them), but
// for two cases the records are known to differ from the raw samples in:
// a counter that moved within a step of the range's ends (counted in
// full by the one and by a share of it by the other), and a cycle that
// ended between the last hourly record before a restart and the restart
// (not in the records).
func checkHourlyPanels(t *testing.T, bed *fleetgen.Bed, hosts []fleetgen.Host, cfg fleetgen.Config, at time.Time) {
	r, _, err := bed.Query(t.Context(), `engine:layerprobe_written_bytes_total:sum[2h]`, time.Time{}, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for _, s := range r {
		for _, v := range s.Values {
			last = max(last, v[0].(float64))
		}
	}
	if last == 0 {
		t.Fatalf("no hourly record in the last 2h before %s", at.Format(time.RFC3339))
	}
	ts := time.UnixMilli(int64(math.Round(last * 1000)))
	// moves are the times a host's counters move: its cycles' ends and
	// its restart.
	moves := func(h fleetgen.Host) []time.Time {
		var out []time.Time
		for _, since := range []time.Time{h.Join, h.Restart} {
			if since.IsZero() {
				continue
			}
			for e := since.Add(time.Minute); !e.After(ts); e = e.Add(cfg.Cycle) {
				if since == h.Join && !h.Restart.IsZero() && !e.Before(h.Restart) {
					break
				}
				out = append(out, e)
			}
		}
		if !h.Restart.IsZero() {
			out = append(out, h.Restart)
		}
		return out
	}
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() <= cfg.Step }
	var steady []string
	restarted := 0
	for _, h := range hosts {
		if !h.Alive(ts.Add(-25*time.Hour)) || !h.Alive(ts) {
			continue
		}
		ok := true
		for _, m := range moves(h) {
			for _, edge := range []time.Time{ts, ts.Add(-24 * time.Hour), ts.Add(-4 * time.Hour)} {
				ok = ok && !near(m, edge)
			}
			// The hourly record before the restart, and the restart.
			if !h.Restart.IsZero() && m.Before(h.Restart) {
				before := ts.Add(-ts.Sub(h.Restart).Truncate(time.Hour) - time.Hour)
				ok = ok && !m.After(before)
			}
		}
		if !ok {
			continue
		}
		steady = append(steady, regexp.QuoteMeta(h.Instance))
		if h.Restart.After(ts.Add(-24*time.Hour)) && !h.Restart.After(ts) {
			restarted++
		}
	}
	t.Logf("hourly records compared at %s: %d agents, %d of them restarted in the day", ts.Format(time.RFC3339), len(steady), restarted)
	if len(steady) < 20 || restarted == 0 {
		t.Fatalf("%d agents compared, %d of them restarted in the day: the comparison is not exercised", len(steady), restarted)
	}
	subs := map[string]string{"$__range": "1d", "$cluster": ".*", "$job": ".+",
		"$instance": strings.ReplaceAll(strings.Join(steady, "|"), `\`, `\\`), "$engine": ".+", "$target": "container"}
	value := func(s fleetgen.Sample) float64 {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		return v
	}
	answer := func(expr string) map[string]float64 {
		t.Helper()
		r, _, err := bed.Query(t.Context(), expr, time.Time{}, ts, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, s := range r {
			out[fmt.Sprint(s.Metric)] = value(s)
		}
		return out
	}
	n := 0
	for _, d := range loadDashboards(t) {
		if d.UID != "layerprobe-fleet" {
			continue
		}
		for _, p := range d.dataPanels() {
			for _, tg := range p.Targets {
				raw := tg.Expr
				for rec, counter := range hourlyRecords {
					raw = strings.ReplaceAll(raw, rec, counter)
				}
				if raw == tg.Expr {
					continue
				}
				n++
				s, _ := grafanaMinStep(t, subs, 10*time.Minute, tg.Interval)
				key := p.Title + "/" + tg.RefID
				got, want := answer(substitute(tg.Expr, s)), answer(substitute(raw, s))
				// The range the query reads, and the raw query's
				// stretch of it.
				window := 24 * time.Hour
				if strings.Contains(tg.Expr, "$__rate_interval") {
					window, _ = time.ParseDuration(strings.TrimSuffix(s["$__rate_interval"], "s") + "s")
				}
				stretch := float64(window) / float64(window-2*cfg.Step)
				nonzero := false
				for k, w := range want {
					g, ok := got[k]
					if !ok || g*(1-1e-9) > w || w > g*stretch*(1+1e-9) {
						t.Errorf("%s: %s is %v (present %v) from the hourly record, %v from the raw counter (at most %.4f times as much)", key, k, g, ok, w, stretch)
					}
					nonzero = nonzero || w > 0
				}
				if len(got) != len(want) || !nonzero {
					t.Errorf("%s: %d series from the hourly record, %d from the raw counter, some nonzero: %v", key, len(got), len(want), nonzero)
				}
			}
		}
	}
	if n != 4 {
		t.Errorf("%d fleet panel queries read an hourly counter record, want 4", n)
	}
}

// fleetHourlyRecords are the fleet's hourly records, each with the hourly
// record of a counter per engine it reads, the labels it keeps and how it
// aggregates the engines' hours.
var fleetHourlyRecords = []struct {
	record, engineRecord string
	by                   []string
	max                  bool
	// resets: a restart within the day resets the counter (bytes are
	// written every cycle; a restarted agent may have skipped nothing).
	resets bool
}{
	{"job_engine_reason:layerprobe_cycle_skips:increase1h", "engine_reason:layerprobe_cycle_skips_total:sum", []string{"cluster", "job", "engine", "reason"}, false, false},
	{"job_engine:layerprobe_written_bytes:sum_increase1h", "engine:layerprobe_written_bytes_total:sum", []string{"cluster", "job", "engine"}, false, true},
	{"job_engine:layerprobe_written_bytes:max_increase1h", "engine:layerprobe_written_bytes_total:sum", []string{"cluster", "job", "engine"}, true, false},
}

// checkFleetHourlyRecords: each sample of the fleet's hourly records in the
// day to at is what the engines' hourly records say for its hour: per
// engine, the difference of the last record in the hour before the
// sample and the last in the hour before that, the last itself where
// the counter fell (a reset), nothing without an earlier one; summed over
// the engines (or their most). And the skips panel, which sums the fleet
// record over its range, answers the sum of its samples. The engines'
// records were checked against the raw counters above, so the fleet's
// panels count what the agents counted, but for an engine's first hour.
func checkFleetHourlyRecords(t *testing.T, bed *fleetgen.Bed, at time.Time) {
	type point struct {
		t time.Time
		v float64
	}
	type series struct {
		labels map[string]string
		points []point
	}
	matrix := func(expr string) []series {
		t.Helper()
		r, _, err := bed.Query(t.Context(), expr, time.Time{}, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]series, 0, len(r))
		for _, s := range r {
			var ps []point
			for _, v := range s.Values {
				f, _ := strconv.ParseFloat(v[1].(string), 64)
				ps = append(ps, point{time.UnixMilli(int64(math.Round(v[0].(float64) * 1000))), f})
			}
			out = append(out, series{s.Metric, ps})
		}
		return out
	}
	key := func(labels map[string]string, by []string) string {
		var parts []string
		for _, l := range by {
			parts = append(parts, l+"="+labels[l])
		}
		return strings.Join(parts, ",")
	}
	// last is the last point in (from, to], or [from, to] with closed
	// ranges (Prometheus 2; 3 leaves the start out).
	last := func(ps []point, from, to time.Time, closed bool) (float64, bool) {
		v, ok := 0.0, false
		for _, p := range ps {
			if (p.t.After(from) || closed && p.t.Equal(from)) && !p.t.After(to) {
				v, ok = p.v, true
			}
		}
		return v, ok
	}
	for _, fr := range fleetHourlyRecords {
		engines := matrix(fr.engineRecord + "[27h]")
		fleet := matrix(fr.record + "[24h]")
		if len(engines) == 0 || len(fleet) == 0 {
			t.Fatalf("%s: %d series; %s: %d series", fr.engineRecord, len(engines), fr.record, len(fleet))
		}
		// The engines' records per fleet series they add to.
		byKey := map[string][][]point{}
		for _, e := range engines {
			k := key(e.labels, fr.by)
			byKey[k] = append(byKey[k], e.points)
		}
		// want is the record's sample at e from the engines' records.
		want := func(k string, e time.Time, closed bool) (float64, bool, int) {
			agg, any, resets := 0.0, false, 0
			for _, ps := range byKey[k] {
				cur, ok1 := last(ps, e.Add(-time.Hour), e, closed)
				prev, ok2 := last(ps, e.Add(-2*time.Hour), e.Add(-time.Hour), closed)
				if !ok1 || !ok2 {
					continue
				}
				d := cur - prev
				if d < 0 {
					d, resets = cur, resets+1
				}
				switch {
				case !any:
					agg = d
				case fr.max:
					agg = max(agg, d)
				default:
					agg += d
				}
				any = true
			}
			return agg, any, resets
		}
		samples, nonzero, resets := 0, 0, 0
		for _, f := range fleet {
			k := key(f.labels, fr.by)
			for _, p := range f.points {
				samples++
				ok := false
				var tried []float64
				for _, closed := range []bool{false, true} {
					w, found, r := want(k, p.t, closed)
					tried = append(tried, w)
					if found && math.Abs(p.v-w) <= 1e-9*max(1, math.Abs(w)) {
						ok = true
						resets += r
						break
					}
				}
				if !ok {
					t.Errorf("%s{%s} at %s: %v, from the engines' hourly records %v", fr.record, k, p.t.Format(time.RFC3339), p.v, tried)
				}
				if p.v > 0 {
					nonzero++
				}
			}
		}
		t.Logf("%s: %d samples in the day, %d of them nonzero, %d engine hours after a reset", fr.record, samples, nonzero, resets)
		if nonzero == 0 || (fr.resets && resets == 0) {
			t.Errorf("%s: %d nonzero samples, %d resets: the comparison is not exercised", fr.record, nonzero, resets)
		}
	}

	// The skips panel sums the fleet record over its range.
	var expr string
	for _, d := range loadDashboards(t) {
		for _, p := range d.dataPanels() {
			if d.UID == "layerprobe-fleet" && p.Title == "Skipped cycles by reason" {
				expr = p.Targets[0].Expr
			}
		}
	}
	if !strings.Contains(expr, fleetHourlyRecords[0].record) {
		t.Fatalf("the skips panel's query %q does not read %s", expr, fleetHourlyRecords[0].record)
	}
	subs := map[string]string{"$__range": "1d", "$cluster": ".*", "$job": ".+", "$instance": ".+", "$engine": ".+"}
	r, _, err := bed.Query(t.Context(), substitute(expr, subs), time.Time{}, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, f := range matrix(fleetHourlyRecords[0].record + "[1d]") {
		for _, p := range f.points {
			sums[key(f.labels, []string{"reason"})] += p.v
		}
	}
	got := map[string]float64{}
	for _, s := range r {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		got["reason="+s.Metric["reason"]] = v
	}
	if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(sums) {
		t.Errorf("skips panel: %v, the fleet record's samples in the day sum to %v", got, sums)
	}
}

// grafanaMinStep is what Grafana makes of a query's min step (its
// interval, "" for none): the step at least that, $__interval the step,
// and the min step taken as the scrape interval, so that $__rate_interval
// is the step plus it, at least four of it.
func grafanaMinStep(t testing.TB, subs map[string]string, step time.Duration, minStep string) (map[string]string, time.Duration) {
	t.Helper()
	if minStep == "" {
		return subs, step
	}
	m, err := time.ParseDuration(minStep)
	if err != nil {
		t.Fatalf("min step %q: %v", minStep, err)
	}
	out := maps.Clone(subs)
	step = max(step, m)
	out["$__interval"] = fmt.Sprintf("%ds", int(step.Seconds()))
	out["$__rate_interval"] = fmt.Sprintf("%ds", int(max(step+m, 4*m).Seconds()))
	return out, step
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
