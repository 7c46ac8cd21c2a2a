package metrics

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// budgetEngine is the engine of docs/metrics.md's series budget, built as
// the agent publishes it: four targets and four workloads with every
// overhead metric and interval, every raw figure of a steady and a cold
// cycle, the cold probe's copy-up, start-up and lookup figures, a daily
// budget, and an advisor pass over 50 containers that are all databases in
// their layer, topN of them with series of their own.
func budgetEngine(name string, topN int) Engine {
	e := Engine{
		Name: name, EngineFacts: measure.EngineFacts{Runtime: "docker", Driver: "overlay2", BackingFS: "extfs",
			EngineVersion: "29.1.3", DataRoot: "/var/lib/docker", FioVersion: "fio-3.33", HostArmCgroup: "joined"},
		Up:                new(true),
		Regression:        map[measure.Target]bool{},
		CyclesTotal:       map[string]float64{"ok": 1},
		SkipsTotal:        map[string]float64{"host_locked": 1},
		WrittenBytesTotal: map[measure.Target]float64{},
		LastCycleDuration: 300, LastSuccess: time.Unix(1e9, 0),
		BudgetBytes: 4 << 30, BudgetUsedBytes: 1 << 30,
		ColdCyclesTotal: map[string]float64{"ok": 1}, ColdLastCycleDuration: 60, ColdLastSuccess: time.Unix(1e9, 0),
		CopyUpCostPerByte: 1e-9, Reflink: new(false),
		Startup: &Startup{SecondsPerByte: 1e-9, BytesPerImageByte: 1},
	}
	lat := map[string]float64{"50": 1e-4, "99": 1e-3, "99.9": 1e-2}
	for _, t := range measure.Targets {
		e.WrittenBytesTotal[t] = 1 << 30
		if t != measure.TargetHost {
			e.Regression[t] = false
		}
		for _, w := range measure.Workloads {
			if t != measure.TargetHost {
				for _, m := range measure.MetricsFor(w) {
					e.Overheads = append(e.Overheads, Overhead{Target: t, Workload: w, Metric: m, Mode: measure.ModeSteady, Ratio: 0.1, CILow: 0.05, CIHigh: 0.15})
				}
			}
			ops := []string{"write"}
			if w == measure.Fsync {
				ops = []string{"read", "write", "sync"}
			}
			for _, op := range ops {
				r := Raw{Target: t, Workload: w, Op: op, Mode: measure.ModeSteady, IOPS: 1000, BandwidthBytes: 4e6, Latency: lat}
				if op == "sync" {
					r.IOPS, r.BandwidthBytes = math.NaN(), math.NaN()
				}
				e.Raw = append(e.Raw, r)
			}
		}
	}
	// The cold probe: fsync on the container (overheads) and host and
	// container (raw figures).
	for _, m := range measure.MetricsFor(measure.Fsync) {
		e.Overheads = append(e.Overheads, Overhead{Target: measure.TargetContainer, Workload: measure.Fsync, Metric: m, Mode: measure.ModeCold, Ratio: 0.5, CILow: 0.3, CIHigh: 0.8})
	}
	for _, t := range []measure.Target{measure.TargetHost, measure.TargetContainer} {
		for _, op := range []string{"read", "write", "sync"} {
			r := Raw{Target: t, Workload: measure.Fsync, Op: op, Mode: measure.ModeCold, IOPS: 500, BandwidthBytes: 2e6, Latency: lat}
			if op == "sync" {
				r.IOPS, r.BandwidthBytes = math.NaN(), math.NaN()
			}
			e.Raw = append(e.Raw, r)
		}
		for _, size := range []int64{1 << 20, 16 << 20, 64 << 20} {
			e.CopyUp = append(e.CopyUp, CopyUp{Target: t, SizeBytes: size, Seconds: 0.01})
		}
	}
	for _, size := range []int64{10 << 20, 100 << 20, 500 << 20} {
		e.Startup.Sizes = append(e.Startup.Sizes, measure.StartupSize{ImageBytes: size, Rounds: 6, Seconds: 0.5, DeviceBytes: 1 << 20})
	}
	for _, op := range []string{"walk", "dir_create"} {
		e.Lookup = append(e.Lookup, measure.LookupSummary{Op: op, Rounds: 6, HostSeconds: 0.01, ContainerSeconds: 0.02, ExtraSeconds: 0.01, ExtraCILow: 0.005, ExtraCIHigh: 0.015})
	}
	a := &Advisor{At: time.Unix(1e9, 0), Containers: 50, DatabasesInLayer: 50, PassSeconds: 1, PassCPUSeconds: 0.5, PassReadBytes: 1 << 20}
	for i := range 50 {
		if i < topN {
			a.Top = append(a.Top, ContainerSeries{Name: fmt.Sprintf("db-%02d", i), Image: "postgres:16", LayerBytes: float64(100 - i), BlockBytes: float64(1000 - i), Database: "postgres"})
		} else {
			a.RestContainers++
			a.RestLayerBytes += float64(100 - i)
		}
	}
	e.Advisor = a
	return e
}

// perEngine counts the series of each engine label in one collection.
func perEngine(t *testing.T, c prometheus.Collector) (map[string]int, map[string]*dto.MetricFamily) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out, byName := map[string]int{}, map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "engine" {
					out[lp.GetValue()]++
				}
			}
		}
	}
	return out, byName
}

// TestSeriesPerEngine counts an engine's series at both levels with the
// budget's worst case (docs/metrics.md, Series budget): the lean default
// stays within 150 per engine, and detail is what the collector exposed
// before the levels existed.
func TestSeriesPerEngine(t *testing.T) {
	const topN = 10
	snap := &Snapshot{Engines: []Engine{budgetEngine("e0", topN)}}
	lean, leanMF := perEngine(t, NewCollector(staticSource{snap}, false))
	detail, detailMF := perEngine(t, NewCollector(staticSource{snap}, true))
	t.Logf("series per engine: lean %d, detail %d", lean["e0"], detail["e0"])
	if lean["e0"] > 150 {
		t.Errorf("lean: %d series per engine, want at most 150", lean["e0"])
	}
	// Detail: 4 × 3 × 3 + 4 × 3 smallfiles/fsync... counted family by
	// family below; the total is their sum.
	want := map[string][2]int{ // family: lean, detail
		// 3 targets × 4 workloads, the headline metric only / every metric (4, fsync 5).
		"layerprobe_overhead_ratio":         {12 + 1, 3*17 + 5},
		"layerprobe_overhead_ci_low_ratio":  {12 + 1, 3*17 + 5},
		"layerprobe_overhead_ci_high_ratio": {12 + 1, 3*17 + 5},
		// Raw: lean 4 targets × the headline figure; cold: fsync p99 on host and container.
		"layerprobe_bandwidth_bytes_per_second": {4, 4*5 + 4},
		"layerprobe_iops":                       {4 + 4, 4*5 + 4},
		"layerprobe_latency_seconds":            {4 + 2, 4*6*3 + 6*3},
		// The advisor: min(3, top_n) containers in lean, top_n in detail.
		"layerprobe_container_layer_written_bytes":       {3 + 1, topN + 1},
		"layerprobe_container_block_written_bytes_total": {3, topN},
		"layerprobe_container_database_in_layer":         {3, topN},
		// Kept whole at both levels.
		"layerprobe_copyup_latency_seconds": {6, 6},
		"layerprobe_lookup_seconds":         {4, 4},
		"layerprobe_startup_seconds":        {3, 3},
		"layerprobe_fsync_regression":       {3, 3},
		"layerprobe_cycles_total":           {8, 8},
		"layerprobe_written_bytes_total":    {4, 4},
	}
	for name, w := range want {
		for i, mf := range []map[string]*dto.MetricFamily{leanMF, detailMF} {
			got := 0
			if f := mf[name]; f != nil {
				got = len(f.GetMetric())
			}
			if got != w[i] {
				t.Errorf("%s: %d series at %s, want %d", name, got, []string{"lean", "detail"}[i], w[i])
			}
		}
	}
	// The _other sum holds what lean leaves out: containers 3..49.
	for _, m := range leanMF["layerprobe_container_layer_written_bytes"].GetMetric() {
		if labelOf(m, "container") == OtherContainers {
			if want := float64(50*100 - 49*50/2 - (100 + 99 + 98)); m.GetGauge().GetValue() != want {
				t.Errorf("lean _other layer bytes %v, want %v (every container beyond the top 3)", m.GetGauge().GetValue(), want)
			}
		}
	}
	// Lean keeps each workload's headline raw figure in its data direction.
	for _, m := range leanMF["layerprobe_latency_seconds"].GetMetric() {
		if labelOf(m, "op") != "sync" || labelOf(m, "percentile") != "99" || labelOf(m, "workload") != "fsync" {
			t.Errorf("lean latency series %v: want fsync's sync p99 only", m.GetLabel())
		}
	}
	for _, m := range leanMF["layerprobe_bandwidth_bytes_per_second"].GetMetric() {
		if labelOf(m, "workload") != "seqwrite" || labelOf(m, "op") != "write" {
			t.Errorf("lean bandwidth series %v: want seqwrite's writes only", m.GetLabel())
		}
	}
	for _, m := range leanMF["layerprobe_iops"].GetMetric() {
		if w := labelOf(m, "workload"); (w != "randwrite" && w != "smallfiles") || labelOf(m, "op") != "write" {
			t.Errorf("lean iops series %v: want randwrite's and smallfiles' writes only", m.GetLabel())
		}
	}
	for _, m := range leanMF["layerprobe_overhead_ratio"].GetMetric() {
		if w := measure.Workload(labelOf(m, "workload")); labelOf(m, "metric") != measure.HeadlineMetric(w) {
			t.Errorf("lean overhead series %v: not the headline of %s", m.GetLabel(), w)
		}
	}
	// The level itself.
	for i, mf := range []map[string]*dto.MetricFamily{leanMF, detailMF} {
		f := mf["layerprobe_metrics_detail"]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != float64(i) {
			t.Errorf("layerprobe_metrics_detail at %s: %v, want one series of %d", []string{"lean", "detail"}[i], f, i)
		}
	}
	if testing.Verbose() {
		var b strings.Builder
		for name, f := range leanMF {
			fmt.Fprintf(&b, "  %s %d\n", name, len(f.GetMetric()))
		}
		t.Logf("lean families:\n%s", b.String())
	}
}

// A top_n below LeanTopN wins at the lean level too, and lean never
// changes the snapshot concurrent scrapes read.
func TestLeanTopN(t *testing.T) {
	e := budgetEngine("e0", 2)
	snap := &Snapshot{Engines: []Engine{e}}
	if n := testutil.CollectAndCount(NewCollector(staticSource{snap}, false), "layerprobe_container_block_written_bytes_total"); n != 2 {
		t.Errorf("top_n 2, lean: %d block series, want 2", n)
	}
	e = budgetEngine("e0", 10)
	snap = &Snapshot{Engines: []Engine{e}}
	testutil.CollectAndCount(NewCollector(staticSource{snap}, false))
	if a := snap.Engines[0].Advisor; len(a.Top) != 10 || a.RestContainers != 40 {
		t.Errorf("lean collection changed the snapshot's advisor: %d top, %d rest", len(a.Top), a.RestContainers)
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}
