package detector

import (
	"math"
	"slices"
	"sort"
)

// medianMAD returns the median of w and its raw median absolute deviation,
// exactly as stats.Median and stats.MAD compute them, but with one sort
// instead of three: it runs on every round and in every simulated round,
// and a 200-round window made the three sorts most of the cost.
//
// In sorted order, the deviations |x − m| of the values below the median
// grow towards the front and those of the values at or above it grow
// towards the back, so the smallest deviations are found by merging the
// two runs outwards from the median, O(n).
func medianMAD(w []float64) (median, mad float64) {
	s := slices.Clone(w)
	slices.Sort(s)
	n := len(s)
	median = middle(s)

	lo := sort.SearchFloat64s(s, median) - 1 // last index below the median
	hi := lo + 1                             // first index at or above it
	next := func() float64 {
		if hi >= n || (lo >= 0 && math.Abs(s[lo]-median) <= math.Abs(s[hi]-median)) {
			lo--
			return math.Abs(s[lo+1] - median)
		}
		hi++
		return math.Abs(s[hi-1] - median)
	}
	// The median of n deviations is the ((n-1)/2)-th smallest (0-based),
	// averaged with the (n/2)-th when n is even.
	var d float64
	for range (n-1)/2 + 1 {
		d = next()
	}
	if n%2 == 1 {
		return median, d
	}
	return median, (d + next()) / 2
}

// middle is the median of a sorted, non-empty slice.
func middle(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
