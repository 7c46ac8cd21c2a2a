// Package stats holds the statistics layerprobe reports: medians, exact
// distribution-free confidence intervals for a median (sign test) and for a
// centre of symmetry (Wilcoxon signed rank, with the Hodges–Lehmann
// estimate), the median absolute deviation and the paired target/host
// overhead.
//
// The method (docs/methodology.md) treats a measurement round as the unit
// of replication: every round runs one job on each target once, the
// per-round log ratio target/host is the observation, and the overhead is
// the Hodges–Lehmann estimate of those ratios with the exact signed-rank
// interval. Rank methods are used instead of means and normal theory
// because fio figures, fsync latencies above all, are skewed and
// heavy-tailed, and because a measurement has few rounds (often 6 to 30),
// where a bootstrap interval is anti-conservative.
//
// Everything here is a pure function of its arguments. NaN is not a valid
// observation: functions that take raw samples document whether callers must
// filter NaN first.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of xs: the middle value, or the mean of the two
// middle values when len(xs) is even. It returns NaN for an empty slice.
// xs is not modified.
//
// Callers must drop NaN values first: NaN has no place in an ordering, so a
// NaN in xs makes the result meaningless.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return sortedMedian(sorted(xs))
}

// MAD returns the raw median absolute deviation of xs, median(|x - median(xs)|),
// or NaN for an empty slice. It is not scaled: for normally distributed data
// the robust estimate of the standard deviation is 1.4826 * MAD
// (RobustSigma). As with Median, callers must drop NaN values first.
func MAD(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	m := Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return Median(dev)
}

// MADScale turns a MAD into a consistent estimate of the standard deviation
// of normally distributed data (1 / Φ⁻¹(3/4)).
const MADScale = 1.4826

// RobustSigma returns MADScale * MAD(xs): a standard deviation estimate that
// a few outliers (an fsync stall, a noisy neighbour) cannot inflate.
func RobustSigma(xs []float64) float64 {
	return MADScale * MAD(xs)
}

// sorted returns a sorted copy of xs.
func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// sortedMedian is the median of an already sorted, non-empty slice.
func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
