package measure_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/measure/measuretest"
)

func find(t *testing.T, results []measure.Result, target measure.Target, job measure.Workload) measure.Result {
	t.Helper()
	i := slices.IndexFunc(results, func(r measure.Result) bool { return r.Target == target && r.Workload == job })
	if i < 0 {
		t.Fatalf("no result for %s/%s in %+v", target, job, results)
	}
	return results[i]
}

func TestSummarize(t *testing.T) {
	const rounds = 8
	var samples []measure.Sample
	for r := 1; r <= rounds; r++ {
		for _, job := range measure.Workloads {
			h := measuretest.HostFig(r)
			if r == 3 && job == measure.RandWrite {
				h = measuretest.Fig{Failed: measure.ReasonTimeout, Detail: "killed after 3m"}
			}
			samples = append(samples, measuretest.Sample(r, measure.TargetHost, job, h))

			// container: 20% less throughput, 25% more latency, every round.
			c := measuretest.HostFig(r).Scaled(0.8, 1.25)
			if r == 5 && job == measure.RandWrite {
				c = measuretest.Fig{Failed: measure.ReasonNoSpace, Detail: "ENOSPC"}
			}
			if r == 2 {
				c.P99 = math.NaN() // fio did not report it this round
			}
			samples = append(samples, measuretest.Sample(r, measure.TargetContainer, job, c))
			samples = append(samples, measuretest.Sample(r, measure.TargetBind, job, measuretest.HostFig(r)))
		}
	}
	// Order must not matter: summaries pair by round, not by position.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })

	results := measure.Summarize(samples, 0.95)

	var order []string
	for _, r := range results {
		order = append(order, string(r.Target)+"/"+string(r.Workload))
	}
	wantOrder := []string{
		"host/seqwrite", "host/randwrite", "host/fsync", "host/smallfiles",
		"container/seqwrite", "container/randwrite", "container/fsync", "container/smallfiles",
		"bind/seqwrite", "bind/randwrite", "bind/fsync", "bind/smallfiles",
	}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("result order = %v, want %v", order, wantOrder)
	}

	t.Run("host has raw figures and no overhead", func(t *testing.T) {
		h := find(t, results, measure.TargetHost, measure.SeqWrite)
		if h.Overhead != nil {
			t.Errorf("host overhead = %v, want none", h.Overhead)
		}
		if h.RoundsOK != rounds || h.RoundsFailed != 0 {
			t.Errorf("host rounds = %d/%d, want %d/0", h.RoundsOK, h.RoundsFailed, rounds)
		}
		// Scales over rounds 1..8 are 3 5 2 4 1 3 5 2: sorted 1 2 2 3 3 4 5 5, median 3.
		if h.Raw.IOPS != 3000 || h.Raw.BandwidthBytes != 300e6 {
			t.Errorf("host raw iops, bandwidth = %v, %v; want 3000, 3e8 (read + write)", h.Raw.IOPS, h.Raw.BandwidthBytes)
		}
		if !math.IsNaN(h.Raw.FsyncP99) {
			t.Errorf("seqwrite fsync_p99 = %v, want NaN (fsync job only)", h.Raw.FsyncP99)
		}
		hf := find(t, results, measure.TargetHost, measure.Fsync)
		// fsync99 = 8 ms / scale: sorted scales 1 2 2 3 | 3 4 5 5 -> (8/3 + 8/3)/2 ms.
		if want := 8e-3 / 3; math.Abs(hf.Raw.FsyncP99-want) > 1e-15 {
			t.Errorf("host fsync p99 = %v, want %v", hf.Raw.FsyncP99, want)
		}
	})

	t.Run("failures are counted and listed", func(t *testing.T) {
		c := find(t, results, measure.TargetContainer, measure.RandWrite)
		if c.RoundsOK != rounds-1 || c.RoundsFailed != 1 {
			t.Errorf("container randwrite rounds = %d/%d, want %d/1", c.RoundsOK, c.RoundsFailed, rounds-1)
		}
		want := []measure.FailedRound{{Round: 5, Reason: "no_space", Message: "ENOSPC"}}
		if !slices.Equal(c.Failures, want) {
			t.Errorf("failures = %+v, want %+v", c.Failures, want)
		}
		h := find(t, results, measure.TargetHost, measure.RandWrite)
		if h.RoundsFailed != 1 || len(h.Failures) != 1 || h.Failures[0].Reason != "timeout" {
			t.Errorf("host randwrite = %+v, want one timeout failure", h)
		}
	})

	t.Run("overhead pairs by round", func(t *testing.T) {
		for _, job := range measure.Workloads {
			c := find(t, results, measure.TargetContainer, job)
			wantMetrics := []string{measure.MetricIOPS, measure.MetricBandwidth, measure.MetricLatencyP50, measure.MetricLatencyP99}
			if job == measure.Fsync {
				wantMetrics = append(wantMetrics, measure.MetricFsyncP99)
			}
			for _, m := range wantMetrics {
				o, ok := c.Overhead[m]
				if !ok {
					t.Errorf("%s: no %s overhead", job, m)
					continue
				}
				want := 0.2 // throughput down 20%
				if measure.MetricDirection(m) != measure.MetricDirection(measure.MetricIOPS) {
					want = 0.25 // latency up 25%
				}
				if math.Abs(o.Ratio-want) > 1e-9 || math.Abs(o.CILow-want) > 1e-9 || math.Abs(o.CIHigh-want) > 1e-9 {
					t.Errorf("%s %s: overhead %+v, want exactly %v in every round", job, m, o, want)
				}
			}
			if len(c.Overhead) != len(wantMetrics) {
				t.Errorf("%s: overhead metrics %v, want %v", job, c.Overhead, wantMetrics)
			}
			b := find(t, results, measure.TargetBind, job)
			if o := b.Overhead[measure.HeadlineMetric(job)]; o.Ratio != 0 || o.PercentOfHost != 100 {
				t.Errorf("bind %s identical to host: overhead %+v, want 0 / 100%%", job, o)
			}
		}
	})

	t.Run("round counts of pairs", func(t *testing.T) {
		c := find(t, results, measure.TargetContainer, measure.RandWrite)
		// Host round 3 and container round 5 failed: 6 pairs. Round 2 has
		// no container p99: 5 pairs for latency_p99.
		if n := c.Overhead[measure.MetricIOPS].N; n != 6 {
			t.Errorf("randwrite iops pairs = %d, want 6", n)
		}
		if n := c.Overhead[measure.MetricLatencyP99].N; n != 5 {
			t.Errorf("randwrite latency_p99 pairs = %d, want 5 (NaN round dropped)", n)
		}
		if n := c.Overhead[measure.MetricLatencyP50].N; n != 6 {
			t.Errorf("randwrite latency_p50 pairs = %d, want 6", n)
		}
	})

	t.Run("NaN does not poison medians", func(t *testing.T) {
		c := find(t, results, measure.TargetContainer, measure.SeqWrite)
		// container p99 = 1.25·4 ms / scale over rounds without round 2
		// (scale 5): scales 3 2 4 1 3 5 2 -> sorted 1 2 2 3 3 4 5, median 3.
		if want := 1.25 * 4e-3 / 3; math.Abs(c.Raw.LatencyP99-want) > 1e-15 {
			t.Errorf("container p99 median = %v, want %v", c.Raw.LatencyP99, want)
		}
	})
}

func TestSummarizeWithoutHost(t *testing.T) {
	samples := []measure.Sample{
		measuretest.Sample(1, measure.TargetContainer, measure.SeqWrite, measuretest.HostFig(1)),
		measuretest.Sample(2, measure.TargetContainer, measure.SeqWrite, measuretest.HostFig(2)),
		measuretest.Sample(1, "tmpfs", measure.SeqWrite, measuretest.HostFig(1)),
		measuretest.Sample(1, measure.TargetVolume, measure.SeqWrite, measuretest.HostFig(1)),
	}
	results := measure.Summarize(samples, 0.95)
	if len(results) != 3 || results[0].Target != measure.TargetContainer || results[1].Target != measure.TargetVolume || results[2].Target != "tmpfs" {
		t.Fatalf("results %+v, want container, volume, then unknown target tmpfs", results)
	}
	o, ok := results[0].Overhead[measure.MetricBandwidth]
	if !ok || o.N != 0 || !math.IsNaN(o.Ratio) || !math.IsNaN(o.PercentOfHost) {
		t.Errorf("overhead without host = %+v (present %v), want present with N 0 and NaN figures", o, ok)
	}
	if got := measure.Summarize(nil, 0.95); len(got) != 0 {
		t.Errorf("Summarize(nil) = %v, want empty", got)
	}
}

func TestMetricValue(t *testing.T) {
	r := measure.JobResult{
		Workload: measure.Fsync,
		Read:     measure.Op{IOPS: 10, BandwidthBytes: 4096 * 10},
		Write:    measure.Op{IOPS: 30, BandwidthBytes: 4096 * 30, LatencyP50Sec: 1e-4, LatencyP99Sec: 2e-3},
		Sync:     measure.Op{LatencyP99Sec: 5e-3},
	}
	want := map[string]float64{
		measure.MetricIOPS: 40, measure.MetricBandwidth: 4096 * 40, measure.MetricLatencyP50: 1e-4, measure.MetricLatencyP99: 2e-3, measure.MetricFsyncP99: 5e-3,
	}
	for _, m := range measure.Metrics {
		if got := measure.MetricValue(m, r); got != want[m] {
			t.Errorf("MetricValue(%s) = %v, want %v", m, got, want[m])
		}
	}
	nonFsync := r
	nonFsync.Workload = measure.RandWrite
	if got := measure.MetricValue(measure.MetricFsyncP99, nonFsync); !math.IsNaN(got) {
		t.Errorf("fsync_p99 of a randwrite job = %v, want NaN", got)
	}
	failed := r
	failed.Failure = &measure.Failure{Reason: measure.ReasonFioError, Message: "boom"}
	for _, m := range measure.Metrics {
		if got := measure.MetricValue(m, failed); !math.IsNaN(got) {
			t.Errorf("MetricValue(%s) of a failed job = %v, want NaN", m, got)
		}
	}
	if got := measure.MetricValue("nope", r); !math.IsNaN(got) {
		t.Errorf("unknown metric = %v, want NaN", got)
	}
}

func TestMetricHelpers(t *testing.T) {
	for _, m := range measure.Metrics {
		measure.MetricDirection(m) // must not panic for any exported metric
	}
	for _, job := range measure.Workloads {
		if !slices.Contains(measure.MetricsFor(job), measure.HeadlineMetric(job)) {
			t.Errorf("headline metric %s of %s is not among its metrics %v", measure.HeadlineMetric(job), job, measure.MetricsFor(job))
		}
	}
	if slices.Contains(measure.MetricsFor(measure.SeqWrite), measure.MetricFsyncP99) || !slices.Contains(measure.MetricsFor(measure.Fsync), measure.MetricFsyncP99) {
		t.Errorf("fsync_p99 must apply to the fsync job only")
	}
	// measure.MetricsFor must return a copy: callers may append.
	a := measure.MetricsFor(measure.Fsync)
	a[0] = "changed"
	if measure.Metrics[0] != measure.MetricIOPS {
		t.Errorf("MetricsFor exposed the package's slice")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("MetricDirection of an unknown metric did not panic")
		}
	}()
	measure.MetricDirection("nope")
}

// TestSummarizePoolsRawFigures: throughput is I/O over the rounds' time
// together, percentiles come from the pooled histograms, and a result
// without a histogram falls back to the median of the rounds' own.
func TestSummarizePoolsRawFigures(t *testing.T) {
	h1 := measure.NewHistogram(map[int64]uint64{1000: 99, 9000: 1})
	h2 := measure.NewHistogram(map[int64]uint64{1000: 50, 3000: 50})
	nan := math.NaN()
	jr := func(ios int64, iops float64, h measure.Histogram) measure.JobResult {
		return measure.JobResult{Workload: measure.RandWrite,
			Write: measure.Op{IOs: ios, IOPS: iops, Bytes: ios * 4096, BandwidthBytes: iops * 4096,
				LatencyP50Sec: h.Quantile(0.5), LatencyP99Sec: h.Quantile(0.99), LatencyMeanSec: nan, LatencyP999Sec: nan, Histogram: &h},
			Read: measure.Op{LatencyMeanSec: nan, LatencyP50Sec: nan, LatencyP99Sec: nan, LatencyP999Sec: nan},
			Sync: measure.Op{LatencyMeanSec: nan, LatencyP50Sec: nan, LatencyP99Sec: nan, LatencyP999Sec: nan}}
	}
	// 1000 I/Os in 1 s and 1000 I/Os in 0.25 s: 2000 I/Os in 1.25 s.
	samples := []measure.Sample{
		{Round: 1, Target: measure.TargetHost, JobResult: jr(1000, 1000, h1)},
		{Round: 2, Target: measure.TargetHost, JobResult: jr(1000, 4000, h2)},
	}
	raw := measure.Summarize(samples, 0.95)[0].Raw
	if math.Abs(raw.IOPS-1600) > 1e-9 || math.Abs(raw.BandwidthBytes-1600*4096) > 1e-6 {
		t.Errorf("pooled IOPS %v, bandwidth %v; want 1600 and 1600·4096", raw.IOPS, raw.BandwidthBytes)
	}
	// Pooled: 149 samples at 1 µs of 200, 50 at 3 µs, 1 at 9 µs.
	if raw.LatencyP50 != 1e-6 || raw.LatencyP99 != 3e-6 {
		t.Errorf("pooled p50 %v p99 %v, want 1e-6 and 3e-6", raw.LatencyP50, raw.LatencyP99)
	}
	// Without a histogram: the median of the rounds' own percentiles.
	noHist := jr(1000, 2000, h2)
	noHist.Write.Histogram = nil
	samples = append(samples, measure.Sample{Round: 3, Target: measure.TargetHost, JobResult: noHist})
	raw = measure.Summarize(samples, 0.95)[0].Raw
	if want := median3(h1.Quantile(0.99), h2.Quantile(0.99), h2.Quantile(0.99)); raw.LatencyP99 != want {
		t.Errorf("fallback p99 %v, want the median of the rounds' %v", raw.LatencyP99, want)
	}
}

func median3(a, b, c float64) float64 {
	return max(min(a, b), min(max(a, b), c))
}

// TestSummarizeWindow: an agent's published overheads rest on the last
// window rounds of each workload, the stored ones and the cycle's, even
// when the workloads' rounds are numbered apart; a window of 0 takes them
// all, as a run does. The caller's samples are left as they were.
func TestSummarizeWindow(t *testing.T) {
	var prior, current []measure.Sample
	add := func(to *[]measure.Sample, r int, w measure.Workload) {
		*to = append(*to, measuretest.Sample(r, measure.TargetHost, w, measuretest.HostFig(r)),
			measuretest.Sample(r, measure.TargetContainer, w, measuretest.HostFig(r).Scaled(0.8, 1.25)))
	}
	for r := 1; r <= 10; r++ {
		add(&prior, r, measure.SeqWrite)
		add(&prior, 100+r, measure.Fsync)
	}
	for r := 11; r <= 14; r++ {
		add(&current, r, measure.SeqWrite)
	}
	before := slices.Clone(prior)
	got := measure.SummarizeWindow(prior, current, 6, 0.95)
	if n := find(t, got, measure.TargetContainer, measure.SeqWrite).RoundsOK; n != 6 {
		t.Errorf("seqwrite over a window of 6: %d rounds", n)
	}
	if n := find(t, got, measure.TargetContainer, measure.Fsync).RoundsOK; n != 6 {
		t.Errorf("fsync over a window of 6: %d rounds", n)
	}
	if !slices.EqualFunc(prior, before, func(a, b measure.Sample) bool { return a.Round == b.Round && a.Workload == b.Workload }) {
		t.Error("the window changed the caller's samples")
	}
	all := measure.SummarizeWindow(nil, append(slices.Clone(prior), current...), 0, 0.95)
	if n := find(t, all, measure.TargetContainer, measure.SeqWrite).RoundsOK; n != 14 {
		t.Errorf("seqwrite without a window: %d rounds, want all 14", n)
	}
}
