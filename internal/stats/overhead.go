package stats

import (
	"fmt"
	"math"
)

// Direction says which way a metric improves. It decides the sign of an
// overhead: overhead is always "how much slower than host".
type Direction int

// Directions. The zero value is deliberately invalid so that a forgotten
// direction panics instead of silently flipping a sign.
const (
	HigherIsBetter Direction = iota + 1 // throughput: IOPS, bandwidth
	LowerIsBetter                       // latencies
)

func (d Direction) String() string {
	switch d {
	case HigherIsBetter:
		return "higher_is_better"
	case LowerIsBetter:
		return "lower_is_better"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Overhead is the paired overhead of a target relative to the host, with
// its confidence interval.
type Overhead struct {
	// Ratio is how much slower than host the target is: 0.08 means 8%
	// slower, a negative value means faster. For throughput it is the
	// fraction of host throughput lost (1 - target/host); for latency it is
	// the relative latency increase (target/host - 1).
	Ratio float64
	// CILow and CIHigh bound Ratio; CILow <= Ratio <= CIHigh.
	CILow, CIHigh float64
	// PercentOfHost is the target's speed as a percentage of the host's:
	// throughput 100·target/host, latency 100·host/target. 92 reads "92% of
	// host", as in the seed article's table.
	PercentOfHost float64
	// PercentLow and PercentHigh bound PercentOfHost; PercentLow <= PercentHigh.
	PercentLow, PercentHigh float64
	// N is the number of valid pairs (rounds) the figures rest on.
	N int
	// Coverage is the achieved coverage of the interval; it is below the
	// requested confidence when N is too small (see WilcoxonCI).
	Coverage float64
}

// PairedOverhead returns the overhead of target relative to host, where
// host[i] and target[i] were measured in the same round.
//
// A pair is dropped when either value is NaN, infinite or not positive (a
// failed or empty measurement has no ratio). The statistic is the
// Hodges–Lehmann estimate of the per-round log ratios r = ln(target/host),
// with WilcoxonCI's exact interval; the log makes the ratio symmetric (a 2x
// slowdown and a 2x speed-up are equally far from 0) and pairing by round
// cancels whatever load the host had in that round. With m, low and high
// the estimate and bounds of r:
//
//	HigherIsBetter: Ratio = 1 - e^m, CI [1 - e^high, 1 - e^low], PercentOfHost = 100·e^m
//	LowerIsBetter:  Ratio = e^m - 1, CI [e^low - 1, e^high - 1], PercentOfHost = 100·e^-m
//
// With no valid pair every float field is NaN and N is 0.
//
// host and target must have the same length and confidence must be in
// (0, 1), and dir must be HigherIsBetter or LowerIsBetter; PairedOverhead
// panics otherwise, as each is a programming error.
func PairedOverhead(host, target []float64, dir Direction, confidence float64) Overhead {
	if len(host) != len(target) {
		panic(fmt.Sprintf("stats: PairedOverhead with %d host and %d target values", len(host), len(target)))
	}
	if dir != HigherIsBetter && dir != LowerIsBetter {
		panic(fmt.Sprintf("stats: PairedOverhead with invalid %v", dir))
	}
	checkConfidence(confidence)

	logs := make([]float64, 0, len(host))
	for i := range host {
		h, t := host[i], target[i]
		if !usable(h) || !usable(t) {
			continue
		}
		// Difference of logs rather than log of the quotient: t/h can
		// overflow for extreme (but valid) values.
		logs = append(logs, math.Log(t)-math.Log(h))
	}
	if len(logs) == 0 {
		nan := math.NaN()
		return Overhead{Ratio: nan, CILow: nan, CIHigh: nan, PercentOfHost: nan, PercentLow: nan, PercentHigh: nan, Coverage: nan}
	}

	return FromLogInterval(WilcoxonCI(logs, confidence), dir)
}

// FromLogInterval turns an estimate of the log ratio ln(target/host) with
// its interval (ci.Median is the estimate, whichever statistic made it)
// into an overhead, as PairedOverhead defines it. dir must be
// HigherIsBetter or LowerIsBetter; FromLogInterval panics otherwise.
func FromLogInterval(ci Interval, dir Direction) Overhead {
	m, lo, hi := ci.Median, ci.Low, ci.High
	o := Overhead{N: ci.N, Coverage: ci.Coverage}
	switch dir {
	case HigherIsBetter:
		// A higher log ratio means a faster target, so the upper bound of
		// r is the lower bound of the overhead.
		o.Ratio, o.CILow, o.CIHigh = oneMinusExp(m), oneMinusExp(hi), oneMinusExp(lo)
		o.PercentOfHost, o.PercentLow, o.PercentHigh = 100*math.Exp(m), 100*math.Exp(lo), 100*math.Exp(hi)
	case LowerIsBetter:
		o.Ratio, o.CILow, o.CIHigh = math.Expm1(m), math.Expm1(lo), math.Expm1(hi)
		// Speed relative to host is host/target = e^-r: the upper bound
		// of r is the lower bound of the percentage.
		o.PercentOfHost, o.PercentLow, o.PercentHigh = 100*math.Exp(-m), 100*math.Exp(-hi), 100*math.Exp(-lo)
	default:
		panic(fmt.Sprintf("stats: FromLogInterval with invalid %v", dir))
	}
	return o
}

// usable reports whether v can enter a ratio.
func usable(v float64) bool {
	return v > 0 && !math.IsInf(v, 0) // v > 0 is false for NaN
}

// oneMinusExp returns 1 - e^x. Expm1 keeps precision for the tiny overheads
// of an A/A arm; the +0 normalisation keeps an identical target from being
// reported as "-0" (negated Expm1(0)) in JSON.
func oneMinusExp(x float64) float64 {
	v := -math.Expm1(x)
	if v == 0 {
		return 0
	}
	return v
}
