//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

	"gonum.org/v1/gonum/stat"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// confidence of every interval in the report, as layerprobe uses.
const confidence = measure.DefaultConfidence

// est is an overhead with its interval, in ratio units (0.08 = 8% slower
// than host), whichever method made it.
type est struct {
	Ratio, Low, High float64
	N                int
}

func estFromMeasure(o measure.Overhead) est {
	return est{Ratio: o.Ratio, Low: o.CILow, High: o.CIHigh, N: o.N}
}

func estFromStats(o stats.Overhead) est {
	return est{Ratio: o.Ratio, Low: o.CILow, High: o.CIHigh, N: o.N}
}

// halfWidthPP is the interval's half-width in percentage points.
func (e est) halfWidthPP() float64 { return 50 * (e.High - e.Low) }

// covers reports whether the interval holds x.
func (e est) covers(x float64) bool { return e.Low <= x && x <= e.High }

// agrees reports whether e and ref, two independent estimates, are within
// each other's error: their difference is no more than the root of the sum
// of the squares of their half-widths on the sides that face each other
// (two 95% intervals combined as independent normal errors). Coverage of
// ref's point takes the reference for the truth; this allows for its
// error too, so a miss of the one and not the other is the reference's.
func (e est) agrees(ref est) bool {
	if d := ref.Ratio - e.Ratio; d >= 0 {
		return d <= math.Hypot(e.High-e.Ratio, ref.Ratio-ref.Low)
	}
	return e.Ratio-ref.Ratio <= math.Hypot(e.Ratio-e.Low, ref.High-ref.Ratio)
}

func (e est) ok() bool { return !math.IsNaN(e.Ratio) && !math.IsNaN(e.Low) && !math.IsNaN(e.High) }

// oldEstimate is the earlier method's statistic of a workload's per-round log
// ratios: their median with the sign-test interval (stats.MedianCI).
func oldEstimate(logs []float64, workload string) est {
	if len(logs) == 0 {
		nan := math.NaN()
		return est{Ratio: nan, Low: nan, High: nan}
	}
	return estFromStats(stats.FromLogInterval(stats.MedianCI(logs, confidence), measure.MetricDirection(headlineOf(workload))))
}

// estimateOf is a run's headline estimate of a target and workload by its own
// method: recomputed from the executions for the earlier method (whose
// rounds each held every workload), as reported for the adaptive one.
func estimateOf(d *runDoc, target, workload string) (est, bool) {
	if d == nil {
		return est{}, false
	}
	if d.Binary == "old" {
		e := oldEstimate(d.logRatios(target, workload), workload)
		return e, e.ok()
	}
	o, ok := d.reported(target, workload)
	return estFromMeasure(o), ok && estFromMeasure(o).ok()
}

// recomputed is the adaptive method's estimate recomputed from a run's
// executions with measure.Summarize, as layerprobe computed it.
func recomputed(d *runDoc, target, workload string, maxRound int) (est, bool) {
	var keep []measure.Sample
	for _, s := range d.samples(maxRound) {
		if string(s.Workload) == workload && (s.Target == measure.TargetHost || string(s.Target) == target) {
			keep = append(keep, s)
		}
	}
	for _, r := range measure.Summarize(keep, confidence) {
		if string(r.Target) == target {
			o, ok := r.Overhead[headlineOf(workload)]
			e := estFromMeasure(o)
			return e, ok && e.ok()
		}
	}
	return est{}, false
}

// combined is several runs' estimates of one target and workload made one.
type combined struct {
	est
	// Runs is how many runs it combines; SD the standard deviation of
	// their estimates on the signed log scale (0.02 is about 2 pp): one
	// run's error, what it could be off by alone.
	Runs int
	SD   float64
}

// combineRuns makes one estimate of independent runs' estimates of one
// workload: the runs as replicates. The mean of their estimates on the signed
// log scale (signedLog), with a t interval on runs−1 degrees of freedom
// from their spread. Why not pool the rounds: one run's rounds share its
// minutes on the disk and what it laid out, so an error fixed within a
// run would pass for precision; between runs it is part of the spread
// the interval rests on. Why not weigh the runs by their own intervals:
// a short run's interval (8 rounds: the order statistics' interval, 99%
// wide) says less about its error than the other runs do. Runs without
// an estimate are left out; one run is returned as it is; runs that all
// read the same value get their own intervals combined instead of a
// width of 0.
func combineRuns(each []est, workload string) (combined, bool) {
	var theta []float64
	var kept []est
	n := 0
	for _, e := range each {
		if !e.ok() {
			continue
		}
		x := signedLog(e.Ratio, workload)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		kept = append(kept, e)
		theta = append(theta, x)
		n += e.N
	}
	k := len(theta)
	switch k {
	case 0:
		return combined{}, false
	case 1:
		return combined{est: kept[0], Runs: 1}, true
	}
	mean, sd := stat.MeanStdDev(theta, nil)
	se := sd / math.Sqrt(float64(k))
	if sd == 0 {
		var v float64
		for _, e := range kept {
			h := (signedLog(e.High, workload) - signedLog(e.Low, workload)) / (2 * zOf(confidence))
			v += h * h
		}
		se = math.Sqrt(v) / float64(k)
	}
	half := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(k - 1)}.Quantile(1-(1-confidence)/2) * se
	return combined{est: est{Ratio: shiftRatio(0, mean, workload), Low: shiftRatio(0, mean-half, workload), High: shiftRatio(0, mean+half, workload), N: n},
		Runs: k, SD: sd}, true
}

// zOf is the standard normal quantile of a two-sided interval.
func zOf(level float64) float64 { return distuv.UnitNormal.Quantile(1 - (1-level)/2) }

// referenceOf is a driver's reference estimate of a target and workload: its
// runs combined (combineRuns).
func referenceOf(dr driverResult, target, workload string) (combined, bool) {
	return combineRuns(estimates(dr.References, target, workload), workload)
}

// checkRecorded compares what a run reported with what its recorded
// executions give, the earlier method's statistic included: the report
// rests on the recorded executions, so they must reproduce the run.
func checkRecorded(d *runDoc) error {
	var bad []string
	for key, o := range d.Reported {
		target, workload, _ := strings.Cut(key, "/")
		if math.IsNaN(o.Ratio) {
			continue
		}
		var e est
		var ok bool
		if d.Binary == "old" {
			e, ok = estimateOf(d, target, workload)
		} else {
			e, ok = recomputed(d, target, workload, 0)
		}
		r := estFromMeasure(o)
		if !ok || math.Abs(e.Ratio-r.Ratio) > 1e-5 || math.Abs(e.Low-r.Low) > 1e-5 || math.Abs(e.High-r.High) > 1e-5 {
			bad = append(bad, fmt.Sprintf("%s: reported %+.4f [%+.4f, %+.4f], recomputed %+.4f [%+.4f, %+.4f]",
				key, r.Ratio, r.Low, r.High, e.Ratio, e.Low, e.High))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("the recorded executions do not reproduce the run's estimates: %s", strings.Join(bad, "; "))
	}
	return nil
}

// curvePoint is the precision of a run's first k rounds of a workload and what
// the run had written by the end of its k-th round of it.
type curvePoint struct {
	Rounds int
	Bytes  int64
	HW     float64 // half-width, percentage points
}

// precisionCurve follows a target's headline half-width over a run's
// rounds of a workload, from the first round with a full-confidence interval.
// For the adaptive method the rounds of one workload are numbered among the
// other workloads' rounds; the bytes count every round up to the workload's k-th,
// layout included, and the estimate is measure.Summarize's. For the
// earlier method a round holds every workload, and the statistic is its
// median with the sign-test interval.
func precisionCurve(d *runDoc, target, workload string) []curvePoint {
	if d == nil {
		return nil
	}
	var rounds []int // the workload's round numbers
	seen := map[int]bool{}
	for _, x := range d.Executions {
		if x.Workload == workload && !seen[x.Round] {
			seen[x.Round] = true
			rounds = append(rounds, x.Round)
		}
	}
	slices.Sort(rounds)
	bytesTo := func(r int) int64 {
		n := d.LayoutBytes
		for _, x := range d.Executions {
			if x.Round <= r {
				n += x.Bytes
			}
		}
		return n
	}
	minN := stats.MinN(confidence)
	var logs []float64
	pairs := d.pairs()
	var out []curvePoint
	for k, r := range rounds {
		if k+1 < minN {
			continue
		}
		var e est
		var ok bool
		if d.Binary == "old" {
			logs = logs[:0]
			for _, o := range pairs {
				if o.Target == target && o.Workload == workload && o.Round <= r {
					logs = append(logs, math.Log(o.Value/o.Host))
				}
			}
			e = oldEstimate(logs, workload)
			ok = e.ok()
		} else {
			e, ok = recomputed(d, target, workload, r)
		}
		if ok {
			out = append(out, curvePoint{Rounds: k + 1, Bytes: bytesTo(r), HW: e.halfWidthPP()})
		}
	}
	return out
}

// atBytes is the half-width a curve had reached when it had written b
// bytes (the last point at or below b), and whether it got that far.
func atBytes(c []curvePoint, b int64) (curvePoint, bool) {
	var best curvePoint
	found := false
	for _, p := range c {
		if p.Bytes <= b {
			best, found = p, true
		}
	}
	return best, found
}

// bytesToReach is the bytes a curve first reached a half-width of hw
// with, and whether it did.
func bytesToReach(c []curvePoint, hw float64) (int64, bool) {
	for _, p := range c {
		if p.HW <= hw {
			return p.Bytes, true
		}
	}
	return 0, false
}

// share is a count out of a total with its exact (Clopper–Pearson)
// binomial interval at the report's confidence.
type share struct {
	K, N      int
	Low, High float64
}

func shareOf(k, n int) share {
	s := share{K: k, N: n, Low: math.NaN(), High: math.NaN()}
	if n == 0 {
		return s
	}
	a := (1 - confidence) / 2
	s.Low, s.High = 0, 1
	if k > 0 {
		s.Low = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(a)
	}
	if k < n {
		s.High = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - a)
	}
	return s
}

func (s share) value() float64 {
	if s.N == 0 {
		return math.NaN()
	}
	return float64(s.K) / float64(s.N)
}

func (s share) String() string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%d/%d) [%.0f, %.0f]", 100*s.value(), s.K, s.N, 100*s.Low, 100*s.High)
}

func (s *share) add(ok bool) {
	s.N++
	if ok {
		s.K++
	}
}

// median is the median of xs, the mean of the two middle values when
// their number is even (stats.Median, as the product computes it): every
// median of the report is this one, so that the same runs never show two.
func median(xs []float64) float64 { return stats.Median(xs) }

// quantile is gonum's linearly interpolated quantile of xs (q in [0,1]):
// the empirical distribution function interpolated between the sorted
// values (Hyndman and Fan's type 4). Its q = 0.5 would be the lower middle
// value of an even sample, not the median: that one is median's.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	if q == 0.5 {
		return median(xs)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return stat.Quantile(q, stat.LinInterp, s, nil)
}

// spread summarises a sample: the A/A table's columns.
type spread struct {
	N                      int
	Median, Q1, Q3, Lo, Hi float64
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		nan := math.NaN()
		return spread{Median: nan, Q1: nan, Q3: nan, Lo: nan, Hi: nan}
	}
	return spread{N: len(xs), Median: median(xs), Q1: quantile(xs, 0.25), Q3: quantile(xs, 0.75),
		Lo: slices.Min(xs), Hi: slices.Max(xs)}
}

// detectorParams are the shipped defaults, which the benchmark's agents
// run with.
func detectorParams() detector.Params { return detector.ParamsFrom(config.Default().Detector) }

// fsyncX returns the detector's observations of a target, in round
// order: ln(target fsync p99 / host fsync p99).
func fsyncX(rounds []roundObs, target string) []float64 {
	rs := slices.Clone(rounds)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Round < rs[j].Round })
	var xs []float64
	for _, r := range rs {
		if r.Target == target && r.Workload == "fsync" {
			xs = append(xs, math.Log(r.Value/r.Host))
		}
	}
	return xs
}

// replay feeds a target's observations to a detector with the shipped
// parameters, from state st, and returns the final state: the same
// computation the agent made (a cross-check, and the baseline m₀, σ₀ and
// floor the agent never publishes).
func replay(st detector.State, rounds []roundObs, target string) detector.State {
	p := detectorParams()
	rs := slices.Clone(rounds)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Round < rs[j].Round })
	for _, r := range rs {
		if r.Target != target || r.Workload != "fsync" {
			continue
		}
		st, _ = p.Observe(st, detector.Observation{Round: r.Round, X: math.Log(r.Value / r.Host)})
	}
	return st
}

// measurementRounds keeps the rounds of measurement cycles (not of
// confirmation cycles, which run the fsync workload alone).
func measurementRounds(s agentSeries, phase string) []roundObs {
	keep := map[int64]bool{}
	for _, c := range s.Cycles {
		if c.Trigger == "api" && (phase == "" || c.Phase == phase) {
			keep[c.ID] = true
		}
	}
	var out []roundObs
	for _, r := range s.Rounds {
		if keep[r.CycleID] {
			out = append(out, r)
		}
	}
	return out
}

// slowdownVs is the shift of a target's fsync log ratios against a
// baseline median, as a factor: what the detector sees.
func slowdownVs(m0 float64, xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return math.Exp(median(xs) - m0)
}

// calibCurve is the calibration's slowdown per IOPS limit, made monotone
// (a lower limit never gives a smaller slowdown) by isotonic regression
// of the log slowdowns, and interpolated in log-log space.
type calibCurve struct {
	limits []float64 // descending
	logS   []float64 // fitted, non-decreasing
}

func newCalibCurve(limits []uint64, slowdowns []float64) calibCurve {
	type pt struct{ l, s float64 }
	var pts []pt
	for i, l := range limits {
		if s := slowdowns[i]; s > 0 && !math.IsInf(s, 0) {
			pts = append(pts, pt{float64(l), math.Log(s)})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].l > pts[j].l })
	// Pool adjacent violators: blocks of (mean, weight).
	type block struct {
		sum float64
		n   int
	}
	var blocks []block
	for _, p := range pts {
		blocks = append(blocks, block{p.s, 1})
		for len(blocks) > 1 {
			a, b := blocks[len(blocks)-2], blocks[len(blocks)-1]
			if a.sum/float64(a.n) <= b.sum/float64(b.n) {
				break
			}
			blocks = append(blocks[:len(blocks)-2], block{a.sum + b.sum, a.n + b.n})
		}
	}
	c := calibCurve{}
	i := 0
	for _, b := range blocks {
		for range b.n {
			c.limits = append(c.limits, pts[i].l)
			c.logS = append(c.logS, b.sum/float64(b.n))
			i++
		}
	}
	return c
}

// limitFor returns the IOPS limit expected to give the slowdown s, and the
// slowdown the curve predicts there (the nearest end of the curve when s
// lies outside it).
func (c calibCurve) limitFor(s float64) (uint64, float64) {
	if len(c.limits) == 0 {
		return 0, 0
	}
	ls := math.Log(s)
	if ls <= c.logS[0] {
		return uint64(c.limits[0]), math.Exp(c.logS[0])
	}
	for i := 1; i < len(c.limits); i++ {
		if ls <= c.logS[i] {
			a, b := c.logS[i-1], c.logS[i]
			if b == a {
				return roundLimit(c.limits[i]), s
			}
			f := (ls - a) / (b - a)
			l := math.Exp(math.Log(c.limits[i-1]) + f*(math.Log(c.limits[i])-math.Log(c.limits[i-1])))
			return roundLimit(l), s
		}
	}
	last := len(c.limits) - 1
	return uint64(c.limits[last]), math.Exp(c.logS[last])
}

// roundLimit keeps two significant digits: the calibration is not finer.
func roundLimit(l float64) uint64 {
	if l <= 0 {
		return 0
	}
	mag := math.Pow(10, math.Floor(math.Log10(l))-1)
	return uint64(math.Round(l/mag) * mag)
}

func headlineOf(workload string) string { return measure.HeadlineMetric(measure.Workload(workload)) }
