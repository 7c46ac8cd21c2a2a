//go:build bench

package bench

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
)

// runsCommand is a run's command line as a user would type it.
func runsCommand(d *runDoc) string {
	if d == nil {
		return "–"
	}
	return "`layerprobe " + strings.Join(d.Args, " ") + "`"
}

func writePrecisionBytes(w *mdWriter, s settings, r *results) {
	w.p("## 1. Precision versus bytes: the earlier method and the adaptive one")
	if len(r.Drivers) == 0 {
		w.p("Not measured in this run.")
		return
	}
	var ex *driverResult
	for i := range r.Drivers {
		if r.Drivers[i].OldRounds != nil || r.Drivers[i].Unbounded != nil {
			ex = &r.Drivers[i]
			break
		}
	}
	if ex == nil {
		w.p("Not measured in this run.")
		return
	}
	w.p("Per driver, one run of each method with targets host, container and bind and more rounds than its default: "+
		"the earlier method (`%s`, %s: ten rounds of every workload by default, each round running every workload on "+
		"fresh files, the median of the per-round ratios with the sign-test interval) ran %s; the adaptive method "+
		"ran %s, a precision it cannot reach, so it went on until its budget ended it. The first k rounds of a run "+
		"are what a run stopped after k rounds gives (rounds are independent, in a fresh random order each), so "+
		"each curve follows the container's headline half-width round by round against what the run had written "+
		"by then, layout included: the earlier method's statistic recomputed from its samples, the adaptive "+
		"method's Hodges–Lehmann estimate with the signed-rank interval (`measure.Summarize`) over the workload's first "+
		"k rounds. Points are the default runs of section 2 (four targets, so more bytes per round).",
		shortRev(r.OldRev), orDash(r.OldVersion), runsCommand(ex.OldRounds), runsCommand(ex.Unbounded))
	var rows [][]string
	var panels []precisionPanel
	for _, dr := range r.Drivers {
		for _, workload := range workloads {
			oldC := precisionCurve(dr.OldRounds, "container", workload)
			newC := precisionCurve(dr.Unbounded, "container", workload)
			pn := precisionPanel{title: dr.Driver + " " + workload + " (" + headlineOf(workload) + ")", old: oldC, new: newC}
			for _, e := range dr.OldDefaults {
				if o, ok := estimateOf(&e, "container", workload); ok {
					pn.oldDefaults = append(pn.oldDefaults, curvePoint{Bytes: e.BytesWritten, HW: o.halfWidthPP()})
				}
			}
			for _, e := range dr.Defaults {
				if o, ok := estimateOf(&e, "container", workload); ok {
					pn.newDefaults = append(pn.newDefaults, curvePoint{Bytes: e.BytesWritten, HW: o.halfWidthPP()})
				}
			}
			panels = append(panels, pn)
			at := func(c []curvePoint) string {
				p, ok := atBytes(c, comparedRunBytes)
				if !ok {
					return "–"
				}
				return fmt.Sprintf("%s (%d rounds)", pp(p.HW), p.Rounds)
			}
			reach := func(c []curvePoint) string {
				b, ok := bytesToReach(c, goalHalfWidthPP)
				if !ok {
					if len(c) == 0 {
						return "–"
					}
					last := c[len(c)-1]
					return fmt.Sprintf("not in %s (%s)", gib(last.Bytes), pp(last.HW))
				}
				return gib(b)
			}
			gain := "–"
			po, okO := atBytes(oldC, comparedRunBytes)
			pnw, okN := atBytes(newC, comparedRunBytes)
			if okO && okN && pnw.HW > 0 {
				// Half-widths shrink as 1/√bytes, so the squared ratio at
				// equal bytes is the ratio of bytes at equal precision.
				gain = fmt.Sprintf("%.1f×", math.Pow(po.HW/pnw.HW, 2))
			}
			rows = append(rows, []string{dr.Driver, workload, at(oldC), at(newC), reach(oldC), reach(newC), gain})
		}
	}
	w.p("Half-width of the container's 95%% interval after %s written (the last round within it), the bytes "+
		"written when it first reached ±%.0f pp, and the precision per byte the adaptive method gains, "+
		"(half-width earlier / adaptive)² at %s: the earlier method would need that many times the bytes "+
		"for the adaptive method's interval.", gib(comparedRunBytes), goalHalfWidthPP, gib(comparedRunBytes))
	w.table([]string{"driver", "workload", "earlier, at 2.5 GiB", "adaptive, at 2.5 GiB", "earlier: ±3 pp after", "adaptive: ±3 pp after", "precision per byte"}, rows)
	if err := savePrecisionBytesPlot(s.plotDir(), panels, len(workloads)); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Half-width against GiB written, earlier and adaptive method, per driver and workload](bench/%s)", plotPrecisionBytes)
	}
	var stops []string
	for _, dr := range r.Drivers {
		if d := dr.Unbounded; d != nil {
			stops = append(stops, fmt.Sprintf("%s: %s in %s, %d rounds, stopped on %s", dr.Driver, gib(d.BytesWritten), dur(d.Seconds), d.Rounds, orDash(d.StopReason)))
		}
	}
	if len(stops) > 0 {
		w.p("The adaptive runs: %s. A workload's rounds are capped at 200; the adaptive runs spend their rounds "+
			"where the interval is widest for its cost, so the workloads' curves end at different bytes.", strings.Join(stops, "; "))
	}
}

func writeDefaults(w *mdWriter, s settings, r *results) {
	w.p("## 2. At the default settings: precision and cost of `layerprobe run`")
	var have bool
	for _, dr := range r.Drivers {
		have = have || len(dr.Defaults) > 0
	}
	if !have {
		w.p("Not measured in this run.")
		return
	}
	var cmd string
	for _, dr := range r.Drivers {
		if len(dr.Defaults) > 0 {
			cmd = runsCommand(&dr.Defaults[0])
			break
		}
	}
	w.p("%s with no configuration (targets container, bind and volume; `--precision 0.03`, `--max-bytes` %s "+
		"(2.5 GiB in runs before 5 Dec: the cost table shows what they wrote), `--max-duration 5m`), run back to back on each driver as a user would run it: the figures of goals 1 to 3.", cmd, gib(goalRunBytes))
	var costRows [][]string
	for _, dr := range r.Drivers {
		n := len(dr.Defaults)
		if n == 0 {
			continue
		}
		b, sec, rd := runBytes(dr.Defaults), runSeconds(dr.Defaults), runRounds(dr.Defaults)
		costRows = append(costRows, []string{dr.Driver, fmt.Sprint(n), gib(int64(median(b))), gib(int64(quantile(b, 1))),
			dur(median(sec)), dur(quantile(sec, 1)), fmt.Sprintf("%.0f", median(rd)), stopReasons(runStops(dr.Defaults))})
	}
	w.p("**Cost** per run:")
	w.table([]string{"driver", "runs", "written (median)", "max", "time (median)", "max", "rounds (median)", "stopped on"}, costRows)
	var rows [][]string
	var groups []string
	var oldHW, newHW [][]float64
	for _, dr := range r.Drivers {
		if len(dr.Defaults) == 0 {
			continue
		}
		for _, workload := range workloads {
			hw := halfWidths(estimates(dr.Defaults, "container", workload))
			oh := halfWidths(estimates(dr.OldDefaults, "container", workload))
			within := 0
			for _, h := range hw {
				if h <= goalHalfWidthPP {
					within++
				}
			}
			old := "–"
			if len(oh) > 0 {
				old = fmt.Sprintf("%s (%s – %s, %d runs)", pp(median(oh)), pp(quantile(oh, 0)), pp(quantile(oh, 1)), len(oh))
			}
			var bindHW []float64
			for _, t := range []string{"bind", "volume"} {
				bindHW = append(bindHW, median(halfWidths(estimates(dr.Defaults, t, workload))))
			}
			rows = append(rows, []string{dr.Driver, workload + " (" + headlineOf(workload) + ")", pp(median(hw)), pp(quantile(hw, 0.9)),
				fmt.Sprintf("%d of %d", within, len(hw)), pp(bindHW[0]), pp(bindHW[1]), old})
			groups = append(groups, dr.Driver+"\n"+workload)
			oldHW, newHW = append(oldHW, oh), append(newHW, hw)
		}
	}
	w.p("**Precision**: the half-width of the 95%% interval of every target's headline overhead, container "+
		"(median, 90th percentile, runs within ±%.0f pp), bind and volume (medians), next to the earlier method's "+
		"default runs (%s with no configuration: four targets, ten rounds; its statistic recomputed from the samples).",
		goalHalfWidthPP, runsCommand(firstOldDefault(r)))
	w.table([]string{"driver", "workload", "container: median", "p90", "≤ 3 pp", "bind: median", "volume: median", "earlier default: median (range)"}, rows)
	if err := saveHalfWidthPlot(s.plotDir(), groups, oldHW, newHW); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Half-widths of the default runs, earlier and adaptive method](bench/%s)", plotHalfWidths)
	}
}

func firstOldDefault(r *results) *runDoc {
	for _, dr := range r.Drivers {
		if len(dr.OldDefaults) > 0 {
			return &dr.OldDefaults[0]
		}
	}
	return nil
}

func writeBias(w *mdWriter, r *results) {
	w.p("## 3. Bias: the A/A control and the reference")
	var aaRows, refRows [][]string
	for _, dr := range r.Drivers {
		for _, workload := range workloads {
			bind := ratios(estimates(dr.Defaults, "bind", workload))
			if len(bind) > 0 {
				ci := medianCI(bind)
				aaRows = append(aaRows, []string{dr.Driver, workload + " (" + headlineOf(workload) + ")", fmt.Sprint(len(bind)), pct(ci.Median),
					fmt.Sprintf("[%s, %s]", pct(ci.Low), pct(ci.High)), pct(quantile(bind, 0.25)) + " – " + pct(quantile(bind, 0.75)),
					yesNo(math.Abs(100*ci.Median) <= goalBiasPP)})
			}
			ref, ok := referenceOf(dr, "container", workload)
			if !ok {
				continue
			}
			cont := estimates(dr.Defaults, "container", workload)
			oldCont := estimates(dr.OldDefaults, "container", workload)
			inside, med := 0, math.NaN()
			for _, e := range cont {
				if ref.covers(e.Ratio) {
					inside++
				}
			}
			if len(cont) > 0 {
				med = median(ratios(cont))
			}
			oldMed := "–"
			if len(oldCont) > 0 {
				om := median(ratios(oldCont))
				oldMed = fmt.Sprintf("%s (%s)", pct(om), insideWord(ref.covers(om)))
			}
			refBind := "–"
			if rb, ok := referenceOf(dr, "bind", workload); ok {
				refBind = estCell(rb.est)
			}
			refRows = append(refRows, []string{dr.Driver, workload, estCell(ref.est), refBind, pct(med), insideWord(ref.covers(med)),
				fmt.Sprintf("%d of %d", inside, len(cont)), oldMed})
		}
	}
	if len(aaRows) == 0 && len(refRows) == 0 {
		w.p("Not measured in this run.")
		return
	}
	w.p("**A/A**: `bind` writes the host's own files through the probe container's bind mount, so its overhead should be 0. "+
		"The median of the default runs' bind estimates, with the sign-test interval of that median over the runs "+
		"(goal: 0 ± %.0f pp):", goalBiasPP)
	w.table([]string{"driver", "workload", "runs", "median bind estimate", "its 95% interval", "IQR over runs", "within ±1 pp"}, aaRows)
	var refCmd string
	for _, dr := range r.Drivers {
		if len(dr.References) > 0 {
			refCmd = runsCommand(&dr.References[0])
			break
		}
	}
	w.p("**Reference**: %s with targets container and bind, per driver: the default profile's random-write and fsync "+
		"workloads with 5 s executions after a 1 s ramp and its sequential workload on a 256 MiB file written once (32 times the "+
		"default's), each on files of its own per round, an independent and slow measurement of the same overheads. Where "+
		"it is several runs, one estimate of them all, the runs as replicates: the mean of their estimates (on the log "+
		"scale) with a t interval from their spread, so that an error fixed within one run is part of the interval "+
		"instead of passing for the truth. Does the default runs' "+
		"container estimate lie inside the reference's interval?", refCmd)
	w.table([]string{"driver", "workload", "reference: container", "reference: bind", "default runs: median container", "inside?", "runs inside", "earlier default: median"}, refRows)
	var when []string
	for _, dr := range r.Drivers {
		if s, _ := referenceTiming(dr); s != "" {
			when = append(when, s)
		}
	}
	if len(when) > 0 {
		w.p("When they ran (a shared disk drifts over hours, so a reference measured apart from the default runs "+
			"compares different hours as well as different methods): %s.", strings.Join(when, "; "))
	}
	writeReferenceRuns(w, r)
	writeSharedFile(w, r)
}

// referenceTiming says when a driver's reference and default runs ran:
// interleaved (then apart is false), or one after the other and how far
// apart. Empty when either is missing.
func referenceTiming(dr driverResult) (text string, apart bool) {
	span := func(runs []runDoc) (first, last time.Time) {
		for _, d := range runs {
			end := d.StartedAt.Add(time.Duration(d.Seconds * float64(time.Second)))
			if first.IsZero() || d.StartedAt.Before(first) {
				first = d.StartedAt
			}
			if end.After(last) {
				last = end
			}
		}
		return first, last
	}
	rf, rl := span(dr.References)
	df, dl := span(dr.Defaults)
	if rf.IsZero() || df.IsZero() {
		return "", false
	}
	between := func(a, b time.Time) string {
		a, b = a.UTC(), b.UTC()
		if a.YearDay() == b.YearDay() {
			return a.Format("2 Jan 15:04") + "–" + b.Format("15:04") + " UTC"
		}
		return a.Format("2 Jan 15:04") + " – " + b.Format("2 Jan 15:04") + " UTC"
	}
	runs := fmt.Sprintf("reference %s %s, default %s %s", runsWord(len(dr.References)), between(rf, rl),
		runsWord(len(dr.Defaults)), between(df, dl))
	switch {
	case rf.After(df) && rl.Before(dl):
		return fmt.Sprintf("%s: %s, interleaved", dr.Driver, runs), false
	case !rf.Before(dl):
		return fmt.Sprintf("%s: %s, the reference %s after them", dr.Driver, runs, roughDur(rf.Sub(dl))), true
	case !df.Before(rl):
		return fmt.Sprintf("%s: %s, the reference %s before them", dr.Driver, runs, roughDur(df.Sub(rl))), true
	case !rf.After(df) && !rl.Before(dl):
		// The reference began before the default runs and ended after
		// them; the spans alone cannot tell whether any ran among them,
		// so this is not counted as interleaved.
		return fmt.Sprintf("%s: %s, the reference before and after them", dr.Driver, runs), true
	}
	return fmt.Sprintf("%s: %s, overlapping in part", dr.Driver, runs), true
}

// roughDur is a gap between sections, to the minute.
func roughDur(d time.Duration) string { return dur(d.Round(time.Minute).Seconds()) }

// writeReferenceRuns lists each reference run's estimates beside their
// combination: how far one run alone could be from the others.
func writeReferenceRuns(w *mdWriter, r *results) {
	var rows [][]string
	for _, dr := range r.Drivers {
		if len(dr.References) < 2 {
			continue
		}
		for _, target := range []string{"container", "bind"} {
			for _, workload := range workloads {
				c, ok := referenceOf(dr, target, workload)
				if !ok {
					continue
				}
				var each []string
				var hw []float64
				for i := range dr.References {
					if e, ok := estimateOf(&dr.References[i], target, workload); ok {
						each = append(each, pct(e.Ratio))
						hw = append(hw, e.halfWidthPP())
					} else {
						each = append(each, "–")
					}
				}
				rows = append(rows, []string{dr.Driver, target, workload, strings.Join(each, ", "), fmt.Sprintf("%.1f pp", 100*c.SD),
					fmt.Sprintf("±%.1f pp", median(hw)), estCell(c.est)})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	w.p("**The reference's runs**: each run's estimate in the order they ran, their standard deviation (on the log " +
		"scale, about percentage points: what one run alone could be off by), the median half-width of one run's own " +
		"95%% interval, and their combination, the reference above.")
	w.table([]string{"driver", "target", "workload", "each run", "SD between runs", "one run's half-width (median)", "combined"}, rows)
}

// writeSharedFile splits the A/A pair by which of host and bind ran first
// in a round: what the arms differ by, and what running second does. Where
// the two shared a file, running second is the file's second execution in
// a round, which the targets with files of their own never see; where bind
// had files of its own, it is the position alone.
func writeSharedFile(w *mdWriter, r *results) {
	var rows [][]string
	cell := func(m meanSE) string { return fmt.Sprintf("%s ± %.1f", signedPP(m.Mean), 100*m.SE) }
	for _, dr := range r.Drivers {
		for _, m := range []struct {
			name string
			runs []runDoc
		}{{"default runs", dr.Defaults}, {"reference", dr.References}} {
			for _, shared := range []bool{true, false} {
				for _, workload := range workloads {
					s := orderSplitOf(m.runs, workload, shared)
					if s.BindFirst.N < 2 || s.HostFirst.N < 2 {
						continue
					}
					sec := s.Second()
					files, eff := "own", "–"
					if shared {
						files, eff = "shared", fmt.Sprintf("%s ± %.1f", signedPP(-sec.Mean/2), 50*sec.SE)
					}
					rows = append(rows, []string{dr.Driver, m.name, files, workload, fmt.Sprintf("%d / %d", s.BindFirst.N, s.HostFirst.N),
						cell(s.BindFirst), cell(s.HostFirst), cell(s.Arm()), cell(sec), eff})
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	w.p("**The shared file**: in runs measured before bind had files of its own (files: shared) host and bind measured " +
		"one file (bind was the host's directory), every other target a file of its own; in later runs (files: own) bind " +
		"lays out files of its own like the others. Over the rounds of the default runs and of the reference, bind's overhead over host " +
		"(mean of ln, in about percentage points, ± one standard error; positive is slower) split by which of the two ran " +
		"first in a round: their mean is what the arms differ by whichever ran first, half their difference what running " +
		"second reads against running first. On a shared file that is the file's second execution in a round: it cancels " +
		"between bind and host over the balanced orders, but host was the second execution half the time and a target " +
		"with files of its own never was, so its estimate against host moved by minus half of it (last column). With " +
		"files of their own it is the position alone, which the balanced orders cancel for every target. " +
		"`python3 bench/aa_position.py` splits the default runs' rounds by position.")
	w.table([]string{"driver", "measurement", "files", "workload", "rounds (bind first / host first)", "bind − host, bind first", "bind − host, host first",
		"between the arms", "running second vs first", "effect on targets with files of their own"}, rows)
}

func insideWord(ok bool) string {
	if ok {
		return "inside"
	}
	return "**outside**"
}

func writeCoverage(w *mdWriter, s settings, r *results) {
	w.p("## 4. Coverage: do the 95%% intervals hold 95%% of the time?")
	p := pooledCoverage(r)
	aa, ref, runs, aaW, refW := p.aa, p.ref, p.runs, p.aaWiden, p.refWiden
	if aa.N == 0 && ref.N == 0 {
		w.p("Not measured in this run.")
		return
	}
	w.p("Over the default runs of section 2: the share of runs whose `bind` interval holds 0 (A/A: the truth is " +
		"known), and whose `container` interval holds the reference's estimate (section 3; the reference has its own " +
		"error, so this share is a lower bound), and whose `container` estimate agrees with the reference's within both " +
		"intervals (their difference no more than the root of the sum of the squares of their half-widths on the sides " +
		"that face each other: the reference's error allowed for). In brackets the exact (Clopper–Pearson) 95%% interval of each share. " +
		"The goal: at least 93%%. *Widening* is the factor by which the intervals would have to be wider about their " +
		"estimates for 93%% of them to cover.")
	var rows [][]string
	var panels []intervalPanel
	for _, dr := range r.Drivers {
		for _, workload := range workloads {
			c := coverageOf(dr, workload)
			if c.aa.N == 0 && c.ref.N == 0 {
				continue
			}
			rows = append(rows, []string{dr.Driver, workload, shareOf(c.aa.K, c.aa.N).String(), shareOf(c.ref.K, c.ref.N).String(),
				shareOf(c.joint.K, c.joint.N).String(),
				fmt.Sprintf("%.2f / %.2f", widening(c.aaEst, func(int) float64 { return 0 }, goalCoverage),
					widening(c.refEst, func(int) float64 { return c.refPoint }, goalCoverage))})
			pn := intervalPanel{title: dr.Driver + " " + workload, container: c.refEst, bind: c.aaEst, ref: math.NaN()}
			if re, ok := referenceOf(dr, "container", workload); ok {
				pn.ref, pn.refLow, pn.refHigh = re.Ratio, re.Low, re.High
			}
			panels = append(panels, pn)
		}
	}
	rows = append(rows, []string{"all", "all", aa.String(), ref.String(), p.joint.String(), fmt.Sprintf("%.2f / %.2f", aaW, refW)})
	w.table([]string{"driver", "workload", "A/A: bind covers 0", "reference: container covers its estimate",
		"container and reference agree within both errors", "widening (A/A / reference)"}, rows)
	w.p("%d runs in all.", runs)
	writeSpread(w, r)
	if err := saveIntervalsPlot(s.plotDir(), panels, len(workloads)); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Every default run's intervals against the reference](bench/%s)", plotIntervals)
	}
}

// writeSpread compares, for every target and workload, how far the default
// runs' estimates spread between runs with how far their intervals promise
// (half-width / 1.96 is the σ a 95% interval implies). It needs no
// reference: a ratio well above 1 is an error fixed within a run that its
// interval cannot see, such as where the run's files lie.
func writeSpread(w *mdWriter, r *results) {
	var rows [][]string
	for _, dr := range r.Drivers {
		for _, target := range []string{"container", "bind", "volume"} {
			for _, workload := range workloads {
				sp := runSpreadOf(estimates(dr.Defaults, target, workload))
				if sp.runs < 2 {
					continue
				}
				rows = append(rows, []string{dr.Driver, target, workload, fmt.Sprint(sp.runs), pct(sp.median), fmt.Sprintf("%.1f pp", sp.sd),
					pp(sp.medianHalfWidth), fmt.Sprintf("%.2f", sp.ratio()), shareOf(sp.covering, sp.runs).String()})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	w.p("**Spread between runs**: the standard deviation of the default runs' estimates against the σ their intervals " +
		"promise (median half-width / 1.96). Honest intervals give a ratio near 1 and hold the runs' own median about " +
		"95%% of the time; this check needs no reference, whose own error it avoids. A ratio well above 1 is an error " +
		"that is fixed within a run and varies between runs (docs/methodology.md, Placement).")
	w.table([]string{"driver", "target", "workload", "runs", "median estimate", "σ between runs", "median half-width",
		"σ / promised σ", "intervals holding the median"}, rows)
}

// runSpread is the default runs' spread of one target and workload.
type runSpread struct {
	runs, covering              int
	median, sd, medianHalfWidth float64 // sd and half-width in pp
}

func (s runSpread) ratio() float64 { return s.sd / (s.medianHalfWidth / 1.96) }

func runSpreadOf(es []est) runSpread {
	var ok []est
	for _, e := range es {
		if e.ok() {
			ok = append(ok, e)
		}
	}
	out := runSpread{runs: len(ok), median: math.NaN(), sd: math.NaN(), medianHalfWidth: math.NaN()}
	if len(ok) < 2 {
		return out
	}
	out.median = median(ratios(ok))
	out.sd = 100 * stat.StdDev(ratios(ok), nil)
	out.medianHalfWidth = median(mapOf(ok, est.halfWidthPP))
	for _, e := range ok {
		if e.covers(out.median) {
			out.covering++
		}
	}
	return out
}
