package stats

// TheilSen returns the Theil-Sen slope of y over x: the median of the slopes
// of every pair of points with different x. It ignores up to ~29% of wild
// points, which matters for copy-up latencies where one round can hit a
// writeback storm; least squares would let that round set the slope. ok is
// false when no two points differ in x. O(n²) in the points, which is a few
// dozen here.
func TheilSen(x, y []float64) (slope float64, ok bool) {
	if len(x) != len(y) {
		panic("stats: TheilSen with x and y of different lengths")
	}
	var slopes []float64
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			if dx := x[j] - x[i]; dx != 0 {
				slopes = append(slopes, (y[j]-y[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, false
	}
	return Median(slopes), true
}
