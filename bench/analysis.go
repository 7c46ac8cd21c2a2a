//go:build bench

package bench

import (
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// confidence of every interval in the report, as layerprobe uses.
const confidence = measure.DefaultConfidence

// runSubset is the part of a run made of its first maxRound rounds, with
// the bytes and wall time those rounds cost. A run's rounds are
// independent and in a fresh random order each, so the first k rounds of
// a longer run are what a k-round run does; its wall time is the time to
// the end of round k plus the run's own set-up and tear-down.
type runSubset struct {
	Rounds  int
	Samples []measure.Sample
	Results []measure.Result
	Bytes   int64
	Seconds float64
}

func subsetOf(r *report.Run, maxRound int) runSubset {
	if r == nil || len(r.Engines) == 0 {
		return runSubset{}
	}
	e := r.Engines[0]
	if maxRound <= 0 || maxRound > r.Rounds {
		maxRound = r.Rounds
	}
	sub := runSubset{Rounds: maxRound}
	var lastEnd, endOfSubset time.Time
	for _, s := range e.Samples {
		end := s.StartedAt.Add(time.Duration(s.DurationSeconds * float64(time.Second)))
		if end.After(lastEnd) {
			lastEnd = end
		}
		if s.Round > maxRound {
			continue
		}
		sub.Samples = append(sub.Samples, s)
		sub.Bytes += s.BytesWritten
		if end.After(endOfSubset) {
			endOfSubset = end
		}
	}
	sub.Results = measure.Summarize(sub.Samples, confidence)
	if maxRound == r.Rounds || lastEnd.IsZero() {
		sub.Seconds = r.DurationSeconds
	} else {
		setup := endOfSubset.Sub(r.StartedAt).Seconds()
		teardown := r.FinishedAt.Sub(lastEnd).Seconds()
		sub.Seconds = setup + max(teardown, 0)
	}
	return sub
}

// headline returns the overhead of a target and job in its headline metric.
func (s runSubset) headline(target, job string) (measure.Overhead, bool) {
	for _, r := range s.Results {
		if string(r.Target) == target && string(r.Workload) == job {
			o, ok := r.Overhead[headlineOf(job)]
			return o, ok && !math.IsNaN(o.Ratio)
		}
	}
	return measure.Overhead{}, false
}

// logRatios returns the per-round ln(target/host) of a job's headline
// metric, in round order.
func (s runSubset) logRatios(target, job string) []float64 {
	var out []float64
	for _, o := range roundsOf(0, s.Samples) {
		if o.Target == target && o.Job == job {
			out = append(out, math.Log(o.Value/o.Host))
		}
	}
	return out
}

func headlineOf(job string) string { return measure.HeadlineMetric(measure.Workload(job)) }

// halfWidthPP is the half-width of an interval of ratios in percentage
// points.
func halfWidthPP(o measure.Overhead) float64 { return 50 * (o.CIHigh - o.CILow) }

// quantile is gonum's linearly interpolated quantile of xs (q in [0,1]):
// the empirical distribution function interpolated between the sorted
// values (Hyndman and Fan's type 4).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
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
	return spread{N: len(xs), Median: stats.Median(xs), Q1: quantile(xs, 0.25), Q3: quantile(xs, 0.75),
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
		if r.Target == target && r.Job == "fsync" {
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
		if r.Target != target || r.Job != "fsync" {
			continue
		}
		st, _ = p.Observe(st, detector.Observation{Round: r.Round, X: math.Log(r.Value / r.Host)})
	}
	return st
}

// measurementRounds keeps the rounds of measurement cycles (not of
// confirmation cycles, which run the fsync job alone).
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
	return math.Exp(stats.Median(xs) - m0)
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
