package measure

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// SummarizeWindow is Summarize over the most recent window rounds of each
// workload (by round number) of earlier samples (prior: an agent's
// stored rounds) and current ones: the overheads an agent publishes after
// a cycle. A window of 0 takes every round (a run's).
func SummarizeWindow(prior, current []Sample, window int, confidence float64) []Result {
	all := append(slices.Clone(prior), current...)
	if window > 0 {
		rounds := map[Workload]map[int]bool{}
		for _, s := range all {
			if rounds[s.Workload] == nil {
				rounds[s.Workload] = map[int]bool{}
			}
			rounds[s.Workload][s.Round] = true
		}
		cut := map[Workload]int{}
		for w, set := range rounds {
			keys := slices.Sorted(maps.Keys(set))
			if len(keys) > window {
				cut[w] = keys[len(keys)-window]
			}
		}
		all = slices.DeleteFunc(all, func(s Sample) bool { return s.Round < cut[s.Workload] })
	}
	return Summarize(all, confidence)
}

// Summarize groups samples by target and workload and summarizes each
// group: rounds that succeeded and failed, the failures, medians of the raw
// figures over successful rounds, and, for every target but host, the
// paired overhead relative to host with intervals at the given confidence.
//
// Results come in a stable order: targets host, container, bind, volume
// (then any other, by name), and within a target the workloads seqwrite,
// randwrite, fsync (then any other). Combinations without samples are
// skipped.
//
// A target's round r is paired with the host's round r of the same
// workload, and only when both succeeded: the pairing cancels whatever the
// host was doing during that round. NaN figures (a percentile fio did not
// report) are left out of medians and pairs rather than poisoning them.
//
// confidence must be in (0, 1) (see stats.MedianCI).
func Summarize(samples []Sample, confidence float64) []Result {
	type key struct {
		target   Target
		workload Workload
	}
	groups := map[key][]Sample{}
	for _, s := range samples {
		k := key{s.Target, s.Workload}
		groups[k] = append(groups[k], s)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(
			CompareTargets(a.target, b.target),
			CompareWorkloads(a.workload, b.workload),
		)
	})

	out := make([]Result, 0, len(keys))
	for _, k := range keys {
		group := groups[k]
		res := Result{Target: k.target, Workload: k.workload}
		var ok []JobResult
		for _, s := range group {
			if s.OK() {
				res.RoundsOK++
				ok = append(ok, s.JobResult)
				continue
			}
			res.RoundsFailed++
			res.Failures = append(res.Failures, FailedRound{Round: s.Round, Reason: s.Failure.Reason, Message: s.Failure.Message})
		}
		slices.SortStableFunc(res.Failures, func(a, b FailedRound) int { return cmp.Compare(a.Round, b.Round) })
		res.Raw = pooledRaw(ok, k.workload)
		if k.target != TargetHost {
			res.Overhead = overheads(groups[key{TargetHost, k.workload}], group, k.workload, confidence)
		}
		out = append(out, res)
	}
	return out
}

// overheads pairs target samples with host samples of the same round and
// computes the overhead of every metric that applies to the workload. A
// metric without a single valid pair is still present, with N = 0 and NaN
// figures, so consumers see that it was attempted.
func overheads(host, target []Sample, w Workload, confidence float64) map[string]Overhead {
	hostByRound := map[int]JobResult{}
	for _, s := range host {
		if _, dup := hostByRound[s.Round]; s.OK() && !dup {
			hostByRound[s.Round] = s.JobResult
		}
	}
	var hs, ts []JobResult
	for _, s := range target {
		h, found := hostByRound[s.Round]
		if !found || !s.OK() {
			continue
		}
		hs = append(hs, h)
		ts = append(ts, s.JobResult)
	}
	out := map[string]Overhead{}
	for _, m := range MetricsFor(w) {
		hv := make([]float64, len(hs))
		tv := make([]float64, len(ts))
		for i := range hs {
			hv[i] = MetricValue(m, hs[i])
			tv[i] = MetricValue(m, ts[i])
		}
		out[m] = withhold(fromStats(stats.PairedOverhead(hv, tv, MetricDirection(m), confidence)), confidence)
	}
	return out
}

// withhold drops the bounds of an interval whose exact coverage is below
// confidence. With fewer round pairs than a 95% interval needs (6), the
// exact interval is the range of the rounds and covers less (2 pairs: 50%);
// shown as "the 95% interval" it reads as a firm result, an A/A bias to
// anyone who trusts the label (docs/methodology.md, "The statistic", has
// an agent's first cycle that read so). Doing it here, where every
// result is made, keeps any surface (table, API, metrics, status page,
// advisor) from showing one. The estimate, the rounds and the coverage stay.
func withhold(o Overhead, confidence float64) Overhead {
	if o.N == 0 || !(o.Coverage < confidence) {
		return o
	}
	nan := math.NaN()
	o.CILow, o.CIHigh, o.PercentLow, o.PercentHigh = nan, nan, nan, nan
	o.Withheld = true
	return o
}

func fromStats(o stats.Overhead) Overhead {
	return Overhead{
		Ratio: o.Ratio, CILow: o.CILow, CIHigh: o.CIHigh,
		PercentOfHost: o.PercentOfHost, PercentLow: o.PercentLow, PercentHigh: o.PercentHigh,
		N: o.N, Coverage: o.Coverage,
	}
}

// pooledRaw is a target's own figures over its successful executions:
// throughput over their measured time together, and latency percentiles
// of all their latency samples pooled (fio's histograms). Where fio gave no
// histogram (other output formats, fio 2, results stored before histograms
// were kept) the percentile is the median of the executions' own.
func pooledRaw(ok []JobResult, w Workload) Raw {
	raw := Raw{IOPS: math.NaN(), BandwidthBytes: math.NaN()}
	var ios, bytes, secs float64
	for _, r := range ok {
		n := float64(r.Read.IOs + r.Write.IOs)
		rate := r.Read.IOPS + r.Write.IOPS
		if n <= 0 || !(rate > 0) || math.IsInf(rate, 0) {
			continue
		}
		// fio's IOPS is I/Os over the measured runtime, so this is the
		// runtime.
		ios += n
		bytes += float64(r.Read.Bytes + r.Write.Bytes)
		secs += n / rate
	}
	if secs > 0 {
		raw.IOPS, raw.BandwidthBytes = ios/secs, bytes/secs
	} else {
		raw.IOPS, raw.BandwidthBytes = medianOf(ok, MetricIOPS), medianOf(ok, MetricBandwidth)
	}
	writes := make([]Op, len(ok))
	syncs := make([]Op, len(ok))
	for i, r := range ok {
		writes[i], syncs[i] = r.Write, r.Sync
	}
	w8 := PoolOps(writes)
	raw.LatencyP50, raw.LatencyP99 = w8.LatencyP50Sec, w8.LatencyP99Sec
	raw.FsyncP99 = math.NaN()
	if w == Fsync {
		raw.FsyncP99 = PoolOps(syncs).LatencyP99Sec
	}
	return raw
}

// medianOf is the median of metric over results, NaN values left out.
func medianOf(results []JobResult, metric string) float64 {
	vs := make([]float64, 0, len(results))
	for _, r := range results {
		if v := MetricValue(metric, r); !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	return stats.Median(vs)
}

// compareOrdered orders a and b by their position in order; names not in
// order come after it, alphabetically.
func compareOrdered[T ~string](order []T, a, b T) int {
	ia, ib := slices.Index(order, a), slices.Index(order, b)
	if ia < 0 {
		ia = len(order)
	}
	if ib < 0 {
		ib = len(order)
	}
	return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a, b))
}

// CompareTargets orders targets for display: host, container, bind,
// volume, then any other by name.
func CompareTargets(a, b Target) int { return compareOrdered(Targets, a, b) }

// CompareWorkloads orders workloads for display: seqwrite, randwrite,
// fsync, then any other by name.
func CompareWorkloads(a, b Workload) int { return compareOrdered(Workloads, a, b) }
