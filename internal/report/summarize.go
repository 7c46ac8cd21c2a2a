package report

import (
	"cmp"
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// Metric names: keys of Result.Overhead, and the `metric` label of the
// layerprobe_overhead_* series.
const (
	MetricIOPS       = "iops"        // read + write IOPS
	MetricBandwidth  = "bandwidth"   // read + write bytes per second
	MetricLatencyP50 = "latency_p50" // write completion latency, median
	MetricLatencyP99 = "latency_p99" // write completion latency, 99th percentile
	MetricFsyncP99   = "fsync_p99"   // fsync latency, 99th percentile (fsync job only)
)

// Metrics lists every metric in display order.
var Metrics = []string{MetricIOPS, MetricBandwidth, MetricLatencyP50, MetricLatencyP99, MetricFsyncP99}

// MetricsFor returns the metrics that apply to a job: fsync_p99 only means
// something for the fsync job, whose every write is followed by an fsync.
func MetricsFor(job fio.Workload) []string {
	if job == fio.Fsync {
		return slices.Clone(Metrics)
	}
	return []string{MetricIOPS, MetricBandwidth, MetricLatencyP50, MetricLatencyP99}
}

// MetricDirection says whether a higher value of metric is better
// (throughput) or worse (latency). It panics on an unknown metric name,
// which is a programming error.
func MetricDirection(metric string) stats.Direction {
	switch metric {
	case MetricIOPS, MetricBandwidth:
		return stats.HigherIsBetter
	case MetricLatencyP50, MetricLatencyP99, MetricFsyncP99:
		return stats.LowerIsBetter
	}
	panic("report: unknown metric " + metric)
}

// HeadlineMetric is the metric the table's "% of host" column shows for a
// job: what a user of that workload cares about most. Sequential writes
// are about throughput, random writes about IOPS, fsync about the tail
// latency of the flush itself.
func HeadlineMetric(job fio.Workload) string {
	switch job {
	case fio.SeqWrite:
		return MetricBandwidth
	case fio.RandWrite:
		return MetricIOPS
	case fio.Fsync:
		return MetricFsyncP99
	}
	return MetricIOPS
}

// MetricValue extracts metric from one fio result, in base units (IOPS,
// bytes per second, seconds). It returns NaN when the value does not exist:
// a failed result, a latency fio did not report, fsync_p99 of a job other
// than fsync, or an unknown metric name.
func MetricValue(metric string, r fio.Result) float64 {
	if !r.OK() {
		return math.NaN()
	}
	switch metric {
	case MetricIOPS:
		return r.Read.IOPS + r.Write.IOPS
	case MetricBandwidth:
		return r.Read.BandwidthBytes + r.Write.BandwidthBytes
	case MetricLatencyP50:
		return r.Write.LatencyP50Sec
	case MetricLatencyP99:
		return r.Write.LatencyP99Sec
	case MetricFsyncP99:
		if r.Workload == fio.Fsync {
			return r.Sync.LatencyP99Sec
		}
	}
	return math.NaN()
}

// Summarize groups samples by target and job and summarizes each group:
// rounds that succeeded and failed, the failures, medians of the raw
// figures over successful rounds, and, for every target but host, the
// paired overhead relative to host with intervals at the given confidence.
//
// Results come in a stable order: targets host, container, bind, volume
// (then any other, by name), and within a target the jobs seqwrite,
// randwrite, fsync (then any other). Combinations without samples are
// skipped.
//
// A target's round r is paired with the host's round r of the same job, and
// only when both succeeded: the pairing cancels whatever the host was doing
// during that round. NaN figures (a percentile fio did not report) are left
// out of medians and pairs rather than poisoning them.
//
// confidence must be in (0, 1) (see stats.MedianCI).
func Summarize(samples []Sample, confidence float64) []Result {
	type key struct{ target, job string }
	groups := map[key][]Sample{}
	for _, s := range samples {
		k := key{s.Target, string(s.Workload)}
		groups[k] = append(groups[k], s)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(
			compareOrdered(targetOrder, a.target, b.target),
			compareOrdered(workloadNames(), a.job, b.job),
		)
	})

	out := make([]Result, 0, len(keys))
	for _, k := range keys {
		group := groups[k]
		job := fio.Workload(k.job)
		res := Result{Target: k.target, Job: k.job}
		var ok []fio.Result
		for _, s := range group {
			if s.OK() {
				res.RoundsOK++
				ok = append(ok, s.Result)
				continue
			}
			res.RoundsFailed++
			res.Failures = append(res.Failures, Failure{Round: s.Round, Reason: string(s.Failure.Reason), Message: s.Failure.Message})
		}
		slices.SortStableFunc(res.Failures, func(a, b Failure) int { return cmp.Compare(a.Round, b.Round) })
		res.Raw = Raw{
			IOPS:           medianOf(ok, MetricIOPS),
			BandwidthBytes: medianOf(ok, MetricBandwidth),
			LatencyP50:     medianOf(ok, MetricLatencyP50),
			LatencyP99:     medianOf(ok, MetricLatencyP99),
			FsyncP99:       medianOf(ok, MetricFsyncP99),
		}
		if k.target != TargetHost {
			res.Overhead = overheads(groups[key{TargetHost, k.job}], group, job, confidence)
		}
		out = append(out, res)
	}
	return out
}

// overheads pairs target samples with host samples of the same round and
// computes the overhead of every metric that applies to the job. A metric
// without a single valid pair is still present, with N = 0 and NaN figures,
// so consumers see that it was attempted.
func overheads(host, target []Sample, job fio.Workload, confidence float64) map[string]Overhead {
	hostByRound := map[int]fio.Result{}
	for _, s := range host {
		if _, dup := hostByRound[s.Round]; s.OK() && !dup {
			hostByRound[s.Round] = s.Result
		}
	}
	var hs, ts []fio.Result
	for _, s := range target {
		h, found := hostByRound[s.Round]
		if !found || !s.OK() {
			continue
		}
		hs = append(hs, h)
		ts = append(ts, s.Result)
	}
	out := map[string]Overhead{}
	for _, m := range MetricsFor(job) {
		hv := make([]float64, len(hs))
		tv := make([]float64, len(ts))
		for i := range hs {
			hv[i] = MetricValue(m, hs[i])
			tv[i] = MetricValue(m, ts[i])
		}
		out[m] = fromStats(stats.PairedOverhead(hv, tv, MetricDirection(m), confidence))
	}
	return out
}

func fromStats(o stats.Overhead) Overhead {
	return Overhead{
		Ratio: o.Ratio, CILow: o.CILow, CIHigh: o.CIHigh,
		PercentOfHost: o.PercentOfHost, PercentLow: o.PercentLow, PercentHigh: o.PercentHigh,
		N: o.N, Coverage: o.Coverage,
	}
}

// medianOf is the median of metric over results, NaN values left out.
func medianOf(results []fio.Result, metric string) float64 {
	vs := make([]float64, 0, len(results))
	for _, r := range results {
		if v := MetricValue(metric, r); !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	return stats.Median(vs)
}

func workloadNames() []string {
	names := make([]string, len(fio.Workloads))
	for i, w := range fio.Workloads {
		names[i] = string(w)
	}
	return names
}

// compareOrdered orders a and b by their position in order; names not in
// order come after it, alphabetically.
func compareOrdered(order []string, a, b string) int {
	ia, ib := slices.Index(order, a), slices.Index(order, b)
	if ia < 0 {
		ia = len(order)
	}
	if ib < 0 {
		ib = len(order)
	}
	return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a, b))
}
