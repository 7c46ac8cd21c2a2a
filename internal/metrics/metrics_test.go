package metrics

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/layerprobe/layerprobe/internal/measure"
)

var update = flag.Bool("update", false, "rewrite testdata/*.prom from the collector's output (review the diff!)")

// staticSource serves one fixed snapshot.
type staticSource struct{ snap *Snapshot }

func (s staticSource) Snapshot() *Snapshot { return s.snap }

// swapSource is what the agent does: an atomic pointer swapped after every
// cycle.
type swapSource struct {
	p     atomic.Pointer[Snapshot]
	calls atomic.Int64
}

func (s *swapSource) Snapshot() *Snapshot {
	s.calls.Add(1)
	return s.p.Load()
}

var nan = math.NaN()

// lat builds a latency map; NaN values stay in, the collector must omit them.
func lat(p50, p99, p999 float64) map[string]float64 {
	return map[string]float64{"50": p50, "99": p99, "99.9": p999}
}

// fullSnapshot is a realistic state after a few cycles: one healthy
// engine with two measured targets (container, bind) against the host over
// the three jobs, some figures missing (NaN), container's fsync flagged as
// regressed; and a second engine that never completed a cycle.
func fullSnapshot() *Snapshot {
	healthy := Engine{
		Name: "default", EngineFacts: measure.EngineFacts{Runtime: "docker", Driver: "overlay2", BackingFS: "extfs",
			EngineVersion: "29.1.3", DataRoot: "/var/lib/docker", FioVersion: "fio-3.33", HostArmCgroup: "joined"},
		Up: ptr(true),
		Overheads: []Overhead{
			{Target: "bind", Workload: "fsync", Metric: "bandwidth", Ratio: 0.004, CILow: -0.011, CIHigh: 0.019},
			{Target: "bind", Workload: "fsync", Metric: "fsync_p99", Ratio: -0.012, CILow: -0.05, CIHigh: 0.031},
			{Target: "bind", Workload: "fsync", Metric: "iops", Ratio: 0.003, CILow: -0.01, CIHigh: 0.02},
			{Target: "bind", Workload: "fsync", Metric: "latency_p50", Ratio: 0.006, CILow: -0.008, CIHigh: 0.022},
			{Target: "bind", Workload: "fsync", Metric: "latency_p99", Ratio: 0.01, CILow: -0.03, CIHigh: 0.04},
			{Target: "bind", Workload: "randwrite", Metric: "bandwidth", Ratio: 0.002, CILow: -0.02, CIHigh: 0.018},
			{Target: "bind", Workload: "randwrite", Metric: "iops", Ratio: 0.002, CILow: -0.02, CIHigh: 0.018},
			{Target: "bind", Workload: "randwrite", Metric: "latency_p50", Ratio: 0, CILow: -0.015, CIHigh: 0.02},
			{Target: "bind", Workload: "randwrite", Metric: "latency_p99", Ratio: 0.021, CILow: -0.04, CIHigh: 0.07},
			{Target: "bind", Workload: "seqwrite", Metric: "bandwidth", Ratio: -0.008, CILow: -0.03, CIHigh: 0.01},
			{Target: "bind", Workload: "seqwrite", Metric: "iops", Ratio: -0.008, CILow: -0.03, CIHigh: 0.01},
			{Target: "bind", Workload: "seqwrite", Metric: "latency_p50", Ratio: 0.001, CILow: -0.02, CIHigh: 0.03},
			// A ratio without interval bounds: today's statistics never
			// produce one (one pair gives low = high = ratio), but each
			// field is omitted on its own.
			{Target: "bind", Workload: "seqwrite", Metric: "latency_p99", Ratio: 0.05, CILow: nan, CIHigh: nan},
			{Target: "container", Workload: "fsync", Metric: "bandwidth", Ratio: 0.31, CILow: 0.22, CIHigh: 0.4},
			{Target: "container", Workload: "fsync", Metric: "fsync_p99", Ratio: 0.87, CILow: 0.61, CIHigh: 1.2},
			{Target: "container", Workload: "fsync", Metric: "iops", Ratio: 0.31, CILow: 0.22, CIHigh: 0.4},
			{Target: "container", Workload: "fsync", Metric: "latency_p50", Ratio: 0.12, CILow: 0.05, CIHigh: 0.2},
			{Target: "container", Workload: "fsync", Metric: "latency_p99", Ratio: 0.45, CILow: 0.3, CIHigh: 0.62},
			{Target: "container", Workload: "randwrite", Metric: "bandwidth", Ratio: 0.08, CILow: 0.05, CIHigh: 0.11},
			{Target: "container", Workload: "randwrite", Metric: "iops", Ratio: 0.08, CILow: 0.05, CIHigh: 0.11},
			{Target: "container", Workload: "randwrite", Metric: "latency_p50", Ratio: 0.06, CILow: 0.02, CIHigh: 0.09},
			{Target: "container", Workload: "randwrite", Metric: "latency_p99", Ratio: 0.14, CILow: 0.04, CIHigh: 0.25},
			{Target: "container", Workload: "seqwrite", Metric: "bandwidth", Ratio: -0.02, CILow: -0.06, CIHigh: 0.01},
			{Target: "container", Workload: "seqwrite", Metric: "iops", Ratio: -0.02, CILow: -0.06, CIHigh: 0.01},
			{Target: "container", Workload: "seqwrite", Metric: "latency_p50", Ratio: 0.03, CILow: 0, CIHigh: 0.07},
			// No valid pair at all: the three series are absent.
			{Target: "container", Workload: "seqwrite", Metric: "latency_p99", Ratio: nan, CILow: nan, CIHigh: nan},
			// Cold: a fresh container's first seconds, same names, mode="cold".
			{Target: "container", Workload: "fsync", Metric: "fsync_p99", Mode: "cold", Ratio: 1.4, CILow: 1.1, CIHigh: 2.2},
			{Target: "container", Workload: "fsync", Metric: "iops", Mode: "cold", Ratio: 0.52, CILow: 0.4, CIHigh: 0.61},
		},
		Raw: []Raw{
			{Target: "bind", Workload: "fsync", Op: "read", IOPS: 1481, BandwidthBytes: 6066176, Latency: lat(0.0000042, 0.000011, 0.000024)},
			{Target: "bind", Workload: "fsync", Op: "sync", IOPS: nan, BandwidthBytes: nan, Latency: lat(0.00041, 0.0011, 0.0023)},
			{Target: "bind", Workload: "fsync", Op: "write", IOPS: 1480, BandwidthBytes: 6062080, Latency: lat(0.0000061, 0.000014, 0.000029)},
			{Target: "bind", Workload: "randwrite", Op: "write", IOPS: 51200, BandwidthBytes: 209715200, Latency: lat(0.000017, 0.000052, 0.00011)},
			{Target: "bind", Workload: "seqwrite", Op: "write", IOPS: 1310, BandwidthBytes: 1373634560, Latency: lat(0.00071, 0.0021, 0.0042)},
			{Target: "container", Workload: "fsync", Op: "read", IOPS: 1019, BandwidthBytes: 4173824, Latency: lat(0.0000047, 0.000016, 0.000035)},
			{Target: "container", Workload: "fsync", Op: "sync", IOPS: nan, BandwidthBytes: nan, Latency: lat(0.00077, 0.0021, 0.0049)},
			{Target: "container", Workload: "fsync", Op: "write", IOPS: 1020, BandwidthBytes: 4177920, Latency: lat(0.0000068, 0.00002, 0.000041)},
			{Target: "container", Workload: "randwrite", Op: "write", IOPS: 47100, BandwidthBytes: 192921600, Latency: lat(0.000018, 0.000059, 0.00013)},
			// fio printed no 99.9th percentile: that one series is absent.
			{Target: "container", Workload: "seqwrite", Op: "write", IOPS: 1336, BandwidthBytes: 1400897536, Latency: lat(0.00073, 0.0022, nan)},
			{Target: "host", Workload: "fsync", Op: "read", IOPS: 1476, BandwidthBytes: 6045696, Latency: lat(0.0000041, 0.000011, 0.000023)},
			{Target: "host", Workload: "fsync", Op: "sync", IOPS: nan, BandwidthBytes: nan, Latency: lat(0.0004, 0.0011, 0.0024)},
			{Target: "host", Workload: "fsync", Op: "write", IOPS: 1475, BandwidthBytes: 6041600, Latency: lat(0.000006, 0.000014, 0.00003)},
			{Target: "host", Workload: "randwrite", Op: "write", IOPS: 51300, BandwidthBytes: 210124800, Latency: lat(0.000017, 0.000051, 0.00011)},
			{Target: "host", Workload: "seqwrite", Op: "write", IOPS: 1300, BandwidthBytes: 1363148800, Latency: lat(0.00071, 0.0021, 0.0041)},
			{Target: "container", Workload: "fsync", Op: "sync", Mode: "cold", IOPS: nan, BandwidthBytes: nan, Latency: lat(0.0019, 0.0061, 0.011)},
		},
		// "host" is the baseline and must not be exported.
		Regression:        map[measure.Target]bool{"host": true, "container": true, "bind": false},
		CyclesTotal:       map[string]float64{"ok": 5, "failed": 1},
		SkipsTotal:        map[string]float64{"busy_io_pressure": 2, "host_locked": 0},
		WrittenBytesTotal: map[measure.Target]float64{"host": 3221225472, "container": 3221225472, "bind": 3221225472},
		LastCycleDuration: 312.5,
		LastSuccess:       time.Date(2026, 3, 1, 12, 0, 0, 250e6, time.UTC),
		BudgetBytes:       20 << 30,
		BudgetUsedBytes:   9663676416,

		ColdCyclesTotal:       map[string]float64{"ok": 2},
		ColdLastCycleDuration: 41.25,
		ColdLastSuccess:       time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC),
		CopyUp: []CopyUp{
			{Target: "container", SizeBytes: 1 << 20, Seconds: 0.0042},
			{Target: "container", SizeBytes: 64 << 20, Seconds: 0.218},
			{Target: "host", SizeBytes: 1 << 20, Seconds: 0.00045},
			{Target: "host", SizeBytes: 64 << 20, Seconds: nan},
		},
		CopyUpCostPerByte: 0.0034 / (1 << 20),
		Reflink:           new(false),
		Startup: &Startup{
			Sizes: []measure.StartupSize{{ImageBytes: 10 << 20, Rounds: 3, Seconds: 0.61, DeviceBytes: 3 << 20},
				{ImageBytes: 500 << 20, Rounds: 3, Seconds: 0.64, DeviceBytes: 3 << 20}},
			SecondsPerByte: 0.03 / (490 << 20), BytesPerImageByte: 0,
		},
		// The walk's interval is there; the first create's is withheld.
		Lookup: []measure.LookupSummary{
			{Op: "walk", Rounds: 6, HostSeconds: 0.0061, ContainerSeconds: 0.0199, ExtraSeconds: 0.0138,
				ExtraCILow: 0.0112, ExtraCIHigh: 0.0171, Coverage: 0.969},
			{Op: "dir_create", Rounds: 3, HostSeconds: 0.00021, ContainerSeconds: 0.00025, ExtraSeconds: 0.00004,
				ExtraCILow: nan, ExtraCIHigh: nan, Coverage: 0.75, Withheld: true},
		},
		Advisor: &Advisor{
			At: time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC), Containers: 5, DatabasesInLayer: 1,
			Top: []ContainerSeries{
				{Name: "writer", Image: "registry.example.com/app:1.2", LayerBytes: 67108864, BlockBytes: 67112960},
				{Name: "pg", Image: "postgres:16", LayerBytes: 40960, BlockBytes: nan, Database: "postgres"},
			},
			RestContainers: 3, RestLayerBytes: 8192,
			PassSeconds: 0.21, PassCPUSeconds: 0.04, PassReadBytes: 0,
		},
	}
	failed := Engine{
		Name: "lab", EngineFacts: measure.EngineFacts{Driver: "btrfs", BackingFS: "btrfs", EngineVersion: "1.7.24",
			Runtime: "containerd", DataRoot: "/var/lib/containerd/io.containerd.snapshotter.v1.btrfs"},
		CyclesTotal:       map[string]float64{"failed": 3},
		LastCycleDuration: nan,
		Up:                new(bool), // its socket is missing
	}
	return &Snapshot{Engines: []Engine{healthy, failed}}
}

// TestCollectGolden pins the exposition of fullSnapshot at both levels:
// testdata/full.prom is the detail level, testdata/lean.prom the default.
func TestCollectGolden(t *testing.T) {
	for golden, detail := range map[string]bool{"full.prom": true, "lean.prom": false} {
		t.Run(golden, func(t *testing.T) {
			c := NewCollector(staticSource{fullSnapshot()}, detail)
			golden := filepath.Join("testdata", golden)
			if *update {
				// Not testutil.CollectAndFormat: without metric names it
				// formats nothing.
				reg := prometheus.NewPedanticRegistry()
				reg.MustRegister(c)
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
				t.Fatalf("exposition differs from %s (go test -run TestCollectGolden -update rewrites it):\n%v", golden, err)
			}
		})
	}
}

// The golden file already pins this; the explicit counts say why a
// diff fails when NaN handling breaks.
func TestCollectOmitsNaN(t *testing.T) {
	c := NewCollector(staticSource{fullSnapshot()}, true)
	for name, want := range map[string]int{
		"layerprobe_overhead_ratio":                 27, // 28 overheads, one all-NaN
		"layerprobe_overhead_ci_low_ratio":          26, // and one more without interval
		"layerprobe_overhead_ci_high_ratio":         26,
		"layerprobe_iops":                           12, // 16 raw rows, 4 of them sync
		"layerprobe_latency_seconds":                47, // 16 rows x 3 percentiles, one NaN
		"layerprobe_cycle_duration_seconds":         2,  // steady and cold; the failed engine has none
		"layerprobe_last_success_timestamp_seconds": 2,
		"layerprobe_fsync_regression":               2,  // host is not exported
		"layerprobe_cycles_total":                   12, // 4 results pre-initialised per engine and mode; lab has no cold probe
		"layerprobe_copyup_latency_seconds":         3,  // one NaN
		"layerprobe_lookup_seconds":                 4,  // two operations on host and container
		"layerprobe_lookup_extra_seconds":           2,
		"layerprobe_lookup_extra_ci_low_seconds":    1, // dir_create's is withheld
		"layerprobe_copyup_cost_seconds_per_byte":   1,
		"layerprobe_backing_fs_reflink":             1, // lab has no answer
		"layerprobe_cycle_skips_total":              11,
		"layerprobe_engine_info":                    2,
		"layerprobe_host_arm_cgroup_joined":         1, // the failed engine never started its probe container
		"layerprobe_engine_up":                      2,
		"layerprobe_daily_budget_bytes":             1,
		"layerprobe_budget_used_bytes":              1,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}

func TestCollectLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(staticSource{fullSnapshot()}, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// The whole registry too: Go, process and build info series are
	// served on the same endpoint.
	problems, err = testutil.GatherAndLint(NewRegistry(staticSource{fullSnapshot()}, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("registry lint: %s: %s", p.Metric, p.Text)
	}
}

func TestHelpSaysCached(t *testing.T) {
	for _, d := range allDescs {
		s := d.String()
		if !strings.Contains(s, "Cached from the last completed measurement cycle, not measured at scrape time.") {
			t.Errorf("HELP does not say the value is cached: %s", s)
		}
	}
}

// One scrape must see one snapshot: reading the source twice could mix
// two cycles in one exposition.
func TestCollectReadsSnapshotOnce(t *testing.T) {
	src := &swapSource{}
	src.p.Store(fullSnapshot())
	c := NewCollector(src, true)
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("Collect called Snapshot %d times, want 1", n)
	}
	if len(ch) == 0 {
		t.Fatal("Collect sent no metrics")
	}
}

func TestCollectDoesNotModifySnapshot(t *testing.T) {
	snap := fullSnapshot()
	c := NewCollector(staticSource{snap}, true)
	testutil.CollectAndCount(c)
	e := snap.Engines[0]
	if len(e.CyclesTotal) != 2 || len(e.SkipsTotal) != 2 {
		t.Fatalf("Collect added pre-initialised counters to the snapshot's maps: %v %v", e.CyclesTotal, e.SkipsTotal)
	}
	if snap.Engines[1].CyclesTotal["ok"] != 0 || len(snap.Engines[1].CyclesTotal) != 1 {
		t.Fatalf("Collect modified the failed engine's map: %v", snap.Engines[1].CyclesTotal)
	}
}

func TestCollectEmpty(t *testing.T) {
	for name, src := range map[string]Source{
		"nil snapshot": staticSource{nil},
		"no engines":   staticSource{&Snapshot{}}, // what the agent publishes before it knows its engines
	} {
		t.Run(name, func(t *testing.T) {
			// Only the level, which is known before anything is measured.
			if n := testutil.CollectAndCount(NewCollector(src, true)); n != 1 {
				t.Fatalf("%d series from an empty snapshot, want 1 (layerprobe_metrics_detail)", n)
			}
		})
	}
}

// A label value Prometheus rejects (the daemon's data root is not UTF-8
// here) must cost that series only, not panic the scrape.
func TestCollectInvalidLabelValue(t *testing.T) {
	snap := fullSnapshot()
	snap.Engines[1].DataRoot = "/srv/\xff"
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(staticSource{snap}, true))
	mfs, err := reg.Gather()
	if err == nil {
		t.Fatal("Gather accepted an invalid UTF-8 label value")
	}
	var cycles int
	for _, mf := range mfs {
		if mf.GetName() == "layerprobe_cycles_total" {
			cycles = len(mf.GetMetric())
		}
	}
	if cycles != 12 {
		t.Fatalf("layerprobe_cycles_total has %d series after one bad label, want all 12", cycles)
	}
}

func ptr[T any](v T) *T { return &v }
