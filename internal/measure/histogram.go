package measure

import (
	"cmp"
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// Histogram is a latency distribution as fio records it: counts in fio's
// log-linear buckets (64 per power of two, so a quantile read from it is
// within 0.8% of the exact one), each bucket named by the latency fio
// assigns it, in nanoseconds. fio writes them with --output-format=json+;
// layerprobe keeps them so that percentiles over many short executions are
// read from all their samples pooled, not averaged from per-execution
// percentiles, which rest on a few tail samples each.
//
// NS is strictly ascending and Counts[i] > 0 belongs to NS[i]. The zero
// Histogram is empty.
type Histogram struct {
	NS     []int64  `json:"ns"`
	Counts []uint64 `json:"counts"`
}

// Total returns the number of samples.
func (h Histogram) Total() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Empty reports whether the histogram holds no samples.
func (h Histogram) Empty() bool { return h.Total() == 0 }

// Quantile returns the q-quantile (0 < q <= 1) in seconds by the rule fio
// applies to its own percentiles: the first bucket at which the cumulative
// count reaches q·total. NaN when the histogram is empty or q is out of
// range. For a single execution it reproduces fio's reported percentile.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 || !(q > 0 && q <= 1) {
		return math.NaN()
	}
	need := q * float64(total)
	var sum uint64
	for i, c := range h.Counts {
		sum += c
		if float64(sum) >= need {
			return float64(h.NS[i]) / 1e9
		}
	}
	return float64(h.NS[len(h.NS)-1]) / 1e9
}

// MergeHistograms returns the sum of hs: the histogram of all their samples
// pooled. fio's bucket layout is the same for every execution of one fio
// version, so buckets with the same latency add up exactly.
func MergeHistograms(hs ...Histogram) Histogram {
	counts := map[int64]uint64{}
	for _, h := range hs {
		for i, ns := range h.NS {
			if i < len(h.Counts) {
				counts[ns] += h.Counts[i]
			}
		}
	}
	return histogramOf(counts)
}

// histogramOf builds a Histogram from bucket counts, dropping empty buckets.
func histogramOf(counts map[int64]uint64) Histogram {
	type bucket struct {
		ns int64
		n  uint64
	}
	bs := make([]bucket, 0, len(counts))
	for ns, n := range counts {
		if n > 0 {
			bs = append(bs, bucket{ns, n})
		}
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.ns, b.ns) })
	h := Histogram{NS: make([]int64, len(bs)), Counts: make([]uint64, len(bs))}
	for i, b := range bs {
		h.NS[i], h.Counts[i] = b.ns, b.n
	}
	return h
}

// NewHistogram builds a Histogram from fio's bins: latency in nanoseconds
// to count. Non-positive latencies and zero counts are dropped.
func NewHistogram(bins map[int64]uint64) Histogram {
	clean := make(map[int64]uint64, len(bins))
	for ns, n := range bins {
		if ns > 0 && n > 0 {
			clean[ns] += n
		}
	}
	return histogramOf(clean)
}

// PoolOps returns the figures of ops (one direction of several executions)
// pooled: operations, bytes, and rates over the executions' measured time
// together, latency percentiles from their histograms merged. Where an op
// has no histogram the percentiles are the medians of the ops' own, and
// where none has a rate (fio reports none for syncs) rates are NaN. Ops
// without operations are left out, unless no op has any.
func PoolOps(ops []Op) Op {
	nan := math.NaN()
	out := Op{IOPS: nan, BandwidthBytes: nan, LatencyMeanSec: nan, LatencyP50Sec: nan, LatencyP99Sec: nan, LatencyP999Sec: nan}
	var with []Op
	for _, o := range ops {
		if o.IOs > 0 {
			with = append(with, o)
		}
	}
	if len(with) == 0 {
		// No counts (figures from elsewhere than fio's JSON): the
		// percentiles the ops carry are all there is.
		with = ops
	}
	if len(with) == 0 {
		return out
	}
	var secs, meanW, meanSum float64
	hs := make([]Histogram, 0, len(with))
	for _, o := range with {
		out.IOs += o.IOs
		out.Bytes += o.Bytes
		if o.IOPS > 0 && !math.IsInf(o.IOPS, 0) {
			secs += float64(o.IOs) / o.IOPS // fio's IOPS is I/Os over the measured runtime
		}
		if !math.IsNaN(o.LatencyMeanSec) {
			meanW += float64(o.IOs)
			meanSum += float64(o.IOs) * o.LatencyMeanSec
		}
		if o.Histogram != nil && !o.Histogram.Empty() && hs != nil {
			hs = append(hs, *o.Histogram)
		} else {
			hs = nil // one without: fall back to medians
		}
	}
	if secs > 0 {
		out.IOPS, out.BandwidthBytes = float64(out.IOs)/secs, float64(out.Bytes)/secs
	}
	if meanW > 0 {
		out.LatencyMeanSec = meanSum / meanW
	}
	if len(hs) == len(with) {
		h := MergeHistograms(hs...)
		out.LatencyP50Sec, out.LatencyP99Sec, out.LatencyP999Sec = h.Quantile(0.5), h.Quantile(0.99), h.Quantile(0.999)
		return out
	}
	med := func(f func(Op) float64) float64 {
		xs := make([]float64, 0, len(with))
		for _, o := range with {
			if v := f(o); !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		return stats.Median(xs)
	}
	out.LatencyP50Sec = med(func(o Op) float64 { return o.LatencyP50Sec })
	out.LatencyP99Sec = med(func(o Op) float64 { return o.LatencyP99Sec })
	out.LatencyP999Sec = med(func(o Op) float64 { return o.LatencyP999Sec })
	return out
}
