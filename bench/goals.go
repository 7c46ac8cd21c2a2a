//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// goalCheck is one of the method's goals, judged from the results.
type goalCheck struct {
	goal, scope, figure, status, why string
}

const (
	statusMet         = "met"
	statusMissed      = "missed"
	statusNotMeasured = "not measured"
)

func judge(ok bool) string {
	if ok {
		return statusMet
	}
	return statusMissed
}

// evaluateGoals judges every goal from the raw results.
func evaluateGoals(r *results) []goalCheck {
	var out []goalCheck
	for _, dr := range r.Drivers {
		out = append(out, runPrecisionGoals(dr)...)
	}
	if d := r.Detection; d != nil {
		out = append(out, agentPrecisionGoals(d)...)
	}
	out = append(out, windowGoals(r)...)
	for _, dr := range r.Drivers {
		out = append(out, biasGoals(dr)...)
	}
	out = append(out, coverageGoals(r)...)
	out = append(out, detectionGoals(r)...)
	return out
}

// runGoalHalfWidthPP is the median half-width a default run must reach on
// a driver: ±5 pp on overlay2 and ±8 on btrfs on this machine's shared
// disk, ±3 on the quiet device (ext4 in RAM, no disk noise), where what is
// left is the method's own.
func runGoalHalfWidthPP(driver string) float64 {
	switch driver {
	case "overlay2":
		return 5
	case "btrfs":
		return 8
	}
	return goalHalfWidthPP
}

// runPrecisionGoals: goal 1 for `layerprobe run` at its defaults.
func runPrecisionGoals(dr driverResult) []goalCheck {
	var out []goalCheck
	n := len(dr.Defaults)
	bytes, secs := runBytes(dr.Defaults), runSeconds(dr.Defaults)
	stops := runStops(dr.Defaults)
	goalPP := runGoalHalfWidthPP(dr.Driver)
	// Every workload of the default profile: the three data-path ones and
	// smallfiles (its headline ops/s), which runs recorded before it
	// joined the profile lack (not measured).
	for _, workload := range profileWorkloads() {
		c := goalCheck{goal: fmt.Sprintf("1. `run`: container %s %s median half-width ≤ %.0f pp", workload, headlineOf(workload), goalPP), scope: dr.Driver}
		hw := halfWidths(estimates(dr.Defaults, "container", workload))
		if len(hw) == 0 {
			c.status, c.figure = statusNotMeasured, "–"
			out = append(out, c)
			continue
		}
		med := median(hw)
		within := 0
		for _, h := range hw {
			if h <= goalPP {
				within++
			}
		}
		c.figure = fmt.Sprintf("median %s, p90 %s over %d runs (%d ≤ %.0f pp)", pp(med), pp(quantile(hw, 0.9)), len(hw), within, goalPP)
		c.status = judge(med <= goalPP)
		if c.status == statusMissed {
			f := math.Pow(med/goalPP, 2)
			c.why = fmt.Sprintf("The interval narrows as 1/√(bytes measured); at the noise measured here ±%.0f pp needs "+
				"(%.1f/%.0f)² = %.1f× the median run, about %s and %s per run instead of %s and %s (runs stopped on: %s).",
				goalPP, med, goalPP, f, gib(int64(f*median(bytes))), dur(f*median(secs)),
				gib(int64(median(bytes))), dur(median(secs)), stopReasons(stops))
			if mostly(stops) == "time" {
				c.why += " Most runs ended on the time budget (`--max-duration`), before the byte budget: on this disk time, not bytes, binds first."
			}
			if share := median(headlineShares(dr.Defaults)); share > 0 && share < 1 {
				bound := med * math.Sqrt(share)
				verdict := "no split of the budget meets the goal; only less noise per round, cheaper rounds or more bytes can"
				if bound <= goalPP {
					verdict = "so the budget's split could meet the goal"
				}
				c.why += fmt.Sprintf(" The host's and the container's executions wrote %.0f%% of a run's bytes (the rest: laying out "+
					"files, bind and the volume); with every byte on them, at the same noise per round, the median would be "+
					"about %s: %s.", 100*share, pp(bound), verdict)
			}
		}
		out = append(out, c)
	}
	c := goalCheck{goal: "1. `run`: bytes written ≤ " + gib(goalRunBytes), scope: dr.Driver}
	if n == 0 {
		c.status, c.figure = statusNotMeasured, "–"
	} else {
		mx := quantile(bytes, 1)
		c.figure = fmt.Sprintf("median %s, max %s over %d runs", gib(int64(median(bytes))), gib(int64(mx)), n)
		c.status = judge(mx <= goalRunBytes)
		if c.status == statusMissed {
			c.why = "These runs kept `--max-bytes` by estimate: a round started when the workload's last round would fit again, and one that wrote more than its predecessor overshot by part of a round. The probe now lowers a round's byte caps to what is left when its worst case would not fit (a hard cap)."
		}
	}
	return append(out, c)
}

// agentPrecisionGoals: goal 1 for an agent cycle (the published window).
func agentPrecisionGoals(d *detectionResult) []goalCheck {
	var out []goalCheck
	window := d.window()
	for _, workload := range workloads {
		c := goalCheck{goal: fmt.Sprintf("1. agent: published container %s half-width ≤ %.0f pp", headlineOf(workload), goalHalfWidthPP), scope: d.Driver}
		hw := publishedHalfWidths(d, "container", workload)
		if len(hw) == 0 {
			c.status, c.figure = statusNotMeasured, "–"
			out = append(out, c)
			continue
		}
		med := median(hw)
		c.figure = fmt.Sprintf("median %s, p90 %s after %d counted cycles", pp(med), pp(quantile(hw, 0.9)), len(hw))
		c.status = judge(med <= goalHalfWidthPP)
		if c.status == statusMissed {
			need := math.Ceil(float64(window) * math.Pow(med/goalHalfWidthPP, 2))
			c.why = fmt.Sprintf("The published interval rests on the window of the last %d rounds of each workload (`agent.window_rounds`), "+
				"whatever a cycle writes: ±%.0f pp at the noise measured here needs a window of about %.0f rounds, (%.1f/%.0f)² × %d, "+
				"which at the cycles' pace means older rounds in the estimate.", window, goalHalfWidthPP, need, med, goalHalfWidthPP, window)
		}
		out = append(out, c)
	}
	// A cycle spends its cap while the window is wide and not full; the
	// goal holds the cycles after that (stopped on precision, or on
	// rounds: a full window) to what a cycle wrote before the cap grew.
	c := goalCheck{goal: fmt.Sprintf("1. agent: bytes per cycle once the window is narrow or full ≤ %d MiB", goalCycleBytes>>20), scope: d.Driver}
	bytes, _, _, stops := cycleFigures(d, "api")
	var settled []float64
	for i, b := range bytes {
		if stops[i] == "precision" || stops[i] == "rounds" {
			settled = append(settled, b)
		}
	}
	switch {
	case len(bytes) == 0:
		c.status, c.figure = statusNotMeasured, "–"
	case len(settled) == 0:
		c.status = statusNotMeasured
		c.figure = fmt.Sprintf("no counted cycle stopped on precision or rounds (median %s, max %s over %d; stops: %s)",
			gib(int64(median(bytes))), gib(int64(quantile(bytes, 1))), len(bytes), stopReasons(stops))
	default:
		mx := quantile(settled, 1)
		c.figure = fmt.Sprintf("median %s, max %s over %d of %d counted cycles (stops: %s)", gib(int64(median(settled))), gib(int64(mx)),
			len(settled), len(bytes), stopReasons(stops))
		cb, _, _, _ := cycleFigures(d, "confirm")
		if len(cb) > 0 {
			c.figure += fmt.Sprintf("; %d confirmation cycles, max %s", len(cb), gib(int64(quantile(cb, 1))))
		}
		c.status = judge(mx <= goalCycleBytes)
	}
	return append(out, c)
}

// windowGoals: goal 1 for the agent's published window, replayed from the
// default runs of the current method (windowReplays).
func windowGoals(r *results) []goalCheck {
	var out []goalCheck
	for _, wr := range windowReplays(r) {
		c := goalCheck{goal: fmt.Sprintf("1. agent: container %s %s half-width ≤ %.0f pp over the window within %.0f days, replayed from the default runs",
			wr.Workload, headlineOf(wr.Workload), goalHalfWidthPP, goalWindowDays), scope: wr.Driver}
		c.figure = fmt.Sprintf("median %s, p90 %s at %d rounds (%d runs' %d rounds in blocks of %d, a cycle's)",
			pp(wr.HW), pp(wr.HW90), wr.Window, wr.Runs, wr.Rounds, wr.PerCycle)
		c.figure += fmt.Sprintf("; ±%.0f pp at %d rounds (replayed: %s), %d cycles, %.1f days", goalHalfWidthPP, wr.Need, pp(wr.NeedHW),
			wr.NeedCycles, wr.NeedDays)
		c.status = judge(wr.Need <= wr.Window && wr.NeedDays <= goalWindowDays)
		switch {
		case wr.Need > wr.Window:
			c.why = fmt.Sprintf("±%.0f pp needs a window of about %d rounds, (%.1f/%.0f)² × %d (replayed at %d: median %s), "+
				"more than the agent's window of %d holds (`agent.window_rounds`).",
				goalHalfWidthPP, wr.Need, wr.HW, goalHalfWidthPP, wr.Window, wr.Need, pp(wr.NeedHW), wr.Window)
		case c.status == statusMissed:
			c.why = fmt.Sprintf("±%.0f pp needs about %d rounds, which a default agent makes in %d cycles of %d rounds "+
				"(its %s cap): %.1f days at its interval, more than %.0f.",
				goalHalfWidthPP, wr.Need, wr.NeedCycles, wr.PerCycle, gib(int64(config.Default().Agent.Budget.MaxBytes)),
				wr.NeedDays, goalWindowDays)
		}
		out = append(out, c)
	}
	return out
}

// biasGoals: goal 2, the A/A control and the reference.
func biasGoals(dr driverResult) []goalCheck {
	var out []goalCheck
	for _, workload := range workloads {
		c := goalCheck{goal: fmt.Sprintf("2. bind A/A %s reads 0 ± %.0f pp (median over runs)", headlineOf(workload), goalBiasPP), scope: dr.Driver}
		bind := ratios(estimates(dr.Defaults, "bind", workload))
		if len(bind) == 0 {
			c.status, c.figure = statusNotMeasured, "–"
		} else {
			ci := medianCI(bind)
			c.figure = fmt.Sprintf("%s over %d runs (sign-test interval of that median [%s, %s], %.0f%% coverage)",
				pct(ci.Median), len(bind), pct(ci.Low), pct(ci.High), 100*ci.Coverage)
			c.status = judge(math.Abs(100*ci.Median) <= goalBiasPP)
			if c.status == statusMissed {
				// Too few runs for a 95% sign-test interval (5 at least):
				// the interval has less coverage and proves nothing.
				weak := ci.Coverage < confidence
				switch {
				case weak:
					c.why = fmt.Sprintf("%d runs are too few for a %.0f%% interval of their median (this one covers %.0f%%): "+
						"whether the offset of %s is systematic or noise, this run cannot tell.",
						len(bind), 100*confidence, 100*ci.Coverage, pct(ci.Median))
				case ci.Low > 0 || ci.High < 0:
					c.why = fmt.Sprintf("The interval of the runs' median excludes 0: a systematic difference of %s between the bind "+
						"mount and the host path for this workload, not noise: where the arms' files lie (in runs before the layout order "+
						"was random, host always laid out first: methodology.md, Placement), the arms' order within a round, or the "+
						"path through the container (mount namespace, cgroups, seccomp, `docker exec`), though none of those cost "+
						"more than about 2.5 points apart from the files in bench/arms.py.", pct(ci.Median))
					for _, shared := range []bool{true, false} {
						if v := orderSplitOf(dr.Defaults, workload, shared).verdict(); v != "" {
							c.why += " " + v
						}
					}
				default:
					c.why = fmt.Sprintf("The interval of the runs' median includes 0: the offset is within what %d runs can tell; "+
						"about %.0f runs would narrow that interval to ±%.0f pp at the spread measured.",
						len(bind), float64(len(bind))*math.Pow((ci.High-ci.Low)/2*100/goalBiasPP, 2), goalBiasPP)
				}
			}
		}
		out = append(out, c)
	}
	for _, workload := range workloads {
		c := goalCheck{goal: fmt.Sprintf("2. container %s inside the reference's interval", headlineOf(workload)), scope: dr.Driver}
		ref, okRef := referenceOf(dr, "container", workload)
		cont := estimates(dr.Defaults, "container", workload)
		if !okRef || len(cont) == 0 {
			c.status, c.figure = statusNotMeasured, "–"
			out = append(out, c)
			continue
		}
		med := median(ratios(cont))
		inside := 0
		for _, e := range cont {
			if ref.covers(e.Ratio) {
				inside++
			}
		}
		c.figure = fmt.Sprintf("median %s vs reference %s [%s, %s]; %d of %d runs inside", pct(med), pct(ref.Ratio), pct(ref.Low), pct(ref.High), inside, len(cont))
		c.status = judge(ref.covers(med))
		if c.status == statusMissed {
			off := med - ref.High
			if med < ref.Low {
				off = med - ref.Low
			}
			c.why = fmt.Sprintf("The default runs' median lies %+.1f pp outside the reference's interval (±%.1f pp from %d rounds of the "+
				"long profile in %s). The reference measures the same workloads at another length: a difference that grows with the "+
				"execution's length is a start-up or steady-state effect the short executions carry; one that does not is the "+
				"file placement both sides of one measurement share (see methodology.md, Limits).", 100*off, ref.halfWidthPP(), ref.N,
				runsWord(ref.Runs))
			if t, apart := referenceTiming(dr); apart {
				c.why += " The two ran apart (" + t + "): what the disk did in between is part of the difference; " +
					"with both sections selected the reference's runs are interleaved with the default runs."
			}
			c.why += sharedFileWhy(dr, workload, med)
			c.why += armToArmWhy(dr, workload, med)
		}
		out = append(out, c)
	}
	return out
}

// coverageGoals: goal 3, pooled over every driver and workload.
func coverageGoals(r *results) []goalCheck {
	p := pooledCoverage(r)
	aa, ref, runs, aaW, refW := p.aa, p.ref, p.runs, p.aaWiden, p.refWiden
	var out []goalCheck
	for _, v := range []struct {
		name  string
		s     share
		widen float64
	}{{"3. coverage ≥ 93%: bind (A/A) interval covers 0", aa, aaW},
		{"3. coverage ≥ 93%: container interval covers the reference's estimate", ref, refW}} {
		c := goalCheck{goal: v.name, scope: "all"}
		if v.s.N == 0 {
			c.status, c.figure = statusNotMeasured, "–"
			out = append(out, c)
			continue
		}
		c.figure = fmt.Sprintf("%s over %d runs × 3 workloads", v.s, runs)
		c.status = judge(v.s.value() >= goalCoverage && runs >= goalCoverageRuns)
		if c.status == statusMissed {
			switch {
			case v.s.value() < goalCoverage:
				c.why = fmt.Sprintf("%d of %d intervals missed. For 93%% to hold they would have to be %.2f× as wide about "+
					"their estimates (the 93%% quantile of each miss's distance over its half-width on that side)", v.s.N-v.s.K, v.s.N, v.widen)
				if strings.Contains(v.name, "reference") {
					c.why += fmt.Sprintf("; the reference's own error adds to the misses, as it is taken for the truth: allowing for it "+
						"(a run agrees with the reference when their difference is within the root of the sum of the squares of "+
						"their half-widths), %s agree", p.joint)
				}
				c.why += ". The per-workload figures are in section 4."
			default:
				c.why = fmt.Sprintf("Only %d runs.", runs)
			}
		}
		out = append(out, c)
	}
	return out
}

// detectionGoals: goal 4.
func detectionGoals(r *results) []goalCheck {
	var out []goalCheck
	d := r.Detection
	rp := detectionReplay(r)
	for _, g := range goalDetect {
		c := goalCheck{goal: fmt.Sprintf("4. %s fsync p99 slowdown confirmed within %d cycle(s)", times(g.level), g.cycles), scope: "overlay2"}
		var lv *levelResult
		if d != nil {
			for i := range d.Levels {
				if d.Levels[i].Nominal == g.level {
					lv = &d.Levels[i]
				}
			}
		}
		replayed := ""
		if sr, ok := rp.shift(g.level); ok {
			replayed = fmt.Sprintf("; by replay %.0f%% within %d", 100*sr.within(g.cycles), g.cycles)
		}
		if lv == nil {
			c.status, c.figure = statusNotMeasured, "–"+replayed
			out = append(out, c)
			continue
		}
		st, _ := baselineOf(d)
		ms := slowdownVs(st.Baseline.Median, fsyncX(lv.Series.Rounds, "container"))
		if lv.FlaggedAfter > 0 {
			c.figure = fmt.Sprintf("flagged after %d cycle(s) at a measured %s", lv.FlaggedAfter, times(ms))
		} else {
			c.figure = fmt.Sprintf("not flagged in %d cycles at a measured %s", d.CapCycles, times(ms))
		}
		c.figure += replayed
		c.status = judge(lv.FlaggedAfter > 0 && lv.FlaggedAfter <= g.cycles)
		if c.status == statusMissed {
			c.why = detectionWhy(d, rp, g.level, g.cycles, ms)
		}
		out = append(out, c)
	}
	for _, rr := range rp.falseAlarms {
		c := goalCheck{goal: "4. ≤ 1 false confirmation per 1000 A/A cycles (replay)", scope: rr.driver}
		if rr.res.Cycles == 0 {
			c.status, c.figure = statusNotMeasured, "–"
		} else {
			c.figure = fmt.Sprintf("%d in %d simulated cycles (%.2f per 1000; %d suspicions)", rr.res.Confirmations, rr.res.Cycles, rr.res.perThousand(), rr.res.Suspicions)
			c.status = judge(rr.res.perThousand() <= goalFalsePer1000)
			if c.status == statusMissed {
				c.why = fmt.Sprintf("The A/A rounds resampled here have a robust σ of %.3f; a run of neighbouring rounds above the floor "+
					"(%s the baseline) is what confirms, and blocks of real rounds keep the runs the disk's slow drift makes.",
					rr.res.Sigma, times(1+detectorParams().MinEffect))
			}
		}
		out = append(out, c)
	}
	c := goalCheck{goal: fmt.Sprintf("4. no false alarm in ≥ %d real unperturbed cycles", goalQuietCycles), scope: "overlay2"}
	if d == nil || len(d.Unperturbed.Cycles) == 0 {
		c.status, c.figure = statusNotMeasured, "–"
	} else {
		fa := falseAlarms(d)
		c.figure = fmt.Sprintf("%d cycle(s) with an alarm in %d counted cycles; %d suspicion(s), %d confirmed", fa.alarmCycles, fa.counted,
			fa.suspicions, fa.confirmed)
		c.status = judge(fa.alarmCycles == 0 && fa.counted >= goalQuietCycles)
		if c.status == statusMissed {
			if fa.counted < goalQuietCycles {
				c.why = fmt.Sprintf("Only %d cycles were counted.", fa.counted)
			} else {
				c.why = fmt.Sprintf("Alarms after cycles %v (targets %v). An alarm on bind is a method failure (A/A): "+
					"a confounder that hit one arm for a whole confirmation burst.", fa.alarmAt, fa.alarmTargets)
			}
		}
	}
	return append(out, c)
}

// detectionWhy explains a missed detection goal from the data.
func detectionWhy(d *detectionResult, rp replayReport, level float64, cycles int, measured float64) string {
	p := detectorParams()
	floor := 1 + p.MinEffect
	var parts []string
	if !math.IsNaN(measured) && measured < floor {
		parts = append(parts, fmt.Sprintf("The injected slowdown measured only %s, below the detector's floor of %s: the calibration missed the level.",
			times(measured), times(floor)))
	}
	if row, ok := rp.delayRow(level); ok && rp.block > 0 {
		parts = append(parts, fmt.Sprintf("At the measured per-round σ (%.3f) the simulation confirms a %s shift after %.0f fsync rounds on average "+
			"(%.0f%% of trials within %d rounds), and a cycle runs about %d fsync rounds: confirming within %d cycle(s) needs about %.0f fsync rounds "+
			"per cycle, or a lower per-round σ.", row.Sigma, times(level), row.ConfirmMean, 100*row.Confirmed, detectorHorizon(), rp.block, cycles,
			math.Ceil(row.ConfirmMean/float64(cycles))))
	}
	if len(parts) == 0 {
		p := detectorParams()
		return fmt.Sprintf("The confirmation needs %d of %d fresh rounds above the floor; the throttled rounds were too spread out.", p.ConfirmMin, p.ConfirmRounds)
	}
	return strings.Join(parts, " ")
}

func writeGoals(w *mdWriter, r *results) {
	w.p("## The goals")
	w.p("The measurement method's goals, each judged from this run's figures, at the default settings of " +
		"`layerprobe run` and of one agent cycle, on overlay2 and on btrfs. \"pp\" is percentage points of " +
		"overhead; a half-width is half the 95%% interval's width.")
	checks := evaluateGoals(r)
	var rows [][]string
	for _, c := range checks {
		status := c.status
		if r.Short && status != statusNotMeasured {
			status += " (short mode: not judged)"
		}
		rows = append(rows, []string{c.goal, c.scope, c.figure, "**" + status + "**"})
	}
	w.table([]string{"goal", "where", "measured", "result"}, rows)
	var whys []string
	for _, c := range checks {
		if c.why != "" {
			whys = append(whys, fmt.Sprintf("- **%s** (%s): %s", c.goal, c.scope, c.why))
		}
	}
	if len(whys) > 0 {
		w.line("Where a goal is missed, why, and what it would take:\n")
		for _, l := range whys {
			w.line("%s", l)
		}
		w.WriteString("\n")
	}
}

// sharedFileWhy says how much of a container's miss against the reference
// the shared file explains (section 3, the shared file): host, the second
// execution on its file half the time, moves every target with files of
// its own by minus half that execution's effect, in the default runs and
// in the reference alike. "" when neither effect stands out from noise.
// The default runs' median is corrected only when none of them had bind
// on files of its own.
func sharedFileWhy(dr driverResult, workload string, med float64) string {
	var out string
	if sec := orderSplitOf(dr.Defaults, workload, true).Second(); sec.N > 0 && !slices.ContainsFunc(dr.Defaults, func(d runDoc) bool { return d.BindOwnFiles }) &&
		math.Abs(sec.Mean) > 2*sec.SE {
		eff := -sec.Mean / 2
		out += fmt.Sprintf(" The shared file moves the default runs' container estimate by %s ± %.1f pp (section 3, the shared file): "+
			"without it their median would read about %s.", signedPP(eff), 50*sec.SE, pct(shiftRatio(med, -eff, workload)))
	}
	if sec := orderSplitOf(dr.References, workload, true).Second(); sec.N > 0 && math.Abs(sec.Mean) > 2*sec.SE {
		out += fmt.Sprintf(" The reference carries the same effect, %s ± %.1f pp on its container estimate.", signedPP(-sec.Mean/2), 50*sec.SE)
	}
	return out
}

// armToArmWhy compares the container with bind instead of host, in the
// default runs and in the reference: both arms run fio in the probe
// container, so what differs between host and the probe container (one
// reference run's host arm, the arms' fsync offset of goal 2's bind line)
// drops out. Where the container's figures agree against bind and not
// against host, the miss lies in a host arm, not in the container's
// figure.
func armToArmWhy(dr driverResult, workload string, med float64) string {
	refC, okC := referenceOf(dr, "container", workload)
	refB, okB := referenceOf(dr, "bind", workload)
	if !okC || !okB {
		return ""
	}
	var diffs []float64
	for i := range dr.Defaults {
		c, okc := estimateOf(&dr.Defaults[i], "container", workload)
		b, okb := estimateOf(&dr.Defaults[i], "bind", workload)
		if okc && okb {
			diffs = append(diffs, signedLog(c.Ratio, workload)-signedLog(b.Ratio, workload))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	runs := median(diffs)
	ref := signedLog(refC.Ratio, workload) - signedLog(refB.Ratio, workload)
	apart, againstHost := math.Abs(runs-ref), math.Abs(signedLog(med, workload)-signedLog(refC.Ratio, workload))
	out := fmt.Sprintf(" The reference's own A/A control reads bind at %s [%s, %s]. Measured against bind instead of host (both "+
		"arms run fio in the probe container; 100 × ln of the ratio, for the default runs their median), the default runs read the container at %s and the reference at %s: %.1f pp apart, "+
		"where against host they are %.1f pp apart.", pct(refB.Ratio), pct(refB.Low), pct(refB.High), signedPP(runs), signedPP(ref),
		100*apart, 100*againstHost)
	if apart < againstHost/2 {
		out += " Most of the difference lies in a host arm"
		if refC.Runs == 1 {
			out += " (the reference is one run, its host arm's error is its own)"
		}
		out += ", not in the container's figure."
	}
	return out
}

// signedLog is an overhead ratio on the signed log scale of orderSplit
// (positive is slower): ln(1 + r) for latencies, −ln(1 − r) for
// throughputs; shiftRatio's inverse at x = 0.
func signedLog(ratio float64, workload string) float64 {
	if measure.MetricDirection(headlineOf(workload)) == stats.HigherIsBetter {
		return -math.Log1p(-ratio)
	}
	return math.Log1p(ratio)
}

// shiftRatio moves an overhead ratio (0.08 = 8% slower) by x on the signed
// log scale of orderSplit (positive is slower): latencies' ratio is
// e^x − 1 of it, throughputs' 1 − e^−x.
func shiftRatio(ratio, x float64, workload string) float64 {
	y := signedLog(ratio, workload) + x
	if measure.MetricDirection(headlineOf(workload)) == stats.HigherIsBetter {
		return -math.Expm1(-y)
	}
	return math.Expm1(y)
}

// runsWord is "1 run" or "6 runs".
func runsWord(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}
