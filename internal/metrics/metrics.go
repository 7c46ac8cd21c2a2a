// Package metrics exposes layerprobe's cached measurement results to
// Prometheus.
//
// A measurement cycle runs fio for minutes, far longer than a scrape
// timeout, so nothing here measures anything: the agent builds an immutable
// Snapshot after every cycle and swaps it in, and the collector turns the
// snapshot it finds at scrape time into constant metrics. Const metrics
// (rather than GaugeVecs updated by the agent) make series of targets or
// engines that no longer exist disappear by themselves, and keep concurrent
// scrapes free of shared mutable state.
//
// Metric names and labels are a contract (docs/metrics.md); dashboards and
// alert rules depend on them. Extend, do not rename.
//
// Two levels of detail: the lean default exposes, per target and workload,
// the headline figure only (measure.HeadlineMetric: its overhead with the
// interval, and its raw value), and the advisor's top LeanTopN containers;
// the detail level (agent.metrics_detail) exposes every figure of the
// snapshot. The snapshot is the same at both levels: the level only
// decides what a scrape shows, so switching it needs no new measurement.
package metrics

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Snapshot is the immutable state the collector exposes; the agent builds a
// new one after every cycle and swaps it in. Nothing may modify a Snapshot
// (or the maps and slices it holds) once Source has returned it, because
// concurrent scrapes read it without locks.
type Snapshot struct {
	Engines []Engine
}

// Engine is one configured container engine's state.
type Engine struct {
	Name string
	// EngineFacts label layerprobe_engine_info; a HostArmCgroup of ""
	// omits layerprobe_host_arm_cgroup_joined.
	measure.EngineFacts
	// Up is whether the engine answered at the agent's last look (nil:
	// not asked yet, which omits layerprobe_engine_up).
	Up *bool

	// Overheads are the paired median overheads versus the host. A NaN
	// field omits only that series.
	Overheads []Overhead
	// Raw are the per-target fio figures of the last cycle. NaN omits the
	// series.
	Raw []Raw
	// Regression maps a target to whether the fsync regression detector
	// says it regressed. Every non-host target present is exported as 0 or
	// 1; "host" is ignored because it is the baseline itself.
	Regression map[measure.Target]bool
	// CyclesTotal maps a cycle result (ok, failed, skipped, interrupted)
	// to its count. The four known results are exported as 0 when absent;
	// other keys are exported as they are.
	CyclesTotal map[string]float64
	// SkipsTotal maps a skip reason (busy_io_pressure, busy_disk,
	// container_churn, budget_exhausted, low_space) to its count. The
	// known reasons are exported as 0 when absent; other keys as they are.
	SkipsTotal map[string]float64
	// WrittenBytesTotal maps a target to the bytes written there since the
	// agent started.
	WrittenBytesTotal map[measure.Target]float64
	// LastCycleDuration is in seconds; NaN means no cycle yet and omits
	// the series.
	LastCycleDuration float64
	// LastSuccess is when the last successful cycle ended; zero omits the
	// series.
	LastSuccess time.Time
	// BudgetBytes is the daily byte budget (0 = unlimited, which omits both
	// budget series); BudgetUsedBytes is what was written in the last 24 h.
	BudgetBytes, BudgetUsedBytes float64

	// The cold probe's cycle state, exported with mode="cold". A nil
	// ColdCyclesTotal means the cold probe is off: no cold cycle series.
	ColdCyclesTotal       map[string]float64
	ColdLastCycleDuration float64   // NaN omits the series
	ColdLastSuccess       time.Time // zero omits the series
	// CopyUp are the median first-write latencies per target and file
	// size; CopyUpCostPerByte the implied copy-up cost (NaN omits it).
	CopyUp            []CopyUp
	CopyUpCostPerByte float64
	// Reflink is whether the data root's file system shares extents; nil
	// (unknown, or no cold cycle yet) omits the series.
	Reflink *bool
	// Startup is the last cold cycle's container start-up cost per image
	// size; nil (not measured) omits its series.
	Startup *Startup
	// Lookup summarizes the cold probe's stat walks and first creates in
	// the cold image's tree over the recent cold rounds, one entry per
	// operation; none omits its series.
	Lookup []measure.LookupSummary

	// Advisor is the last layer-write advisor pass; nil (advisor off, or
	// no pass yet) omits its series.
	Advisor *Advisor
}

// CopyUp is the median time of the first 4 KiB write + fsync to a file of
// SizeBytes on Target (host, or container where the write pays the copy-up).
type CopyUp struct {
	Target    measure.Target
	SizeBytes int64
	Seconds   float64
}

// Startup is what starting a container costs on the engine
// (measure.Startup): per image size the median time of create + start +
// first exec + remove and the bytes a start wrote to the data root's
// device, and the slopes over the image size (NaN omits a slope).
type Startup struct {
	Sizes             []measure.StartupSize
	SecondsPerByte    float64
	BytesPerImageByte float64
}

// Overhead is one paired median overhead versus the host with its
// confidence interval, as ratios (0.08 = 8% slower than the host).
type Overhead struct {
	Target               measure.Target
	Workload             measure.Workload // the workload label
	Metric               string
	Mode                 measure.Mode // "" reads as steady
	Ratio, CILow, CIHigh float64
}

// Raw is one target's fio figures for one workload and data direction (Op is
// read, write or sync). Latency maps a percentile ("50", "99", "99.9") to
// seconds.
type Raw struct {
	Target               measure.Target
	Workload             measure.Workload // the workload label
	Op                   string
	Mode                 measure.Mode // "" reads as steady
	IOPS, BandwidthBytes float64
	Latency              map[string]float64
}

// Source hands out the current snapshot. It is declared here, where it is
// consumed, so the collector can be tested without an agent. Snapshot may
// return nil (nothing to expose yet).
type Source interface {
	Snapshot() *Snapshot
}

// Label values that are pre-initialised to 0, so that rate() and
// increase() see a series before its first increment (a counter that
// appears at 1 hides that first event from increase()).
var (
	cycleResults = []string{"ok", "failed", "skipped", "interrupted"}
	skipReasons  = []string{"busy_io_pressure", "busy_disk", "container_churn", "budget_exhausted", "low_space"}
)

const (
	namespace = "layerprobe"
	// cached ends every HELP text: the exporter guidelines ask that values
	// which are not fetched at scrape time say so in their HELP.
	cached = " Cached from the last completed measurement cycle, not measured at scrape time."
)

// Static descriptors: the registry checks every collected metric against
// them, so a label typo fails at the first scrape in the tests rather than
// producing an inconsistent exposition.
var (
	overheadLabels = []string{"engine", "driver", "target", "workload", "metric", "mode"}
	rawLabels      = []string{"engine", "driver", "target", "workload", "op", "mode"}

	descOverhead = prometheus.NewDesc(namespace+"_overhead_ratio",
		"Storage overhead of the target versus the host directory on the same filesystem, as a ratio: "+
			"median over recent rounds of the paired per-round comparison with the host "+
			"(iops, bandwidth: 1 - target/host; latencies: target/host - 1; 0.08 = 8% slower, negative = faster)."+cached,
		overheadLabels, nil)
	descCILow = prometheus.NewDesc(namespace+"_overhead_ci_low_ratio",
		"Lower bound of the exact (sign-test, order-statistic) 95% confidence interval of layerprobe_overhead_ratio, as a ratio."+cached,
		overheadLabels, nil)
	descCIHigh = prometheus.NewDesc(namespace+"_overhead_ci_high_ratio",
		"Upper bound of the exact (sign-test, order-statistic) 95% confidence interval of layerprobe_overhead_ratio, as a ratio."+cached,
		overheadLabels, nil)
	descIOPS = prometheus.NewDesc(namespace+"_iops",
		"I/O operations per second on the target for one data direction, median over the rounds of the cycle "+
			"(fio jobs[].read.iops, jobs[].write.iops)."+cached,
		rawLabels, nil)
	descBandwidth = prometheus.NewDesc(namespace+"_bandwidth_bytes_per_second",
		"Bandwidth in bytes per second on the target for one data direction, median over the rounds of the cycle "+
			"(fio jobs[].read.bw_bytes, jobs[].write.bw_bytes)."+cached,
		rawLabels, nil)
	descLatency = prometheus.NewDesc(namespace+"_latency_seconds",
		"Latency percentile in seconds on the target for one data direction, median over the rounds of the cycle "+
			"(fio completion latency jobs[].read.clat_ns.percentile, jobs[].write.clat_ns.percentile, lat_ns where clat has no percentiles; "+
			"op=sync: fsync latency jobs[].sync.lat_ns.percentile; converted from nanoseconds)."+cached,
		append(slices.Clone(rawLabels), "percentile"), nil)
	descRegression = prometheus.NewDesc(namespace+"_fsync_regression",
		"1 while the regression detector says the target's fsync latency (detector.metric, fsync_p99 by default) regressed against its baseline, 0 otherwise."+cached,
		[]string{"engine", "driver", "target"}, nil)
	descCycles = prometheus.NewDesc(namespace+"_cycles_total",
		"Measurement cycles finished since the agent started, by result (ok, failed, skipped, interrupted) and mode (steady, cold)."+cached,
		[]string{"engine", "result", "mode"}, nil)
	descSkips = prometheus.NewDesc(namespace+"_cycle_skips_total",
		"Measurement cycles skipped by an impact guardrail since the agent started, by reason."+cached,
		[]string{"engine", "reason"}, nil)
	descDuration = prometheus.NewDesc(namespace+"_cycle_duration_seconds",
		"Duration in seconds of the last finished measurement cycle of the mode."+cached,
		[]string{"engine", "mode"}, nil)
	descLastSuccess = prometheus.NewDesc(namespace+"_last_success_timestamp_seconds",
		"Unix time in seconds when the last successful measurement cycle of the mode ended; every other layerprobe value of that mode is only as fresh as this."+cached,
		[]string{"engine", "mode"}, nil)
	descWritten = prometheus.NewDesc(namespace+"_written_bytes_total",
		"Bytes written by measurement jobs on the target since the agent started."+cached,
		[]string{"engine", "target"}, nil)
	descInfo = prometheus.NewDesc(namespace+"_engine_info",
		"Container engine facts, value always 1: storage driver (containerd: snapshotter), backing filesystem of the data root, engine version, data root, fio version and runtime (docker, podman or containerd)."+cached,
		[]string{"engine", "driver", "backing_fs", "engine_version", "data_root", "fio_version", "runtime"}, nil)
	descBudget = prometheus.NewDesc(namespace+"_daily_budget_bytes",
		"Configured daily budget in bytes for measurement writes (absent when unlimited)."+cached,
		[]string{"engine"}, nil)
	descBudgetUsed = prometheus.NewDesc(namespace+"_budget_used_bytes",
		"Bytes written by measurement jobs in the last 24 hours, counted against the daily budget (absent when unlimited)."+cached,
		[]string{"engine"}, nil)
	descCopyUp = prometheus.NewDesc(namespace+"_copyup_latency_seconds",
		"Median time in seconds of the first 4 KiB write + fsync to a file of size_bytes: target=container is a file in the image layer of a fresh container "+
			"(the write pays the copy-up of the whole file), target=host an equal file in the host directory; over the recent cold rounds."+cached,
		[]string{"engine", "driver", "target", "size_bytes"}, nil)
	descCopyUpCost = prometheus.NewDesc(namespace+"_copyup_cost_seconds_per_byte",
		"Implied copy-up cost: extra first-write latency (container - host) per byte of file size, Theil-Sen slope over the recent cold rounds."+cached,
		[]string{"engine", "driver"}, nil)
	descReflink = prometheus.NewDesc(namespace+"_backing_fs_reflink",
		"1 if the data root's file system shares extents (reflink, so overlay2 copy-up clones instead of copying), 0 if not; from the last cold cycle."+cached,
		[]string{"engine", "backing_fs"}, nil)

	descStartup = prometheus.NewDesc(namespace+"_startup_seconds",
		"Median time in seconds to create, start, exec once into and remove a container whose image carries image_bytes of files beyond the probe image's, from the last cold cycle."+cached,
		[]string{"engine", "driver", "image_bytes"}, nil)
	descStartupBytes = prometheus.NewDesc(namespace+"_startup_device_written_bytes",
		"Median bytes the data root's block device wrote per container start (create to remove, synced) from an image carrying image_bytes of files, from the last cold cycle: about image_bytes more for every copy of the image a start makes (vfs makes two: the init layer and the container's layer)."+cached,
		[]string{"engine", "driver", "image_bytes"}, nil)
	descStartupSlope = prometheus.NewDesc(namespace+"_startup_seconds_per_byte",
		"Extra start-up time per byte of image, Theil-Sen slope over the last cold cycle's image sizes."+cached,
		[]string{"engine", "driver"}, nil)
	descStartupBytesSlope = prometheus.NewDesc(namespace+"_startup_written_bytes_per_image_byte",
		"Bytes a container start writes per byte of image, Theil-Sen slope over the last cold cycle's image sizes: about 1 per copy of the image a start makes (vfs: 2), about 0 where layers are shared."+cached,
		[]string{"engine", "driver"}, nil)

	descLookup = prometheus.NewDesc(namespace+"_lookup_seconds",
		"Median time in seconds of a lookup operation in the cold image's tree of small files over the recent cold rounds: lookup=walk stats every entry of the tree, "+
			"lookup=dir_create creates a first file in a directory of it (the median of a round's directories, one of each depth); target=container in a fresh container "+
			"(names looked up through the image's layers, directories copied up), target=host in an equal tree in the host directory."+cached,
		[]string{"engine", "driver", "lookup", "target"}, nil)
	descLookupExtra = prometheus.NewDesc(namespace+"_lookup_extra_seconds",
		"Median of the per-round differences container - host of a lookup operation's time (the cost of the image's layers), over the recent cold rounds."+cached,
		[]string{"engine", "driver", "lookup"}, nil)
	descLookupLow = prometheus.NewDesc(namespace+"_lookup_extra_ci_low_seconds",
		"Lower bound of the 95% exact interval of layerprobe_lookup_extra_seconds; absent while the rounds are too few for it (as the overhead bounds)."+cached,
		[]string{"engine", "driver", "lookup"}, nil)
	descLookupHigh = prometheus.NewDesc(namespace+"_lookup_extra_ci_high_seconds",
		"Upper bound of the 95% exact interval of layerprobe_lookup_extra_seconds; absent while the rounds are too few for it."+cached,
		[]string{"engine", "driver", "lookup"}, nil)

	descUp = prometheus.NewDesc(namespace+"_engine_up",
		"1 if the engine answered at the agent's last look, 0 if it did not (no socket, engine down: the agent's log and GET /api/v1/engines say why); absent before the first look."+cached,
		[]string{"engine"}, nil)
	descDetail = prometheus.NewDesc(namespace+"_metrics_detail",
		"1 if this agent exposes every figure (agent.metrics_detail: true), 0 if only the headline of each target and workload and the top "+strconv.Itoa(LeanTopN)+" containers (the default).",
		nil, nil)
	descHostArm = prometheus.NewDesc(namespace+"_host_arm_cgroup_joined",
		"1 if the host arm's fio runs in the probe container's CPU cgroups, 0 if it cannot join them (then CPU contention on a busy host reads as storage overhead: see the agent's warnings); absent before the probe container has started."+cached,
		[]string{"engine"}, nil)

	allDescs = []*prometheus.Desc{descUp, descHostArm, descOverhead, descCILow, descCIHigh, descIOPS, descBandwidth, descLatency,
		descRegression, descCycles, descSkips, descDuration, descLastSuccess, descWritten, descInfo,
		descBudget, descBudgetUsed, descCopyUp, descCopyUpCost, descReflink,
		descStartup, descStartupBytes, descStartupSlope, descStartupBytesSlope,
		descLookup, descLookupExtra, descLookupLow, descLookupHigh}
)

// LeanTopN is how many containers carry series of their own at the lean
// level, whatever advisor.metrics_top_n says (a smaller top_n wins).
const LeanTopN = 3

type collector struct {
	src    Source
	detail bool
}

// NewCollector returns a collector that exposes src's snapshot, every
// figure of it when detail is true, else the lean set (package doc). It
// never measures: Collect only reads the snapshot current at scrape time.
func NewCollector(src Source, detail bool) prometheus.Collector {
	return &collector{src: src, detail: detail}
}

// Describe implements prometheus.Collector with static descriptors, so the
// registry can check label consistency and name clashes at registration.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDetail // not in allDescs: a setting, not a cached figure
	for _, d := range allDescs {
		ch <- d
	}
	for _, d := range advisorDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It reads the snapshot pointer
// exactly once, so one scrape never mixes two cycles even if the agent
// swaps snapshots meanwhile.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	// The level is known before any cycle, so dashboards can tell "needs
	// the detail" from "not measured yet" from the start.
	level := 0.0
	if c.detail {
		level = 1
	}
	emit(ch, descDetail, prometheus.GaugeValue, level)
	snap := c.src.Snapshot()
	if snap == nil {
		return
	}
	for i := range snap.Engines {
		collectEngine(ch, &snap.Engines[i], c.detail)
	}
}

func collectEngine(ch chan<- prometheus.Metric, e *Engine, detail bool) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		emit(ch, d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		emit(ch, d, prometheus.CounterValue, v, lv...)
	}

	gauge(descInfo, 1, e.Name, e.Driver, e.BackingFS, e.EngineVersion, e.DataRoot, e.FioVersion, e.Runtime)
	if e.Up != nil {
		up := 0.0
		if *e.Up {
			up = 1
		}
		gauge(descUp, up, e.Name)
	}
	switch e.HostArmCgroup {
	case "joined":
		gauge(descHostArm, 1, e.Name)
	case "outside":
		gauge(descHostArm, 0, e.Name)
	}

	for _, o := range e.Overheads {
		if !detail && o.Metric != measure.HeadlineMetric(o.Workload) {
			continue
		}
		lv := []string{e.Name, e.Driver, string(o.Target), string(o.Workload), o.Metric, modeOf(o.Mode)}
		gauge(descOverhead, o.Ratio, lv...)
		gauge(descCILow, o.CILow, lv...)
		gauge(descCIHigh, o.CIHigh, lv...)
	}

	for _, r := range e.Raw {
		m := modeOf(r.Mode)
		t, w := string(r.Target), string(r.Workload)
		if !detail {
			if d, v, p, ok := rawHeadline(r); ok {
				lv := []string{e.Name, e.Driver, t, w, r.Op, m}
				if p != "" {
					lv = append(lv, p)
				}
				gauge(d, v, lv...)
			}
			continue
		}
		gauge(descIOPS, r.IOPS, e.Name, e.Driver, t, w, r.Op, m)
		gauge(descBandwidth, r.BandwidthBytes, e.Name, e.Driver, t, w, r.Op, m)
		for p, v := range r.Latency {
			gauge(descLatency, v, e.Name, e.Driver, t, w, r.Op, m, p)
		}
	}

	for t, regressed := range e.Regression {
		if t == measure.TargetHost {
			continue // the baseline every other target is compared with
		}
		v := 0.0
		if regressed {
			v = 1
		}
		gauge(descRegression, v, e.Name, e.Driver, string(t))
	}

	for k, v := range withDefaults(e.CyclesTotal, cycleResults) {
		counter(descCycles, v, e.Name, k, modeSteady)
	}
	if e.ColdCyclesTotal != nil {
		for k, v := range withDefaults(e.ColdCyclesTotal, cycleResults) {
			counter(descCycles, v, e.Name, k, modeCold)
		}
		gauge(descDuration, e.ColdLastCycleDuration, e.Name, modeCold)
		if !e.ColdLastSuccess.IsZero() {
			gauge(descLastSuccess, unixSeconds(e.ColdLastSuccess), e.Name, modeCold)
		}
	}
	for _, u := range e.CopyUp {
		gauge(descCopyUp, u.Seconds, e.Name, e.Driver, string(u.Target), strconv.FormatInt(u.SizeBytes, 10))
	}
	if len(e.CopyUp) > 0 {
		// Without copy-up figures the zero value would read as free.
		gauge(descCopyUpCost, e.CopyUpCostPerByte, e.Name, e.Driver)
	}
	if st := e.Startup; st != nil {
		for _, sz := range st.Sizes {
			size := strconv.FormatInt(sz.ImageBytes, 10)
			gauge(descStartup, sz.Seconds, e.Name, e.Driver, size)
			gauge(descStartupBytes, sz.DeviceBytes, e.Name, e.Driver, size)
		}
		gauge(descStartupSlope, st.SecondsPerByte, e.Name, e.Driver)
		gauge(descStartupBytesSlope, st.BytesPerImageByte, e.Name, e.Driver)
	}
	for _, l := range e.Lookup {
		gauge(descLookup, l.HostSeconds, e.Name, e.Driver, l.Op, string(measure.TargetHost))
		gauge(descLookup, l.ContainerSeconds, e.Name, e.Driver, l.Op, string(measure.TargetContainer))
		gauge(descLookupExtra, l.ExtraSeconds, e.Name, e.Driver, l.Op)
		if !l.Withheld {
			gauge(descLookupLow, l.ExtraCILow, e.Name, e.Driver, l.Op)
			gauge(descLookupHigh, l.ExtraCIHigh, e.Name, e.Driver, l.Op)
		}
	}
	if e.Reflink != nil {
		v := 0.0
		if *e.Reflink {
			v = 1
		}
		gauge(descReflink, v, e.Name, e.BackingFS)
	}
	for k, v := range withDefaults(e.SkipsTotal, skipReasons) {
		counter(descSkips, v, e.Name, k)
	}
	for t, v := range e.WrittenBytesTotal {
		counter(descWritten, v, e.Name, string(t))
	}

	a := e.Advisor
	if !detail {
		a = a.lean(LeanTopN)
	}
	collectAdvisor(ch, e.Name, a)

	gauge(descDuration, e.LastCycleDuration, e.Name, modeSteady)
	if !e.LastSuccess.IsZero() {
		gauge(descLastSuccess, unixSeconds(e.LastSuccess), e.Name, modeSteady)
	}
	// 0 (or a nonsensical negative/NaN) budget means unlimited: a 0 series
	// would read as "budget exhausted" to an alert comparing the two.
	if e.BudgetBytes > 0 {
		gauge(descBudget, e.BudgetBytes, e.Name)
		gauge(descBudgetUsed, e.BudgetUsedBytes, e.Name)
	}
}

// rawHeadline is the one raw figure of r the lean level exposes: the raw
// value behind the workload's headline overhead (measure.HeadlineMetric),
// in the data direction that carries it. Bandwidth and IOPS are the
// writes' (the overheads' read+write sums are the writes alone in these
// write-only workloads), fsync_p99 is the sync calls' 99th percentile. It
// returns the descriptor, the value, the percentile label ("" for none) and
// false when r holds no headline figure.
func rawHeadline(r Raw) (*prometheus.Desc, float64, string, bool) {
	switch measure.HeadlineMetric(r.Workload) {
	case measure.MetricBandwidth:
		if r.Op == "write" {
			return descBandwidth, r.BandwidthBytes, "", true
		}
	case measure.MetricIOPS:
		if r.Op == "write" {
			return descIOPS, r.IOPS, "", true
		}
	case measure.MetricFsyncP99:
		if v, ok := r.Latency["99"]; ok && r.Op == "sync" {
			return descLatency, v, "99", true
		}
	}
	return nil, 0, "", false
}

// Values of the mode label.
const (
	modeSteady = string(measure.ModeSteady)
	modeCold   = string(measure.ModeCold)
)

func modeOf(m measure.Mode) string {
	if m == "" {
		return modeSteady
	}
	return string(m)
}

// unixSeconds keeps whole and fractional seconds apart: UnixNano()/1e9
// loses the fraction to float rounding (…00.25 would read …00.2499998).
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// emit sends one sample unless v is NaN: a missing figure is an absent
// series, never a NaN sample that graphs and alerts would have to filter.
// A label value the registry rejects (say, a daemon reporting a data root
// that is not UTF-8) becomes an invalid metric instead of a panic, so the
// handler's ContinueOnError still serves every other series.
func emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, lv ...string) {
	if math.IsNaN(v) {
		return
	}
	m, err := prometheus.NewConstMetric(d, t, v, lv...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// withDefaults returns m plus a 0 for every key in known that m lacks,
// without modifying m (it belongs to an immutable snapshot).
func withDefaults(m map[string]float64, known []string) map[string]float64 {
	out := make(map[string]float64, len(m)+len(known))
	for _, k := range known {
		out[k] = 0
	}
	for k, v := range m {
		out[k] = v
	}
	return out
}
