package ops

import (
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// agentKind is one kind of agent a fleet can hold while the cold probe
// rolls out.
type agentKind string

const (
	// kindPreMode is an agent from before the mode label: steady results
	// without mode, no cold probe.
	kindPreMode agentKind = "premode"
	// kindSteady has the mode label and the cold probe switched off
	// (agent.cold_interval: 0).
	kindSteady agentKind = "steady"
	// kindCold publishes steady results identical to kindSteady's plus the
	// cold probe's results.
	kindCold agentKind = "cold"
)

var agentKinds = []agentKind{kindPreMode, kindSteady, kindCold}

// synthSample is one series of a synthetic agent; value is called at every
// scrape.
type synthSample struct {
	name   string
	typ    prometheus.ValueType
	labels prometheus.Labels
	value  func() float64
}

// synthAgent serves the series of docs/metrics.md with fixed, plausible
// values, the way an agent of its kind would after some cycles. Its cold
// cycle counters grow at every scrape (a cold cycle finished, one failed),
// so that a steady panel or alert that let cold counters in would see them
// move; every other value is constant.
type synthAgent struct {
	samples []synthSample
	scrapes atomic.Int64
}

func (a *synthAgent) Describe(chan<- *prometheus.Desc) {} // unchecked: the series are built at scrape time

func (a *synthAgent) Collect(ch chan<- prometheus.Metric) {
	a.scrapes.Add(1)
	for _, s := range a.samples {
		names := make([]string, 0, len(s.labels))
		for n := range s.labels {
			names = append(names, n)
		}
		sort.Strings(names)
		values := make([]string, len(names))
		for i, n := range names {
			values[i] = s.labels[n]
		}
		desc := prometheus.NewDesc(s.name, "Synthetic layerprobe series for the operators' kit tests.", names, nil)
		ch <- prometheus.MustNewConstMetric(desc, s.typ, s.value(), values...)
	}
}

func constant(v float64) func() float64 { return func() float64 { return v } }

// newSynthAgent builds the series of an agent of the given kind; now is
// the moment its last steady cycle is counted from.
func newSynthAgent(kind agentKind, now time.Time) *synthAgent {
	a := &synthAgent{}
	add := func(name string, v func() float64, kv ...string) {
		l := prometheus.Labels{}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		typ := prometheus.GaugeValue
		if strings.HasSuffix(name, "_total") {
			typ = prometheus.CounterValue
		}
		a.samples = append(a.samples, synthSample{name, typ, l, v})
	}
	// gauge adds a constant series (counters too, despite the name).
	gauge := func(name string, v float64, kv ...string) { add(name, constant(v), kv...) }
	// withMode labels a steady or cold result; an agent from before the
	// mode label has none.
	withMode := func(mode string, kv ...string) []string {
		if kind == kindPreMode {
			return kv
		}
		return append(kv, "mode", mode)
	}
	ed := []string{"engine", "default", "driver", "overlay2"}
	kvs := func(kv ...string) []string { return append(slices.Clone(ed), kv...) }

	gauge("layerprobe_host_arm_cgroup_joined", 1, "engine", "default")

	jobMetrics := map[string][]string{
		"seqwrite":  {"iops", "bandwidth", "latency_p50", "latency_p99"},
		"randwrite": {"iops", "bandwidth", "latency_p50", "latency_p99"},
		"fsync":     {"iops", "bandwidth", "latency_p50", "latency_p99", "fsync_p99"},
		// The helper's file operations: ops/s as iops, and their latency.
		"smallfiles": {"iops", "latency_p50", "latency_p99"},
	}
	// Steady overheads: container 30% slower, volume 10%, bind (the host
	// directory) 1%; every lower bound stays under LayerprobeFsyncOverheadHigh's
	// 0.5.
	for target, v := range map[string]float64{"container": 0.3, "volume": 0.1, "bind": 0.01} {
		for job, metrics := range jobMetrics {
			for _, m := range metrics {
				l := withMode("steady", kvs("target", target, "workload", job, "metric", m)...)
				gauge("layerprobe_overhead_ratio", v, l...)
				gauge("layerprobe_overhead_ci_low_ratio", v-0.05, l...)
				gauge("layerprobe_overhead_ci_high_ratio", v+0.05, l...)
			}
		}
		gauge("layerprobe_fsync_regression", 0, kvs("target", target)...)
	}
	// Raw figures: a speed factor per target and mode.
	raw := func(mode, target string, speed float64, jobs ...string) {
		for _, job := range jobs {
			ops := map[string][]string{"seqwrite": {"write"}, "randwrite": {"write"}, "fsync": {"read", "write"}, "smallfiles": {"write"}}[job]
			for _, op := range ops {
				l := withMode(mode, kvs("target", target, "workload", job, "op", op)...)
				gauge("layerprobe_iops", 1000*speed, l...)
				gauge("layerprobe_bandwidth_bytes_per_second", 4096000*speed, l...)
				for p, lat := range map[string]float64{"50": 0.0005, "99": 0.002, "99.9": 0.004} {
					gauge("layerprobe_latency_seconds", lat/speed, append(l, "percentile", p)...)
				}
			}
			if job == "fsync" {
				for p, lat := range map[string]float64{"50": 0.001, "99": 0.003, "99.9": 0.006} {
					gauge("layerprobe_latency_seconds", lat/speed, withMode(mode, kvs("target", target, "workload", job, "op", "sync", "percentile", p)...)...)
				}
			}
		}
	}
	for target, speed := range map[string]float64{"host": 1, "container": 0.77, "bind": 0.99, "volume": 0.9} {
		raw("steady", target, speed, "seqwrite", "randwrite", "fsync", "smallfiles")
		gauge("layerprobe_written_bytes_total", 1<<30, "engine", "default", "target", target)
	}
	for _, r := range []string{"ok", "failed", "skipped", "interrupted"} {
		gauge("layerprobe_cycles_total", map[string]float64{"ok": 12}[r], withMode("steady", "engine", "default", "result", r)...)
	}
	for _, r := range []string{"busy_io_pressure", "busy_disk", "container_churn", "budget_exhausted", "low_space", "host_locked"} {
		gauge("layerprobe_cycle_skips_total", 0, "engine", "default", "reason", r)
	}
	gauge("layerprobe_cycle_duration_seconds", 300, withMode("steady", "engine", "default")...)
	gauge("layerprobe_last_success_timestamp_seconds", float64(now.Add(-time.Hour).Unix()), withMode("steady", "engine", "default")...)
	gauge("layerprobe_daily_budget_bytes", 4<<30, "engine", "default")
	gauge("layerprobe_budget_used_bytes", 1<<30, "engine", "default")
	gauge("layerprobe_engine_info", 1, "engine", "default", "driver", "overlay2", "backing_fs", "extfs",
		"engine_version", "27.5.1", "data_root", "/var/lib/docker", "fio_version", "fio-3.33")
	gauge("layerprobe_build_info", 1, "version", "1.0.0", "revision", "synthetic", "goversion", "go1.26.8")
	// The layer-write advisor's last pass: one container writing into its
	// layer, the rest summed; no database in its layer, so
	// LayerprobeDatabaseInWritableLayer selects nobody.
	for _, c := range [][3]string{{"app", "registry.example.com/app:1", "67108864"}, {"_other", "_other", "1048576"}} {
		v, _ := strconv.ParseFloat(c[2], 64)
		gauge("layerprobe_container_layer_written_bytes", v, "engine", "default", "container", c[0], "image", c[1])
		if c[0] != "_other" { // a counter: no sum over changing members
			gauge("layerprobe_container_block_written_bytes_total", 2*v, "engine", "default", "container", c[0], "image", c[1])
		}
	}
	gauge("layerprobe_databases_in_layer", 0, "engine", "default")
	gauge("layerprobe_containers", 3, "engine", "default")
	gauge("layerprobe_advisor_pass_duration_seconds", 0.02, "engine", "default")
	gauge("layerprobe_advisor_pass_cpu_seconds", 0.01, "engine", "default")
	gauge("layerprobe_advisor_pass_read_bytes", 0, "engine", "default")
	gauge("layerprobe_advisor_last_pass_timestamp_seconds", float64(now.Add(-time.Hour).Unix()), "engine", "default")
	if kind != kindCold {
		return a
	}

	// The cold probe: fsync job on host and container only; the container
	// at least twice as slow as the host (lower bound 1.3), which must fire
	// LayerprobeColdFsyncOverheadHigh and nothing else.
	for _, m := range jobMetrics["fsync"] {
		l := kvs("target", "container", "workload", "fsync", "metric", m, "mode", "cold")
		gauge("layerprobe_overhead_ratio", 1.6, l...)
		gauge("layerprobe_overhead_ci_low_ratio", 1.3, l...)
		gauge("layerprobe_overhead_ci_high_ratio", 2.0, l...)
	}
	raw("cold", "host", 0.95, "fsync")
	raw("cold", "container", 0.35, "fsync")
	add("layerprobe_cycles_total", func() float64 { return float64(3 + a.scrapes.Load()) }, "engine", "default", "result", "ok", "mode", "cold")
	add("layerprobe_cycles_total", func() float64 { return float64(a.scrapes.Load()) }, "engine", "default", "result", "failed", "mode", "cold")
	gauge("layerprobe_cycles_total", 0, "engine", "default", "result", "skipped", "mode", "cold")
	gauge("layerprobe_cycles_total", 0, "engine", "default", "result", "interrupted", "mode", "cold")
	gauge("layerprobe_cycle_duration_seconds", 900, "engine", "default", "mode", "cold")
	// 20h ago: older than LayerprobeAgentStale's 15h, which must not care.
	gauge("layerprobe_last_success_timestamp_seconds", float64(now.Add(-20*time.Hour).Unix()), "engine", "default", "mode", "cold")
	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		gauge("layerprobe_copyup_latency_seconds", 0.002, kvs("target", "host", "size_bytes", strconv.Itoa(size))...)
		gauge("layerprobe_copyup_latency_seconds", 0.002+float64(size)*2e-9, kvs("target", "container", "size_bytes", strconv.Itoa(size))...)
	}
	gauge("layerprobe_copyup_cost_seconds_per_byte", 2e-9, ed...)
	// Start-up cost from the last cold cycle: overlay2 shares the image's
	// layers, so a larger image costs neither time nor bytes.
	for _, size := range []int{10 << 20, 100 << 20, 500 << 20} {
		gauge("layerprobe_startup_seconds", 0.35, kvs("image_bytes", strconv.Itoa(size))...)
		gauge("layerprobe_startup_device_written_bytes", 4<<20, kvs("image_bytes", strconv.Itoa(size))...)
	}
	gauge("layerprobe_startup_seconds_per_byte", 1e-12, ed...)
	gauge("layerprobe_startup_written_bytes_per_image_byte", 0.001, ed...)
	// Lookups in the cold image's tree: the walk's interval published,
	// the first create's withheld (no bounds).
	for _, l := range []struct {
		op                       string
		host, container, low, hi float64
	}{{"walk", 0.006, 0.020, 0.011, 0.017}, {"dir_create", 0.0002, 0.00025, math.NaN(), math.NaN()}} {
		gauge("layerprobe_lookup_seconds", l.host, kvs("lookup", l.op, "target", "host")...)
		gauge("layerprobe_lookup_seconds", l.container, kvs("lookup", l.op, "target", "container")...)
		gauge("layerprobe_lookup_extra_seconds", l.container-l.host, kvs("lookup", l.op)...)
		if !math.IsNaN(l.low) {
			gauge("layerprobe_lookup_extra_ci_low_seconds", l.low, kvs("lookup", l.op)...)
			gauge("layerprobe_lookup_extra_ci_high_seconds", l.hi, kvs("lookup", l.op)...)
		}
	}
	gauge("layerprobe_backing_fs_reflink", 0, "engine", "default", "backing_fs", "extfs")
	return a
}

// TestSyntheticAgentsInPrometheus: a real Prometheus with the shipped rules
// scrapes three synthetic agents, one of each kind a fleet holds while the
// cold probe rolls out (from before the mode label, steady only, steady and
// cold). Every dashboard query and rule is evaluated for each of them:
//
//   - queries that read cold results return data for the cold agent only;
//   - every other query returns data for all three, and the same figures:
//     cold results never change a steady panel, and agents from before the
//     mode label still show (except the few queries that count cycles of
//     both modes on purpose, which must count the cold ones);
//   - each alert's expression selects exactly the agents it should:
//     the cold alert the cold agent, the steady alerts none, although the
//     cold agent's cold figures would trip them.
func TestSyntheticAgentsInPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Prometheus")
	}
	queue.Parallel(t)
	now := time.Now()
	addrs := map[agentKind]string{}
	var targets []string
	for _, k := range agentKinds {
		reg := prometheus.NewRegistry()
		reg.MustRegister(newSynthAgent(k, now))
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		addrs[k] = strings.TrimPrefix(srv.URL, "http://")
		targets = append(targets, addrs[k])
	}
	kindOf := map[string]agentKind{}
	for k, a := range addrs {
		kindOf[a] = k
	}
	prom := startPrometheus(t, targets...)

	// rate() and increase() over $__rate_interval (20s here) need two
	// samples; the recording rules need a few evaluations.
	testharness.Eventually(t, time.Minute, time.Second, "four scrapes of every synthetic agent", func() (bool, string) {
		r := prom.query(t, `count_over_time(layerprobe_build_info{job="layerprobe"}[1m]) >= 4`)
		return len(r) == len(agentKinds), fmt.Sprint(r)
	})
	testharness.Eventually(t, 30*time.Second, time.Second, "recording rules evaluated", func() (bool, string) {
		r := prom.query(t, `engine:layerprobe_cycles:ok_ratio1d`)
		return len(r) == 1, fmt.Sprint(r)
	})
	at := time.Now()

	t.Run("dashboards", func(t *testing.T) { checkSyntheticDashboards(t, prom, addrs, at) })
	t.Run("variables", func(t *testing.T) { checkSyntheticVariables(t, prom, addrs) })
	t.Run("rules", func(t *testing.T) { checkSyntheticRules(t, prom, kindOf, at) })
}

// normalized is a query result without the labels that tell the agents
// apart (instance) or that only newer agents have (mode), keyed by the
// remaining labels.
func normalized(res []promSample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range res {
		var keys []string
		for k, v := range s.Metric {
			if k != "instance" && k != "mode" {
				keys = append(keys, k+"="+v)
			}
		}
		sort.Strings(keys)
		v := math.NaN()
		if len(s.Value) == 2 {
			if str, ok := s.Value[1].(string); ok {
				v, _ = strconv.ParseFloat(str, 64)
			}
		}
		out[strings.Join(keys, ",")] = v
	}
	return out
}

func sameFigures(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || math.Abs(va-vb) > 1e-9*math.Max(1, math.Abs(va)) {
			return false
		}
	}
	return true
}

func checkSyntheticDashboards(t *testing.T, prom *promServer, addrs map[agentKind]string, at time.Time) {
	queries, coldQueries := 0, 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.dataPanels() {
			for _, tg := range p.Targets {
				key := d.UID + "/" + p.Title + "/" + tg.RefID
				if allowedEmpty[key] != "" {
					continue
				}
				ps, err := scanPromQL(tg.Expr)
				if err != nil {
					t.Errorf("%s: %v", key, err)
					continue
				}
				queries++
				raw := map[agentKind][]promSample{}
				for _, k := range agentKinds {
					subs := grafanaSubstitutions(d.UID, addrs[k])
					subs["$instance"] = grafanaRegexValue(addrs[k])
					// Range panels too are evaluated at one instant: the
					// figures are compared, not their history.
					res, err := prom.tryQueryAt(t, substitute(tg.Expr, subs), at)
					if err != nil {
						t.Errorf("%s (%s agent): Prometheus refuses the query: %v", key, k, err)
					}
					raw[k] = res
				}
				if readsCold(ps) {
					coldQueries++
					if len(raw[kindCold]) == 0 {
						t.Errorf("%s: no data from the agent with cold results", key)
					}
					for _, k := range []agentKind{kindPreMode, kindSteady} {
						if len(raw[k]) != 0 {
							t.Errorf("%s: data from the %s agent, which has no cold results: %v", key, k, raw[k])
						}
					}
					continue
				}
				for _, k := range agentKinds {
					if len(raw[k]) == 0 {
						t.Errorf("%s: no data from the %s agent", key, k)
					}
				}
				pre, steady, cold := normalized(raw[kindPreMode]), normalized(raw[kindSteady]), normalized(raw[kindCold])
				if !sameFigures(pre, steady) || len(raw[kindPreMode]) != len(raw[kindSteady]) {
					t.Errorf("%s: the agent from before the mode label shows %v, the steady one %v", key, raw[kindPreMode], raw[kindSteady])
				}
				if sumsOverModes[key] != "" {
					// Cold cycles count here: the cold agent's count is larger.
					for k, v := range steady {
						if !(cold[k] > v) {
							t.Errorf("%s: the cold agent's %s = %v, want more than the steady agent's %v (%s)", key, k, cold[k], v, sumsOverModes[key])
						}
					}
					continue
				}
				if !sameFigures(steady, cold) || len(raw[kindSteady]) != len(raw[kindCold]) {
					t.Errorf("%s: cold results change a steady query: steady agent %v, agent with cold results %v", key, raw[kindSteady], raw[kindCold])
				}
			}
		}
	}
	if coldQueries < 10 || queries < 50 {
		t.Errorf("ran %d queries, %d of them on cold results: too few", queries, coldQueries)
	}
	t.Logf("compared %d dashboard queries (%d on cold results) across the three agents", queries, coldQueries)
}

// checkSyntheticVariables: the drop-downs that depend on the instance offer
// the same values whichever kind of agent is selected.
func checkSyntheticVariables(t *testing.T, prom *promServer, addrs map[agentKind]string) {
	for _, d := range loadDashboards(t) {
		for _, v := range d.Templating.List {
			m := labelValuesRe.FindStringSubmatch(v.queryString())
			if v.Type != "query" || m == nil || !strings.Contains(m[1], "$instance") {
				continue
			}
			got := map[agentKind][]string{}
			for _, k := range agentKinds {
				subs := grafanaSubstitutions(d.UID, addrs[k])
				subs["$instance"] = grafanaRegexValue(addrs[k])
				var values []string
				if err := prom.get(t, "/api/v1/label/"+m[2]+"/values", map[string][]string{"match[]": {substitute(m[1], subs)}}, &values); err != nil {
					t.Errorf("%s variable %s: %v", d.UID, v.Name, err)
				}
				slices.Sort(values)
				got[k] = values
			}
			if len(got[kindSteady]) == 0 || !slices.Equal(got[kindPreMode], got[kindSteady]) || !slices.Equal(got[kindSteady], got[kindCold]) {
				t.Errorf("%s variable %s: values %v", d.UID, v.Name, got)
			}
		}
	}
}

// syntheticFiring are the agents whose series each alert's expression must
// select (`for:` aside). The cold agent's cold figures are far above every
// steady threshold and its cold success is 20h old: a steady alert that let
// cold results in would select it.
var syntheticFiring = map[string][]agentKind{
	"LayerprobeFsyncRegression":         nil,
	"LayerprobeFsyncOverheadHigh":       nil,
	"LayerprobeColdFsyncOverheadHigh":   {kindCold},
	"LayerprobeAgentStale":              nil,
	"LayerprobeAgentNeverSucceeded":     nil, // also not for the agent from before the mode label
	"LayerprobeCyclesFailing":           {kindCold},
	"LayerprobeBudgetExhausted":         nil,
	"LayerprobeHostArmOutsideCPUCgroup": nil,
	"LayerprobeSlowStorageDriver":       nil,
	"LayerprobeDatabaseInWritableLayer": nil,
}

func checkSyntheticRules(t *testing.T, prom *promServer, kindOf map[string]agentKind, at time.Time) {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := prom.get(t, "/api/v1/rules", nil, &data); err != nil {
		t.Fatal(err)
	}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			// A recording rule that matched steady and cold series against
			// each other would fail here (many-to-many matching).
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		want, ok := syntheticFiring[r.Alert]
		if !ok {
			t.Errorf("alert %s: not in syntheticFiring", r.Alert)
			continue
		}
		res, err := prom.tryQueryAt(t, r.Expr, at)
		if err != nil {
			t.Errorf("alert %s: %v", r.Alert, err)
			continue
		}
		var got []agentKind
		for _, s := range res {
			got = append(got, kindOf[s.Metric["instance"]])
			mode, hasMode := s.Metric["mode"]
			switch {
			case r.Alert == "LayerprobeColdFsyncOverheadHigh" && mode != "cold":
				t.Errorf("alert %s selects %v, which is not a cold result", r.Alert, s.Metric)
			case r.Alert == "LayerprobeCyclesFailing" && hasMode:
				t.Errorf("alert %s keeps the mode label: %v", r.Alert, s.Metric)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("alert %s: expression selects the agents %v, want %v: %v", r.Alert, got, want, res)
		}
	}
	// The raw ratios keep steady and cold apart on the agent that has both.
	res := prom.query(t, `target:layerprobe_latency_seconds:ratio_to_host{workload="fsync", op="sync", percentile="99", target="container"}`)
	modes := map[agentKind][]string{}
	for _, s := range res {
		k := kindOf[s.Metric["instance"]]
		modes[k] = append(modes[k], s.Metric["mode"])
	}
	for k, want := range map[agentKind][]string{kindPreMode: {""}, kindSteady: {"steady"}, kindCold: {"cold", "steady"}} {
		slices.Sort(modes[k])
		if !slices.Equal(modes[k], want) {
			t.Errorf("fsync p99 ratio to host of the %s agent: modes %q, want %q", k, modes[k], want)
		}
	}
	// The share of ok cycles counts both modes, in one series per engine.
	if res := prom.query(t, `engine:layerprobe_cycles:ok_ratio1d`); len(res) != 1 || kindOf[res[0].Metric["instance"]] != kindCold || res[0].Metric["mode"] != "" {
		t.Errorf("engine:layerprobe_cycles:ok_ratio1d = %v, want one series, for the agent whose (cold) cycles moved, without mode", res)
	}
}
