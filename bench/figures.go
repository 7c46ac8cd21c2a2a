//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// The goals the measurement method is held to.
const (
	goalHalfWidthPP  = 3.0        // 95% interval half-width of container vs host, percentage points
	goalRunBytes     = 3072 << 20 // what a default `layerprobe run` (four targets) may write: its --max-bytes (2.5 GiB until 5 Dec)
	comparedRunBytes = 2560 << 20 // the default run's bytes when the adaptive method was compared with the fixed one
	goalCycleBytes   = 573 << 20  // what an agent cycle (host, container, bind) may write once its window is narrow or full
	goalWindowDays   = 2.0        // days of default cycles the agent's window may take to reach goalHalfWidthPP
	goalBiasPP       = 1.0        // |bind A/A median| at most this, percentage points
	goalCoverage     = 0.93       // empirical coverage of the 95% intervals
	goalCoverageRuns = 40         // ... across at least this many runs
	goalQuietCycles  = 100        // real unperturbed cycles without a false alarm
	goalFalsePer1000 = 1.0        // false confirmations per 1000 A/A cycles
)

// goalDetect is the detection goal: a slowdown confirmed within so many
// agent cycles.
var goalDetect = []struct {
	level  float64
	cycles int
}{{1.25, 3}, {2, 1}}

// Figures of a driver's runs, shared by the goals and the sections.

// estimates are the runs' headline estimates of a target and workload.
func estimates(runs []runDoc, target, workload string) []est {
	var out []est
	for i := range runs {
		if e, ok := estimateOf(&runs[i], target, workload); ok {
			out = append(out, e)
		}
	}
	return out
}

func halfWidths(es []est) []float64 { return mapOf(es, est.halfWidthPP) }

func ratios(es []est) []float64 { return mapOf(es, func(e est) float64 { return e.Ratio }) }

func runBytes(runs []runDoc) []float64 {
	return mapOf(runs, func(d runDoc) float64 { return float64(d.BytesWritten) })
}

// headlineShares are the shares of each run's bytes that the host's and
// the container's executions wrote: what buys the headline.
func headlineShares(runs []runDoc) []float64 {
	var out []float64
	for _, d := range runs {
		if d.BytesWritten <= 0 {
			continue
		}
		var b int64
		for _, x := range d.Executions {
			if x.Target == "host" || x.Target == "container" {
				b += x.Bytes
			}
		}
		out = append(out, float64(b)/float64(d.BytesWritten))
	}
	return out
}

func runSeconds(runs []runDoc) []float64 {
	return mapOf(runs, func(d runDoc) float64 { return d.Seconds })
}

func runRounds(runs []runDoc) []float64 {
	return mapOf(runs, func(d runDoc) float64 { return float64(d.Rounds) })
}

// mapOf is f of every element.
func mapOf[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// stopReasons counts the runs' stop reasons, "bytes 38, time 2".
func stopReasons(reasons []string) string {
	n := map[string]int{}
	for _, s := range reasons {
		n[orDash(s)]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] || n[keys[i]] == n[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

func runStops(runs []runDoc) []string {
	out := make([]string, len(runs))
	for i, d := range runs {
		out[i] = d.StopReason
	}
	return out
}

// mostly returns the most frequent value.
func mostly(xs []string) string {
	n := map[string]int{}
	best := ""
	for _, x := range xs {
		n[x]++
		if n[x] > n[best] || n[x] == n[best] && x < best {
			best = x
		}
	}
	return best
}

// widening is the factor by which intervals would have to be wider (about
// their estimates) for a share q of them to hold truth: for each interval
// the distance from its estimate to truth over the distance from its
// estimate to the bound on truth's side, and of those the q-quantile.
func widening(es []est, truth func(i int) float64, q float64) float64 {
	var f []float64
	for i, e := range es {
		t := truth(i)
		switch {
		case t >= e.Ratio && e.High > e.Ratio:
			f = append(f, (t-e.Ratio)/(e.High-e.Ratio))
		case t < e.Ratio && e.Ratio > e.Low:
			f = append(f, (e.Ratio-t)/(e.Ratio-e.Low))
		case t == e.Ratio:
			f = append(f, 0)
		default:
			f = append(f, math.Inf(1)) // a point interval off the truth
		}
	}
	if len(f) == 0 {
		return math.NaN()
	}
	slices.Sort(f)
	return f[min(len(f)-1, int(math.Ceil(q*float64(len(f))))-1)]
}

// coverageCounts are the coverage checks of one driver and workload.
type coverageCounts struct {
	aa, ref share
	// joint counts the runs whose container estimate agrees with the
	// reference's within both intervals (est.agrees): ref takes the
	// reference for the truth, joint allows for its own error.
	joint share
	// aaEst, refEst are the intervals behind them; refPoint is the
	// reference's point estimate.
	aaEst, refEst []est
	refPoint      float64
}

func coverageOf(dr driverResult, workload string) coverageCounts {
	c := coverageCounts{refPoint: math.NaN()}
	for _, e := range estimates(dr.Defaults, "bind", workload) {
		c.aa.add(e.covers(0))
		c.aaEst = append(c.aaEst, e)
	}
	re, ok := referenceOf(dr, "container", workload)
	if !ok {
		return c
	}
	c.refPoint = re.Ratio
	for _, e := range estimates(dr.Defaults, "container", workload) {
		c.ref.add(e.covers(re.Ratio))
		c.joint.add(e.agrees(re.est))
		c.refEst = append(c.refEst, e)
	}
	return c
}

// pooled are the coverage checks of every driver and workload added up.
type pooled struct {
	aa, ref, joint    share
	runs              int
	aaWiden, refWiden float64
}

// pooledCoverage adds the coverage checks of every driver and workload.
func pooledCoverage(r *results) pooled {
	var p pooled
	var aaEst, refEst []est
	var refTruth []float64
	for _, dr := range r.Drivers {
		p.runs += len(dr.Defaults)
		for _, workload := range workloads {
			c := coverageOf(dr, workload)
			p.aa.K, p.aa.N = p.aa.K+c.aa.K, p.aa.N+c.aa.N
			p.ref.K, p.ref.N = p.ref.K+c.ref.K, p.ref.N+c.ref.N
			p.joint.K, p.joint.N = p.joint.K+c.joint.K, p.joint.N+c.joint.N
			aaEst = append(aaEst, c.aaEst...)
			refEst = append(refEst, c.refEst...)
			for range c.refEst {
				refTruth = append(refTruth, c.refPoint)
			}
		}
	}
	p.aa, p.ref, p.joint = shareOf(p.aa.K, p.aa.N), shareOf(p.ref.K, p.ref.N), shareOf(p.joint.K, p.joint.N)
	p.aaWiden = widening(aaEst, func(int) float64 { return 0 }, goalCoverage)
	p.refWiden = widening(refEst, func(i int) float64 { return refTruth[i] }, goalCoverage)
	return p
}

// publishedHalfWidths are a target's published headline half-widths of a
// workload after every counted unperturbed measurement cycle.
func publishedHalfWidths(d *detectionResult, target, workload string) []float64 {
	var out []float64
	for _, c := range d.Unperturbed.Cycles {
		if c.Trigger != "api" || c.Phase != "counted" {
			continue
		}
		if o, ok := c.Published[target+"/"+workload]; ok && !math.IsNaN(o.CILow) && !math.IsNaN(o.CIHigh) {
			out = append(out, estFromMeasure(o).halfWidthPP())
		}
	}
	return out
}

// cycleFigures are the counted unperturbed measurement cycles' (or the
// confirmation cycles') bytes, seconds, rounds and stop reasons.
func cycleFigures(d *detectionResult, trigger string) (bytes, secs, rounds []float64, stops []string) {
	for _, c := range d.Unperturbed.Cycles {
		if c.Trigger != trigger || (trigger == "api" && c.Phase != "counted") {
			continue
		}
		bytes = append(bytes, float64(c.BytesWritten))
		secs = append(secs, c.DurationSeconds)
		rounds = append(rounds, float64(c.Rounds))
		stops = append(stops, c.StopReason)
	}
	return bytes, secs, rounds, stops
}

// medianCI is the sign-test interval of the median of xs.
func medianCI(xs []float64) stats.Interval { return stats.MedianCI(xs, confidence) }
