package measure

import (
	"cmp"
	"math"
	"slices"
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
