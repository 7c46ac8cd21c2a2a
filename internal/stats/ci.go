package stats

import (
	"fmt"
	"math"
	"math/big"
)

// Interval is a median with a distribution-free confidence interval.
type Interval struct {
	Median float64
	Low    float64 // lower bound: an order statistic of the sample
	High   float64 // upper bound: an order statistic of the sample
	N      int     // number of observations
	// Coverage is the exact probability that [Low, High] contains the true
	// median, for any continuous distribution. It is at least the requested
	// confidence unless the sample is too small (see MedianCI).
	Coverage float64
}

// MedianCI returns the median of xs with an exact distribution-free
// confidence interval from order statistics (the interval that inverts the
// sign test).
//
// With x(1) <= ... <= x(n) the sorted sample, the interval (x(k), x(n+1-k))
// contains the population median with probability 1 - 2·P(B <= k-1), where B
// is binomial(n, 1/2). MedianCI picks the largest k, i.e. the narrowest
// symmetric interval, whose coverage is at least confidence. Coverage is
// reported as achieved, which is usually more than asked for because k is
// an integer.
//
// If even (min, max) falls short of confidence (n < 6 for 95%; see MinN),
// MedianCI returns (min, max) with its lower coverage rather than nothing, so
// callers can show it and flag it. n = 0 gives NaN bounds and coverage and
// N = 0; n = 1 gives Low = High = Median and Coverage 0.
//
// confidence must be in (0, 1); MedianCI panics otherwise, as that is a
// programming error. Callers must drop NaN values from xs first.
//
// The binomial tails are computed exactly with big integers, so the choice of
// k is exact for any n; the cost is O(n²) bit operations, a few milliseconds
// at n = 10,000.
func MedianCI(xs []float64, confidence float64) Interval {
	checkConfidence(confidence)
	n := len(xs)
	if n == 0 {
		return noInterval()
	}
	s := sorted(xs)
	k, coverage := orderStatisticIndex(n, confidence)
	return Interval{
		Median:   sortedMedian(s),
		Low:      s[k-1],
		High:     s[n-k],
		N:        n,
		Coverage: coverage,
	}
}

// MinN returns the smallest sample size for which MedianCI reaches the given
// confidence, i.e. for which (min, max) covers the median with probability
// 1 - 2·0.5ⁿ >= confidence: 6 for 95%, 8 for 99%. It panics if confidence is
// not in (0, 1).
func MinN(confidence float64) int {
	checkConfidence(confidence)
	for n := 1; ; n++ {
		// 1 - 2^(1-n) is exact in float64 up to n = 53 and rounds to 1
		// after, so the loop always ends.
		if 1-math.Ldexp(1, 1-n) >= confidence {
			return n
		}
	}
}

func checkConfidence(confidence float64) {
	if !(confidence > 0 && confidence < 1) {
		panic(fmt.Sprintf("stats: confidence %v outside (0, 1)", confidence))
	}
}

// orderStatisticIndex returns the 1-based rank k of the lower bound of the
// narrowest symmetric interval (x(k), x(n+1-k)) whose coverage reaches
// confidence, and that coverage. If none does, it returns k = 1 and the
// coverage of (min, max). n must be positive.
//
// The test "coverage >= confidence" is 2·S(k-1) <= (1-confidence)·2ⁿ with
// S(j) = Σ_{i<=j} C(n, i). The left side is an integer, so it equals
// 2·S(k-1) <= floor((1-confidence)·2ⁿ), which is evaluated exactly (the
// float64 confidence converts to a rational exactly): no rounding can move
// the boundary. Only the reported coverage is rounded to float64.
func orderStatisticIndex(n int, confidence float64) (int, float64) {
	total := new(big.Int).Lsh(big.NewInt(1), uint(n))
	limitRat := new(big.Rat).SetFloat64(1 - confidence) // 1-confidence is itself exact in float64
	limitRat.Mul(limitRat, new(big.Rat).SetInt(total))
	limit := new(big.Int).Quo(limitRat.Num(), limitRat.Denom()) // floor: both are positive

	binom := big.NewInt(1) // C(n, j), starting at j = 0
	sum := new(big.Int)    // S(j)
	twoSum := new(big.Int)
	factor := new(big.Int)
	best := 0
	bestSum := new(big.Int)
	// k may go up to (n+1)/2: beyond that the pair is no longer ordered.
	for j := 0; j < (n+1)/2; j++ {
		sum.Add(sum, binom)
		if twoSum.Lsh(sum, 1).Cmp(limit) > 0 {
			break
		}
		best = j + 1
		bestSum.Set(sum) // S(best-1)
		// C(n, j+1) = C(n, j)·(n-j)/(j+1); the division is exact.
		binom.Mul(binom, factor.SetInt64(int64(n-j)))
		binom.Quo(binom, factor.SetInt64(int64(j+1)))
	}
	if best == 0 {
		// Not even (min, max) reaches confidence: report it with its own
		// coverage, 1 - 2·C(n,0)/2ⁿ.
		best = 1
		bestSum.SetInt64(1)
	}
	return best, coverage(bestSum, total)
}

// coverage returns 1 - 2·tail/total as a float64 (correctly rounded).
func coverage(tail, total *big.Int) float64 {
	num := new(big.Int).Sub(total, new(big.Int).Lsh(tail, 1))
	f, _ := new(big.Rat).SetFrac(num, total).Float64()
	return f
}

// noInterval is the interval of no values: every figure NaN.
func noInterval() Interval {
	return Interval{Median: math.NaN(), Low: math.NaN(), High: math.NaN(), Coverage: math.NaN()}
}
