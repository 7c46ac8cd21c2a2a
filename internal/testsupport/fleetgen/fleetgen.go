// Package fleetgen makes the metric history of a fleet of layerprobe
// agents from one agent's recorded /metrics output: every host exposes the
// recorded series (one engine's, renamed "default"), with values varied
// per host, storage driver and kernel, changing once per agent cycle, and
// with the events a fleet has: a few fsync regressions, hosts joining late,
// leaving, and restarting (counters start again). It writes OpenMetrics
// for `promtool tsdb create-blocks-from openmetrics` and serves a host's
// current values for a live scrape.
//
// It exists for the fleet tests (test/ops) and the fleet benchmark
// (bench/); nothing in the agent uses it.
package fleetgen

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series is one recorded series: its name, labels (without the name) and
// recorded value.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Recording is the layerprobe series of one engine of a real agent, and
// the agent-wide layerprobe_build_info.
type Recording struct {
	Series []Series
}

// ParseRecording reads a /metrics scrape (text format) and keeps the
// layerprobe_* series of engine (renamed "default") and the agent-wide
// layerprobe_build_info; the Go, process and promhttp series are left out
// (no dashboard or rule reads them).
func ParseRecording(r io.Reader, engine string) (*Recording, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	rec := &Recording{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "layerprobe_") {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if e, ok := l["engine"]; ok {
				if e != engine {
					continue
				}
				l["engine"] = "default"
			} else if name != "layerprobe_build_info" {
				continue
			}
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				return nil, fmt.Errorf("recording: %s: only gauges and counters are expected", name)
			}
			rec.Series = append(rec.Series, Series{Name: name, Labels: l, Value: v})
		}
	}
	if len(rec.Series) == 0 {
		return nil, fmt.Errorf("recording: no layerprobe series of engine %q", engine)
	}
	sort.SliceStable(rec.Series, func(i, j int) bool {
		if rec.Series[i].Name != rec.Series[j].Name {
			return rec.Series[i].Name < rec.Series[j].Name
		}
		return labelString(rec.Series[i].Labels) < labelString(rec.Series[j].Labels)
	})
	return rec, nil
}

// Config is the fleet and the period its history covers.
type Config struct {
	Hosts      int
	Start, End time.Time
	// Step is the sample interval (the scrape interval of the history).
	Step time.Duration
	// Cycle is the agents' agent.interval: their figures change once a cycle.
	Cycle time.Duration
	Seed  uint64
	// Clusters are the values of the cluster label, given round-robin;
	// none: no cluster label.
	Clusters []string
}

// Host is one agent of the fleet and what happens to it.
type Host struct {
	Index              int
	Instance, Cluster  string
	Driver, BackingFS  string
	Kernel             string
	NodeExporter       bool
	Join, Leave        time.Time // alive in [Join, Leave)
	Restart            time.Time // zero: never restarted
	RegressionAt       time.Time // zero: no regression
	Databases          int       // top containers with a database in their layer
	phase              time.Duration
	speed, factor, mul float64
}

// drivers: the storage driver mix of the fleet, with the factor their
// container-layer overheads get against the recording (overlay2).
var drivers = []struct {
	name, fs string
	share    float64
	mul      float64
}{
	{"overlay2", "extfs", 0.55, 1},
	{"overlay2", "xfs", 0.20, 0.9},
	{"btrfs", "btrfs", 0.08, 1.6},
	{"zfs", "zfs", 0.05, 1.3},
	{"fuse-overlayfs", "extfs", 0.07, 2.5},
	{"vfs", "extfs", 0.05, 0.8},
}

// kernels and the factor each gives the overheads (older kernels pay more).
var kernels = []struct {
	release string
	mul     float64
}{
	{"5.10.0-28-amd64", 1.25}, {"6.1.0-18-amd64", 1}, {"6.1.0-25-amd64", 0.95},
	{"5.15.0-122-generic", 1.15}, {"6.8.0-45-generic", 0.9},
}

// Fleet draws the hosts of cfg: 85% run node_exporter, 5% join late, 5%
// leave early, 5% restart once, 2% (at least one) get an fsync regression
// of their container layer, 10% have 1 to 3 databases in their layers.
func Fleet(cfg Config) []Host {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c70))
	span := cfg.End.Sub(cfg.Start)
	hosts := make([]Host, cfg.Hosts)
	regressed := 0
	for i := range hosts {
		h := &hosts[i]
		h.Index = i
		h.Instance = fmt.Sprintf("host-%04d:9811", i)
		if len(cfg.Clusters) > 0 {
			h.Cluster = cfg.Clusters[i%len(cfg.Clusters)]
		}
		u, acc := rng.Float64(), 0.0
		d := drivers[0]
		for _, c := range drivers {
			acc += c.share
			if u < acc {
				d = c
				break
			}
		}
		k := kernels[rng.IntN(len(kernels))]
		h.Driver, h.BackingFS, h.Kernel = d.name, d.fs, k.release
		h.mul = d.mul * k.mul
		h.NodeExporter = rng.Float64() < 0.85
		h.speed = math.Exp(rng.NormFloat64() * 0.5)
		h.factor = math.Exp(rng.NormFloat64() * 0.3)
		h.phase = time.Duration(rng.Int64N(int64(cfg.Cycle)))
		h.Join, h.Leave = cfg.Start, cfg.End.Add(time.Hour)
		switch u := rng.Float64(); {
		case u < 0.05:
			h.Join = cfg.Start.Add(time.Duration(rng.Float64() * float64(span) * 0.8))
		case u < 0.10:
			h.Leave = cfg.Start.Add(time.Duration((0.2 + rng.Float64()*0.75) * float64(span)))
		case u < 0.15:
			h.Restart = cfg.Start.Add(time.Duration((0.1 + rng.Float64()*0.85) * float64(span)))
		}
		// 2% regress, at least two hosts (which then stay for the whole
		// period), early enough that the detector confirms it (two cycles
		// later) within the period.
		if forced := i >= cfg.Hosts-2 && regressed < 2; rng.Float64() < 0.02 || forced {
			room := span - 5*cfg.Cycle/2
			if room < span/10 {
				room = span / 10
			}
			h.RegressionAt = cfg.Start.Add(time.Duration((0.3 + rng.Float64()*0.7) * float64(room)))
			if forced {
				h.Join, h.Leave, h.Restart = cfg.Start, cfg.End.Add(time.Hour), time.Time{}
			}
			regressed++
		}
		if rng.Float64() < 0.10 {
			h.Databases = 1 + rng.IntN(3)
		}
	}
	return hosts
}

// Alive reports whether the host's agent answers at t.
func (h Host) Alive(t time.Time) bool { return !t.Before(h.Join) && t.Before(h.Leave) }

// cycleAt is the index of the host's last cycle at t, counted since its
// agent (re)started, and when that cycle ended.
func (h Host) cycleAt(t time.Time, cycle time.Duration) (n int, end time.Time) {
	since := h.Join
	if !h.Restart.IsZero() && !t.Before(h.Restart) {
		since = h.Restart
	}
	first := since.Add(time.Minute) // the first cycle soon after start
	if t.Before(first) {
		return 0, time.Time{}
	}
	n = 1 + int(t.Sub(first)/cycle)
	return n, first.Add(time.Duration(n-1) * cycle)
}

// hash01 is a deterministic number in [-1, 1) per host, series and cycle.
func hash01(a, b, c uint64) float64 {
	x := a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9 ^ c*0x94d049bb133111eb
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/float64(1<<52) - 1
}

// Value is series si of the recording as host h exposes it at t, and
// whether it does then (alive or not: see Alive).
func (h Host) Value(rec *Recording, si int, t time.Time, cfg Config) (float64, bool) {
	return h.value(rec, si, t, cfg)
}

// value is series s (index si of the recording) of host h at t, and
// whether the host exposes it then.
func (h Host) value(rec *Recording, si int, t time.Time, cfg Config) (float64, bool) {
	s := rec.Series[si]
	n, end := h.cycleAt(t, cfg.Cycle)
	noise := hash01(uint64(h.Index), uint64(si), uint64(n))
	regressed := !h.RegressionAt.IsZero() && !t.Before(h.RegressionAt)
	l := s.Labels
	switch s.Name {
	case "layerprobe_overhead_ratio", "layerprobe_overhead_ci_low_ratio", "layerprobe_overhead_ci_high_ratio":
		if n == 0 {
			return 0, false
		}
		var v float64
		switch l["target"] {
		case "container", "volume":
			mul := h.factor
			if l["target"] == "container" {
				mul *= h.mul
			}
			v = math.Abs(s.Value)*mul + 0.02*noise
			if regressed && l["target"] == "container" && l["workload"] == "fsync" && l["mode"] != "cold" {
				v += 0.6
			}
		default:
			v = s.Value*0.5 + 0.01*noise
		}
		return v, true
	case "layerprobe_iops", "layerprobe_bandwidth_bytes_per_second":
		return s.Value * h.speed * (1 + 0.05*noise), n > 0
	case "layerprobe_latency_seconds":
		return s.Value / h.speed * (1 + 0.05*noise), n > 0
	case "layerprobe_fsync_regression":
		flagged := regressed && l["target"] == "container" && t.Sub(h.RegressionAt) >= 2*cfg.Cycle
		if flagged {
			return 1, true
		}
		return 0, true
	case "layerprobe_last_success_timestamp_seconds":
		if n == 0 {
			return 0, false
		}
		if l["mode"] == "cold" {
			return float64(end.Add(-time.Duration(n%2) * cfg.Cycle).Unix()), true
		}
		return float64(end.Unix()), true
	case "layerprobe_cycles_total":
		switch {
		case l["result"] == "ok" && l["mode"] == "cold":
			return float64(n / 2), true
		case l["result"] == "ok":
			return float64(n), true
		case l["result"] == "failed" && l["mode"] == "steady":
			return float64(h.failed(n)), true
		case l["result"] == "skipped" && l["mode"] == "steady":
			return float64(h.skipped(n)), true
		}
		return 0, true
	case "layerprobe_cycle_skips_total":
		if l["reason"] == "busy_disk" {
			return float64(h.skipped(n)), true
		}
		return 0, true
	case "layerprobe_written_bytes_total":
		return s.Value / 2 * float64(n), true
	case "layerprobe_container_layer_written_bytes", "layerprobe_container_block_written_bytes_total", "layerprobe_container_database_in_layer":
		c := l["container"]
		if c == "_other" {
			return s.Value, h.Databases > 0
		}
		return s.Value * (1 + float64(h.Index%7)), h.dbIndex(rec, c) < h.Databases
	case "layerprobe_databases_in_layer":
		return float64(h.Databases), true
	case "layerprobe_cycle_duration_seconds", "layerprobe_advisor_pass_duration_seconds", "layerprobe_advisor_pass_cpu_seconds":
		return s.Value * (1 + 0.1*noise), n > 0 || !strings.HasPrefix(s.Name, "layerprobe_cycle")
	case "layerprobe_advisor_last_pass_timestamp_seconds":
		return float64(end.Unix()), n > 0
	case "layerprobe_copyup_latency_seconds", "layerprobe_copyup_cost_seconds_per_byte":
		return s.Value / h.speed * h.mul * (1 + 0.05*noise), n > 1
	}
	return s.Value, true
}

// failed is how many of a host's first n cycles failed besides those
// that succeeded: one in four on every fifth host, so that the counts of
// the fleet's health panels are not all zero.
func (h Host) failed(n int) int {
	if h.Index%5 != 1 {
		return 0
	}
	return n / 4
}

// skipped is how many cycles a guardrail (busy_disk) skipped by a host's
// n-th cycle: one in three on every third host.
func (h Host) skipped(n int) int {
	if h.Index%3 != 0 {
		return 0
	}
	return n / 3
}

// dbIndex is the rank of a recorded container among the recording's
// containers (the host keeps the first Databases of them).
func (h Host) dbIndex(rec *Recording, container string) int {
	var names []string
	seen := map[string]bool{}
	for _, s := range rec.Series {
		if c, ok := s.Labels["container"]; ok && c != "_other" && !seen[c] {
			seen[c] = true
			names = append(names, c)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		if n == container {
			return i
		}
	}
	return len(names)
}

// Labels are the labels of recorded series s as Prometheus stores them
// for host h (with job, instance and cluster).
func (h Host) Labels(s Series) map[string]string { return h.labels(s) }

// labels of series s for host h: the recording's, the host's driver and
// file system, job, instance and cluster.
func (h Host) labels(s Series) map[string]string {
	l := make(map[string]string, len(s.Labels)+3)
	for k, v := range s.Labels {
		l[k] = v
	}
	if _, ok := l["driver"]; ok {
		l["driver"] = h.Driver
	}
	if _, ok := l["backing_fs"]; ok {
		l["backing_fs"] = h.BackingFS
	}
	l["job"], l["instance"] = "layerprobe", h.Instance
	if h.Cluster != "" {
		l["cluster"] = h.Cluster
	}
	return l
}

func (h Host) unameLabels() map[string]string {
	name, _, _ := strings.Cut(h.Instance, ":")
	l := map[string]string{"job": "node", "instance": name + ":9100", "nodename": name, "release": h.Kernel,
		"sysname": "Linux", "machine": "x86_64"}
	if h.Cluster != "" {
		l["cluster"] = h.Cluster
	}
	return l
}

func labelString(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(l[k])
		fmt.Fprintf(&b, "%s=\"%s\"", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

func formatValue(v float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0")
}

// EachSeries calls fn with every series of the fleet's history from
// cfg.Start to cfg.End every cfg.Step, one after the other (every family's
// series together, node_uname_info last): its name, its labels as
// Prometheus stores them, and its samples' times (Unix milliseconds) and
// values, in time order. A series with no sample in the range is skipped.
// fn must not keep ts or vs (they are reused).
func EachSeries(rec *Recording, hosts []Host, cfg Config, fn func(name string, labels map[string]string, ts []int64, vs []float64) error) error {
	var grid []time.Time
	for t := cfg.Start; t.Before(cfg.End); t = t.Add(cfg.Step) {
		grid = append(grid, t)
	}
	ts := make([]int64, 0, len(grid))
	vs := make([]float64, 0, len(grid))
	for si, s := range rec.Series {
		for _, h := range hosts {
			ts, vs = ts[:0], vs[:0]
			for _, t := range grid {
				if !h.Alive(t) {
					continue
				}
				if v, ok := h.value(rec, si, t, cfg); ok {
					ts, vs = append(ts, t.UnixMilli()), append(vs, v)
				}
			}
			if len(ts) > 0 {
				if err := fn(s.Name, h.labels(s), ts, vs); err != nil {
					return err
				}
			}
		}
	}
	for _, h := range hosts {
		if !h.NodeExporter {
			continue
		}
		ts, vs = ts[:0], vs[:0]
		for _, t := range grid {
			if h.Alive(t) {
				ts, vs = append(ts, t.UnixMilli()), append(vs, 1)
			}
		}
		if len(ts) > 0 {
			if err := fn("node_uname_info", h.unameLabels(), ts, vs); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteOpenMetrics writes the fleet's history (EachSeries) as
// OpenMetrics, every family's series one after the other in time order
// (what promtool's backfill reads), and returns the number of samples.
func WriteOpenMetrics(w io.Writer, rec *Recording, hosts []Host, cfg Config) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	samples := 0
	family := ""
	err := EachSeries(rec, hosts, cfg, func(name string, labels map[string]string, ts []int64, vs []float64) error {
		fam, typ := name, "gauge"
		if strings.HasSuffix(fam, "_total") {
			fam, typ = strings.TrimSuffix(fam, "_total"), "counter"
		}
		if fam != family {
			fmt.Fprintf(bw, "# TYPE %s %s\n", fam, typ)
			family = fam
		}
		ls := labelString(labels)
		for i, t := range ts {
			fmt.Fprintf(bw, "%s%s %s %d\n", name, ls, formatValue(vs[i]), t/1000)
		}
		samples += len(ts)
		return nil
	})
	if err != nil {
		return samples, err
	}
	fmt.Fprintf(bw, "# EOF\n")
	return samples, bw.Flush()
}

// WriteScrape writes what host h's agent (and, with node, its
// node_exporter's node_uname_info) would answer at t, in the text format,
// without the target labels (job, instance, cluster) Prometheus adds.
func WriteScrape(w io.Writer, rec *Recording, h Host, t time.Time, cfg Config, node bool) error {
	bw := bufio.NewWriter(w)
	if node {
		if h.NodeExporter && h.Alive(t) {
			l := h.unameLabels()
			delete(l, "job")
			delete(l, "instance")
			delete(l, "cluster")
			fmt.Fprintf(bw, "node_uname_info%s 1\n", labelString(l))
		}
		return bw.Flush()
	}
	if !h.Alive(t) {
		return bw.Flush()
	}
	for si, s := range rec.Series {
		v, ok := h.value(rec, si, t, cfg)
		if !ok {
			continue
		}
		l := h.labels(s)
		delete(l, "job")
		delete(l, "instance")
		delete(l, "cluster")
		fmt.Fprintf(bw, "%s%s %s\n", s.Name, labelString(l), formatValue(v))
	}
	return bw.Flush()
}
