package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
)

// fig describes the figures of one synthetic sample.
type fig struct {
	iops, bw     float64 // split half read, half write to check the sums
	p50, p99     float64 // write latency, seconds
	fsync99      float64 // sync latency, seconds
	failed       fio.Reason
	failedDetail string
}

func mkSample(round int, target string, job fio.Workload, f fig) Sample {
	s := Sample{
		Round: round, Order: 1, Target: target,
		StartedAt:       time.Date(2026, 11, 22, 3, 0, round, 0, time.UTC),
		DurationSeconds: 1.5,
		Result: fio.Result{
			Workload:   job,
			FioVersion: "fio-3.33",
			Read:       fio.Op{IOPS: f.iops / 2, BandwidthBytes: f.bw / 2, LatencyP50Sec: math.NaN(), LatencyP99Sec: math.NaN()},
			Write:      fio.Op{IOPS: f.iops / 2, BandwidthBytes: f.bw / 2, LatencyP50Sec: f.p50, LatencyP99Sec: f.p99},
			Sync:       fio.Op{LatencyP99Sec: f.fsync99},
		},
	}
	if f.failed != "" {
		s.Result = fio.Result{Workload: job, Failure: &fio.Failure{Reason: f.failed, Message: f.failedDetail}}
	}
	return s
}

// hostFig gives the host a very different load in every round, so that any
// pairing other than by round shows up in the ratios.
func hostFig(round int) fig {
	scale := float64(1 + (round*7)%5) // 1..5, shuffled over rounds
	return fig{iops: 1000 * scale, bw: 100e6 * scale, p50: 1e-3 / scale, p99: 4e-3 / scale, fsync99: 8e-3 / scale}
}

func scaled(f fig, speed, slowdown float64) fig {
	return fig{iops: f.iops * speed, bw: f.bw * speed, p50: f.p50 * slowdown, p99: f.p99 * slowdown, fsync99: f.fsync99 * slowdown}
}

func find(t *testing.T, results []Result, target string, job fio.Workload) Result {
	t.Helper()
	i := slices.IndexFunc(results, func(r Result) bool { return r.Target == target && r.Job == string(job) })
	if i < 0 {
		t.Fatalf("no result for %s/%s in %+v", target, job, results)
	}
	return results[i]
}

func TestSummarize(t *testing.T) {
	const rounds = 8
	var samples []Sample
	for r := 1; r <= rounds; r++ {
		for _, job := range fio.Workloads {
			h := hostFig(r)
			if r == 3 && job == fio.RandWrite {
				h = fig{failed: fio.ReasonTimeout, failedDetail: "killed after 3m"}
			}
			samples = append(samples, mkSample(r, TargetHost, job, h))

			// container: 20% less throughput, 25% more latency, every round.
			c := scaled(hostFig(r), 0.8, 1.25)
			if r == 5 && job == fio.RandWrite {
				c = fig{failed: fio.ReasonNoSpace, failedDetail: "ENOSPC"}
			}
			if r == 2 {
				c.p99 = math.NaN() // fio did not report it this round
			}
			samples = append(samples, mkSample(r, TargetContainer, job, c))
			samples = append(samples, mkSample(r, TargetBind, job, hostFig(r)))
		}
	}
	// Order must not matter: summaries pair by round, not by position.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(samples), func(i, j int) { samples[i], samples[j] = samples[j], samples[i] })

	results := Summarize(samples, 0.95)

	var order []string
	for _, r := range results {
		order = append(order, r.Target+"/"+r.Job)
	}
	wantOrder := []string{
		"host/seqwrite", "host/randwrite", "host/fsync",
		"container/seqwrite", "container/randwrite", "container/fsync",
		"bind/seqwrite", "bind/randwrite", "bind/fsync",
	}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("result order = %v, want %v", order, wantOrder)
	}

	t.Run("host has raw figures and no overhead", func(t *testing.T) {
		h := find(t, results, TargetHost, fio.SeqWrite)
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
		hf := find(t, results, TargetHost, fio.Fsync)
		// fsync99 = 8 ms / scale: sorted scales 1 2 2 3 | 3 4 5 5 -> (8/3 + 8/3)/2 ms.
		if want := 8e-3 / 3; math.Abs(hf.Raw.FsyncP99-want) > 1e-15 {
			t.Errorf("host fsync p99 = %v, want %v", hf.Raw.FsyncP99, want)
		}
	})

	t.Run("failures are counted and listed", func(t *testing.T) {
		c := find(t, results, TargetContainer, fio.RandWrite)
		if c.RoundsOK != rounds-1 || c.RoundsFailed != 1 {
			t.Errorf("container randwrite rounds = %d/%d, want %d/1", c.RoundsOK, c.RoundsFailed, rounds-1)
		}
		want := []Failure{{Round: 5, Reason: "no_space", Message: "ENOSPC"}}
		if !slices.Equal(c.Failures, want) {
			t.Errorf("failures = %+v, want %+v", c.Failures, want)
		}
		h := find(t, results, TargetHost, fio.RandWrite)
		if h.RoundsFailed != 1 || len(h.Failures) != 1 || h.Failures[0].Reason != "timeout" {
			t.Errorf("host randwrite = %+v, want one timeout failure", h)
		}
	})

	t.Run("overhead pairs by round", func(t *testing.T) {
		for _, job := range fio.Workloads {
			c := find(t, results, TargetContainer, job)
			wantMetrics := []string{MetricIOPS, MetricBandwidth, MetricLatencyP50, MetricLatencyP99}
			if job == fio.Fsync {
				wantMetrics = append(wantMetrics, MetricFsyncP99)
			}
			for _, m := range wantMetrics {
				o, ok := c.Overhead[m]
				if !ok {
					t.Errorf("%s: no %s overhead", job, m)
					continue
				}
				want := 0.2 // throughput down 20%
				if MetricDirection(m) != MetricDirection(MetricIOPS) {
					want = 0.25 // latency up 25%
				}
				if math.Abs(o.Ratio-want) > 1e-9 || math.Abs(o.CILow-want) > 1e-9 || math.Abs(o.CIHigh-want) > 1e-9 {
					t.Errorf("%s %s: overhead %+v, want exactly %v in every round", job, m, o, want)
				}
			}
			if len(c.Overhead) != len(wantMetrics) {
				t.Errorf("%s: overhead metrics %v, want %v", job, c.Overhead, wantMetrics)
			}
			b := find(t, results, TargetBind, job)
			if o := b.Overhead[HeadlineMetric(job)]; o.Ratio != 0 || o.PercentOfHost != 100 {
				t.Errorf("bind %s identical to host: overhead %+v, want 0 / 100%%", job, o)
			}
		}
	})

	t.Run("round counts of pairs", func(t *testing.T) {
		c := find(t, results, TargetContainer, fio.RandWrite)
		// Host round 3 and container round 5 failed: 6 pairs. Round 2 has
		// no container p99: 5 pairs for latency_p99.
		if n := c.Overhead[MetricIOPS].N; n != 6 {
			t.Errorf("randwrite iops pairs = %d, want 6", n)
		}
		if n := c.Overhead[MetricLatencyP99].N; n != 5 {
			t.Errorf("randwrite latency_p99 pairs = %d, want 5 (NaN round dropped)", n)
		}
		if n := c.Overhead[MetricLatencyP50].N; n != 6 {
			t.Errorf("randwrite latency_p50 pairs = %d, want 6", n)
		}
	})

	t.Run("NaN does not poison medians", func(t *testing.T) {
		c := find(t, results, TargetContainer, fio.SeqWrite)
		// container p99 = 1.25·4 ms / scale over rounds without round 2
		// (scale 5): scales 3 2 4 1 3 5 2 -> sorted 1 2 2 3 3 4 5, median 3.
		if want := 1.25 * 4e-3 / 3; math.Abs(c.Raw.LatencyP99-want) > 1e-15 {
			t.Errorf("container p99 median = %v, want %v", c.Raw.LatencyP99, want)
		}
	})
}

func TestSummarizeWithoutHost(t *testing.T) {
	samples := []Sample{
		mkSample(1, TargetContainer, fio.SeqWrite, hostFig(1)),
		mkSample(2, TargetContainer, fio.SeqWrite, hostFig(2)),
		mkSample(1, "tmpfs", fio.SeqWrite, hostFig(1)),
		mkSample(1, TargetVolume, fio.SeqWrite, hostFig(1)),
	}
	results := Summarize(samples, 0.95)
	if len(results) != 3 || results[0].Target != TargetContainer || results[1].Target != TargetVolume || results[2].Target != "tmpfs" {
		t.Fatalf("results %+v, want container, volume, then unknown target tmpfs", results)
	}
	o, ok := results[0].Overhead[MetricBandwidth]
	if !ok || o.N != 0 || !math.IsNaN(o.Ratio) || !math.IsNaN(o.PercentOfHost) {
		t.Errorf("overhead without host = %+v (present %v), want present with N 0 and NaN figures", o, ok)
	}
	if got := Summarize(nil, 0.95); len(got) != 0 {
		t.Errorf("Summarize(nil) = %v, want empty", got)
	}
}

func TestMetricValue(t *testing.T) {
	r := fio.Result{
		Workload: fio.Fsync,
		Read:     fio.Op{IOPS: 10, BandwidthBytes: 4096 * 10},
		Write:    fio.Op{IOPS: 30, BandwidthBytes: 4096 * 30, LatencyP50Sec: 1e-4, LatencyP99Sec: 2e-3},
		Sync:     fio.Op{LatencyP99Sec: 5e-3},
	}
	want := map[string]float64{
		MetricIOPS: 40, MetricBandwidth: 4096 * 40, MetricLatencyP50: 1e-4, MetricLatencyP99: 2e-3, MetricFsyncP99: 5e-3,
	}
	for _, m := range Metrics {
		if got := MetricValue(m, r); got != want[m] {
			t.Errorf("MetricValue(%s) = %v, want %v", m, got, want[m])
		}
	}
	nonFsync := r
	nonFsync.Workload = fio.RandWrite
	if got := MetricValue(MetricFsyncP99, nonFsync); !math.IsNaN(got) {
		t.Errorf("fsync_p99 of a randwrite job = %v, want NaN", got)
	}
	failed := r
	failed.Failure = &fio.Failure{Reason: fio.ReasonFioError, Message: "boom"}
	for _, m := range Metrics {
		if got := MetricValue(m, failed); !math.IsNaN(got) {
			t.Errorf("MetricValue(%s) of a failed job = %v, want NaN", m, got)
		}
	}
	if got := MetricValue("nope", r); !math.IsNaN(got) {
		t.Errorf("unknown metric = %v, want NaN", got)
	}
}

func TestMetricHelpers(t *testing.T) {
	for _, m := range Metrics {
		MetricDirection(m) // must not panic for any exported metric
	}
	for _, job := range fio.Workloads {
		if !slices.Contains(MetricsFor(job), HeadlineMetric(job)) {
			t.Errorf("headline metric %s of %s is not among its metrics %v", HeadlineMetric(job), job, MetricsFor(job))
		}
	}
	if slices.Contains(MetricsFor(fio.SeqWrite), MetricFsyncP99) || !slices.Contains(MetricsFor(fio.Fsync), MetricFsyncP99) {
		t.Errorf("fsync_p99 must apply to the fsync job only")
	}
	// MetricsFor must return a copy: callers may append.
	a := MetricsFor(fio.Fsync)
	a[0] = "changed"
	if Metrics[0] != MetricIOPS {
		t.Errorf("MetricsFor exposed the package's slice")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("MetricDirection of an unknown metric did not panic")
		}
	}()
	MetricDirection("nope")
}
