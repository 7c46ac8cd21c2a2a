//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// falseAlarmSummary counts what the unperturbed cycles raised.
type falseAlarmSummary struct {
	learn, counted   int
	alarmCycles      int
	alarmAt          []int
	alarmTargets     []string
	suspicions       int
	suspectByTarget  map[string]int
	confirmCycles    int
	confirmRounds    int
	confirmed        int
	replaySuspicions map[string]int
}

func falseAlarms(d *detectionResult) falseAlarmSummary {
	fa := falseAlarmSummary{suspectByTarget: map[string]int{}, replaySuspicions: map[string]int{}}
	for _, c := range d.Unperturbed.Cycles {
		if c.Trigger == "confirm" {
			fa.confirmCycles++
			fa.confirmRounds += c.Rounds
			continue
		}
		if c.Phase == "learn" {
			fa.learn++
			continue
		}
		fa.counted++
		var hit []string
		for t, v := range c.Regression {
			if v == 1 {
				hit = append(hit, t)
			}
		}
		if len(hit) > 0 {
			slices.Sort(hit)
			fa.alarmCycles++
			fa.alarmAt = append(fa.alarmAt, c.Index)
			for _, t := range hit {
				if !slices.Contains(fa.alarmTargets, t) {
					fa.alarmTargets = append(fa.alarmTargets, t)
				}
			}
		}
	}
	for _, e := range d.Unperturbed.Events {
		switch e.Event {
		case "suspected":
			fa.suspicions++
			for _, t := range e.Targets {
				fa.suspectByTarget[t]++
			}
		case "confirmed":
			fa.confirmed++
		}
	}
	// The same rounds through the detector package, as a cross-check of
	// what the agent logged.
	p := detectorParams()
	for _, target := range []string{"container", "bind"} {
		var st detector.State
		rs := slices.Clone(d.Unperturbed.Rounds)
		slices.SortStableFunc(rs, func(a, b roundObs) int { return a.Round - b.Round })
		for _, r := range rs {
			if r.Target != target || r.Workload != "fsync" {
				continue
			}
			var ev detector.Event
			st, ev = p.Observe(st, detector.Observation{Round: r.Round, X: math.Log(r.Value / r.Host)})
			if ev == detector.EventSuspect {
				fa.replaySuspicions[target]++
			}
		}
	}
	return fa
}

func writeDetection(w *mdWriter, s settings, r *results) {
	w.p("## 5. Detection: the agent and its fsync regression detector")
	d := r.Detection
	if d == nil {
		w.p("Not measured in this run.")
		return
	}
	params := detectorParams()
	ac := config.Default().Agent
	w.p("The real agent (`layerprobe agent`) ran against a private overlay2 daemon with this configuration, "+
		"which keeps every detector default and the default adaptive cycle: at least %d rounds of every workload, then "+
		"more until the published window's intervals are within %s or the cycle has written %s or run %s. It restricts "+
		"the targets to `container` and `bind` (the A/A control), turns the busy-host guards off so that no counted "+
		"cycle is skipped, and schedules nothing itself: the benchmark starts each cycle with `POST /api/v1/cycles` as "+
		"soon as the previous one, with its confirmation cycle if it raised a suspicion, is over, and then reads "+
		"`layerprobe_fsync_regression` from `/metrics` (the agent publishes once per cycle, after the confirmation).",
		ac.Budget.MinRounds, pp(100*ac.Budget.Precision), gib(d.cycleCap()), dur(ac.Budget.MaxDuration.Seconds()))
	w.line("```yaml")
	w.line("%s", strings.TrimRight(d.AgentConfig, "\n"))
	w.line("```\n")

	writeAgentCycles(w, d)
	writeWindowReplay(w, r)

	// False alarms.
	fa := falseAlarms(d)
	st, sigma := baselineOf(d)
	floor := math.Exp(params.Floor(st.Baseline) - st.Baseline.Median)
	w.p("### False alarms")
	w.p("%d unperturbed cycles: the first %d only learn (until the detector of every target has its %d baseline rounds "+
		"and screens), the next %d are counted. A false alarm is a cycle after which any `layerprobe_fsync_regression` is 1.",
		fa.learn+fa.counted, fa.learn, params.MinBaselineRounds, fa.counted)
	w.table([]string{"counted cycles", "cycles with an alarm", "suspicions (container / bind)", "confirmation cycles (rounds)", "confirmed"},
		[][]string{{fmt.Sprint(fa.counted), fmt.Sprint(fa.alarmCycles),
			fmt.Sprintf("%d / %d", fa.suspectByTarget["container"], fa.suspectByTarget["bind"]),
			fmt.Sprintf("%d (%d)", fa.confirmCycles, fa.confirmRounds), fmt.Sprint(fa.confirmed)}})
	w.p("Replaying the same rounds through `internal/detector` gives %d / %d suspicions (container / bind), "+
		"the same computation the agent made. At the end the container's baseline was a fsync p99 ratio of %s "+
		"(median of %d rounds) with a robust spread σ₀ = %.3f (ln units; the rounds' own robust σ: %.3f), so its "+
		"confirmation floor was %s the baseline (`1 + detector.min_effect`).",
		fa.replaySuspicions["container"], fa.replaySuspicions["bind"], ratio(math.Exp(st.Baseline.Median)), st.Baseline.N,
		st.Baseline.Sigma, sigma, times(floor))
	if st.Regressed() {
		w.p("**Note:** the container's detector ended the unperturbed cycles *regressed* (a false alarm), so every " +
			"level below started flagged; its cycle counts say nothing about detection power.")
	}
	cx := fsyncX(measurementRounds(d.Unperturbed, ""), "container")
	bx := fsyncX(measurementRounds(d.Unperturbed, ""), "bind")
	exp := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = math.Exp(x)
		}
		return out
	}
	if err := saveSeriesPlot(s.plotDir(), exp(cx), exp(bx), math.Exp(params.Floor(st.Baseline))); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Unperturbed per-round fsync p99 ratios](bench/%s)", plotSeries)
	}

	writeReplay(w, r)

	// A/A.
	w.p("### A/A: the bind target")
	w.p("`bind` writes the host's own directory through the probe container's bind mount, so its ratio to host "+
		"should be 1.0; its spread is the method's noise. From the same unperturbed measurement cycles: per round, "+
		"per cycle (the median of the cycle's rounds) and as published (the agent's estimate over its window "+
		"of the last %d rounds of each workload, after each cycle). Ratios are target/host of the workload's headline figure: "+
		"latency for fsync (above 1 = slower), IOPS and bandwidth for the others (below 1 = slower).", d.window())
	var aaRows [][]string
	var fsRound, fsCycle []float64
	for _, workload := range workloads {
		perRound := map[int64][]float64{}
		var all []float64
		for _, ro := range measurementRounds(d.Unperturbed, "") {
			if ro.Target == "bind" && ro.Workload == workload {
				v := ro.Value / ro.Host
				all = append(all, v)
				perRound[ro.CycleID] = append(perRound[ro.CycleID], v)
			}
		}
		var perCycle, published []float64
		for _, c := range d.Unperturbed.Cycles {
			if xs := perRound[c.ID]; len(xs) > 0 {
				perCycle = append(perCycle, median(xs))
			}
			if c.Trigger == "api" {
				if o, ok := c.Published["bind/"+workload]; ok {
					if workload == "fsync" {
						published = append(published, 1+o.Ratio)
					} else {
						published = append(published, 1-o.Ratio)
					}
				}
			}
		}
		if workload == "fsync" {
			fsRound, fsCycle = all, perCycle
		}
		for _, v := range []struct {
			name string
			xs   []float64
		}{{"per round", all}, {"per cycle", perCycle}, {fmt.Sprintf("published (%d-round window)", d.window()), published}} {
			if len(v.xs) == 0 {
				continue
			}
			sp := spreadOf(v.xs)
			aaRows = append(aaRows, []string{workload + " (" + headlineOf(workload) + ")", v.name, fmt.Sprint(sp.N), ratio(sp.Median),
				ratio(sp.Q1) + " – " + ratio(sp.Q3), ratio(sp.Lo) + " – " + ratio(sp.Hi)})
		}
	}
	w.table([]string{"workload", "unit", "n", "median", "IQR", "min – max"}, aaRows)
	if err := saveAAPlot(s.plotDir(), fsRound, fsCycle); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Histogram of the bind target's fsync p99 ratio](bench/%s)", plotAA)
	}

	// Calibration.
	w.p("### Injected slowdowns")
	w.p("The slowdown is real: `LAYERPROBE_TEST_THROTTLE_WRITE_IOPS` makes the agent start its probe container "+
		"with a cgroup v1 blkio limit on write IOPS to the data root's device (`docker run --device-write-iops`). "+
		"Everything the probe container writes is throttled, the writable layer and the bind mount alike; the "+
		"host arm runs natively and is not. The limit's effect on the fsync p99 ratio is steep and depends on the "+
		"machine, so it was calibrated first: `layerprobe run %s` with targets host and "+
		"container under decreasing limits, each measured against the unperturbed baseline above "+
		"(exp(median ln ratio − m₀)).", strings.Join(d.CalibrationArgs, " "))
	var calRows [][]string
	var lims, sds []float64
	m0 := st.Baseline.Median
	for _, cp := range d.Calibration {
		sd := slowdownVs(m0, cp.Run.logRatios("container", "fsync"))
		lims, sds = append(lims, float64(cp.WriteIOPS)), append(sds, sd)
		var hostP99, contP99, rw float64 = math.NaN(), math.NaN(), math.NaN()
		for _, res := range measure.Summarize(cp.Run.samples(0), confidence) {
			switch {
			case res.Target == "host" && res.Workload == "fsync":
				hostP99 = res.Raw.FsyncP99
			case res.Target == "container" && res.Workload == "fsync":
				contP99 = res.Raw.FsyncP99
			case res.Target == "container" && res.Workload == "randwrite":
				rw = res.Raw.IOPS
			}
		}
		calRows = append(calRows, []string{fmt.Sprint(cp.WriteIOPS), times(sd), fmtMicros(hostP99), fmtMicros(contP99),
			fmt.Sprintf("%.0f", rw), dur(cp.Run.Seconds)})
	}
	w.table([]string{"write IOPS limit", "fsync p99 ratio vs baseline", "host fsync p99", "container fsync p99", "container randwrite IOPS", "run time"}, calRows)
	if len(lims) > 0 {
		if err := saveCalibrationPlot(s.plotDir(), lims, sds); err != nil {
			w.p("(plot failed: %v)", err)
		} else {
			w.p("![Calibration curve](bench/%s)", plotCalibration)
		}
	}
	w.p("Each level's limit is read off that curve (made monotone, interpolated in log-log); the slowdown "+
		"reported below is the one the throttled cycles themselves measured, against the same baseline. "+
		"Each level starts from a copy of the agent's state after the unperturbed cycles (history and "+
		"detector state: a learned baseline of %d rounds), restarts the agent with the limit, and counts "+
		"measurement cycles from the first throttled one until `layerprobe_fsync_regression{target=\"container\"}` "+
		"is 1, for at most %d cycles. Confirmation cycles (fsync only, up to %d rounds, started by the agent "+
		"right after a suspicion) are listed separately.", st.Baseline.N, d.CapCycles, params.ConfirmRounds)

	var lvRows [][]string
	var pts []detectionPoint
	contBase := containerP99s(measurementRounds(d.Unperturbed, ""))
	for _, lv := range d.Levels {
		xs := fsyncX(lv.Series.Rounds, "container")
		ms := slowdownVs(m0, xs)
		abs := math.NaN()
		if cp := containerP99s(lv.Series.Rounds); len(cp) > 0 && len(contBase) > 0 {
			abs = median(cp) / median(contBase)
		}
		confirms, rounds := 0, 0
		bindFlag := false
		for _, c := range lv.Series.Cycles {
			rounds += c.Rounds
			if c.Trigger == "confirm" {
				confirms++
			}
			if c.Regression["bind"] == 1 {
				bindFlag = true
			}
		}
		flag := fmt.Sprintf("not within %d", d.CapCycles)
		tm := "–"
		if lv.FlaggedAfter > 0 {
			flag = fmt.Sprint(lv.FlaggedAfter)
			tm = dur(lv.SecondsToFlag)
		}
		sus := 0
		for _, e := range lv.Series.Events {
			if e.Event == "suspected" && slices.Contains(e.Targets, "container") {
				sus++
			}
		}
		lvRows = append(lvRows, []string{times(lv.Nominal), fmt.Sprint(lv.WriteIOPS), times(lv.Predicted), times(ms),
			times(abs), ratio(math.Log(ms) / math.Log(floor)),
			flag, fmt.Sprintf("%d (%d suspicions)", confirms, sus), fmt.Sprint(rounds), tm, yesNo(bindFlag)})
		pts = append(pts, detectionPoint{label: times(lv.Nominal), slowdown: ms, cycles: lv.FlaggedAfter})
	}
	w.table([]string{"level", "write IOPS", "predicted", "measured (ratio)", "container p99 alone", "shift / floor",
		"cycles to flag", "confirmation cycles", "rounds run", "time to flag", "bind flagged too"}, lvRows)
	w.p("*measured (ratio)* is the shift the detector sees: exp(median ln(container/host fsync p99) − m₀) over "+
		"the level's rounds. *container p99 alone* compares the container's fsync p99 with its unperturbed "+
		"median, without the host: the throttled container also slows the host's fsyncs (they share the file "+
		"system's journal), so the ratio moves less than the container alone. *shift / floor* is ln(measured) "+
		"over the floor's distance from the baseline (%s here): below 1 the detector is built not to confirm "+
		"(see docs/detector.md). `bind` goes through the same throttled container, so its detector sees the "+
		"slowdown as well: an alarm on bind is expected here, whereas in production it means a method failure.", times(floor))
	if err := saveDetectionPlot(s.plotDir(), pts, d.CapCycles, floor); err != nil {
		w.p("(plot failed: %v)", err)
	} else {
		w.p("![Cycles to detection vs measured slowdown](bench/%s)", plotDetection)
	}
}

func containerP99s(rounds []roundObs) []float64 {
	var out []float64
	for _, r := range rounds {
		if r.Target == "container" && r.Workload == "fsync" {
			out = append(out, r.Value)
		}
	}
	return out
}

func fmtMicros(sec float64) string {
	if math.IsNaN(sec) {
		return "n/a"
	}
	if sec >= 1e-3 {
		return fmt.Sprintf("%.2f ms", sec*1e3)
	}
	return fmt.Sprintf("%.0f µs", sec*1e6)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeAgentCycles reports what the counted cycles cost and how precise
// their published estimates were: the agent side of goal 1.
func writeAgentCycles(w *mdWriter, d *detectionResult) {
	w.p("### Cycles: cost and precision")
	bytes, secs, rounds, stops := cycleFigures(d, "api")
	if len(bytes) == 0 {
		w.p("No counted cycle.")
		return
	}
	rows := [][]string{{"measurement", fmt.Sprint(len(bytes)), gib(int64(median(bytes))), gib(int64(quantile(bytes, 1))),
		dur(median(secs)), dur(quantile(secs, 1)), fmt.Sprintf("%.0f", median(rounds)), stopReasons(stops)}}
	if cb, cs, cr, cst := cycleFigures(d, "confirm"); len(cb) > 0 {
		rows = append(rows, []string{"confirmation", fmt.Sprint(len(cb)), gib(int64(median(cb))), gib(int64(quantile(cb, 1))),
			dur(median(cs)), dur(quantile(cs, 1)), fmt.Sprintf("%.0f", median(cr)), stopReasons(cst)})
	}
	w.p("The counted unperturbed cycles (host, container and bind; the goal: at most 573 MiB, what a cycle wrote before):")
	w.table([]string{"cycles", "n", "written (median)", "max", "time (median)", "max", "rounds (median)", "stopped on"}, rows)
	var prows [][]string
	for _, t := range []string{"container", "bind"} {
		for _, workload := range workloads {
			hw := publishedHalfWidths(d, t, workload)
			if len(hw) == 0 {
				continue
			}
			within := 0
			for _, h := range hw {
				if h <= goalHalfWidthPP {
					within++
				}
			}
			prows = append(prows, []string{t, workload + " (" + headlineOf(workload) + ")", pp(median(hw)), pp(quantile(hw, 0.9)),
				fmt.Sprintf("%d of %d", within, len(hw))})
		}
	}
	w.p("The published interval after each counted cycle (over the window of the last %d rounds of each workload, "+
		"`GET /api/v1/cycles/{id}`), its half-width:", d.window())
	w.table([]string{"target", "workload", "median", "p90", "≤ 3 pp"}, prows)
}

// replayReport is the replay and simulation of the detector on measured
// rounds, computed once per results.
type replayReport struct {
	block       int // fsync rounds of a typical cycle
	falseAlarms []driverReplay
	shifts      []shiftReplay // overlay2's A/A rounds with shifts added
	// delay is DelayTable at sigma, the robust σ of the
	// container's unperturbed fsync rounds on overlay2.
	sigma float64
	delay []DelayRow
	// aaDelay is the same at each driver's A/A σ.
	aaDelay []driverDelay
}

type driverReplay struct {
	driver string
	res    replayResult
}

type driverDelay struct {
	driver string
	sigma  float64
	rows   []DelayRow
}

// Sizes of the replay: simulated agents × cycles per driver, trials per
// level, and the simulation's trials per shift.
const (
	replayAgents = 20
	replayCycles = 500
	replayTrials = 1000
	replayCap    = 6
	delayTrials  = 1000
	replaySeed   = 20261123
)

// replayLevels are the injected shifts of the replay and the simulation.
var replayLevels = []float64{1.1, 1.25, 1.5, 2}

var replayCache sync.Map // *results -> replayReport

func detectionReplay(r *results) replayReport {
	if v, ok := replayCache.Load(r); ok {
		return v.(replayReport)
	}
	p := detectorParams()
	rp := replayReport{block: cycleBlock(r.Detection), sigma: math.NaN()}
	if rp.block == 0 {
		// No agent cycles measured: a cycle's minimum rounds.
		rp.block = config.Default().Agent.Budget.MinRounds
	}
	for _, dr := range r.Drivers {
		src := aaSourcesOf(r, dr.Driver)
		if src.rounds() < p.MinBaselineRounds {
			continue
		}
		rp.falseAlarms = append(rp.falseAlarms, driverReplay{driver: dr.Driver,
			res: replayFalseAlarms(p, src, rp.block, replayAgents, replayCycles, replaySeed)})
		sigma := stats.RobustSigma(src.all())
		rp.aaDelay = append(rp.aaDelay, driverDelay{driver: dr.Driver, sigma: sigma, rows: delayRows(p, sigma)})
		if dr.Driver == "overlay2" {
			for _, l := range replayLevels {
				rp.shifts = append(rp.shifts, replayShift(p, src, rp.block, l, replayTrials, replayCap, replaySeed))
			}
		}
	}
	if d := r.Detection; d != nil {
		if xs := fsyncX(measurementRounds(d.Unperturbed, ""), "container"); len(xs) >= p.MinBaselineRounds {
			rp.sigma = stats.RobustSigma(xs)
			rp.delay = delayRows(p, rp.sigma)
		}
	}
	replayCache.Store(r, rp)
	return rp
}

func delayRows(p detector.Params, sigma float64) []DelayRow {
	shifts := []float64{0}
	for _, l := range replayLevels {
		shifts = append(shifts, math.Log(l))
	}
	return DelayTable(p, shifts, sigma, replaySeed, delayTrials)
}

func (rp replayReport) shift(level float64) (shiftReplay, bool) {
	for _, s := range rp.shifts {
		if s.Level == level {
			return s, true
		}
	}
	return shiftReplay{}, false
}

func (rp replayReport) delayRow(level float64) (DelayRow, bool) {
	for _, row := range rp.delay {
		if math.Abs(row.Shift-math.Log(level)) < 1e-9 {
			return row, true
		}
	}
	return DelayRow{}, false
}

func detectorHorizon() int { return DelayHorizon }

// writeReplay reports the replay of measured A/A rounds and the
// simulation at the measured noise (goal 4, and docs/detector.md).
func writeReplay(w *mdWriter, r *results) {
	rp := detectionReplay(r)
	p := detectorParams()
	w.p("### Replay: measured A/A rounds through the detector")
	if len(rp.falseAlarms) == 0 {
		w.p("Not enough A/A rounds measured.")
		return
	}
	w.p("The per-round log ratios of fsync p99, bind against host, of every agent cycle above (measurement and "+
		"confirmation cycles) and of every default run of section 2 (their true ratio is 1), fed through "+
		"`internal/detector` with the shipped parameters as simulated agent cycles: %d agents per driver, each from "+
		"its own full baseline of %d resampled rounds, then %d cycles of %d fsync rounds each (the median of a counted "+
		"cycle above), and after a suspicion the confirmation rounds the agent runs at once, until the detector "+
		"decides. Rounds are drawn with replacement in blocks of consecutive rounds of one source (the agent's "+
		"history, or one run), so that the disk's slow drift stays in the sample.",
		replayAgents, p.BaselineRounds, replayCycles, rp.block)
	var rows [][]string
	for _, fr := range rp.falseAlarms {
		x := fr.res
		rows = append(rows, []string{fr.driver, fmt.Sprintf("%d (%d sources)", x.Rounds, x.Sources), fmt.Sprintf("%.3f", x.Sigma),
			fmt.Sprint(x.Cycles), fmt.Sprint(x.Suspicions), fmt.Sprint(x.Confirmations), fmt.Sprintf("%.2f", x.perThousand())})
	}
	w.table([]string{"driver", "A/A rounds", "robust σ", "simulated cycles", "suspicions", "false confirmations", "per 1000 cycles"}, rows)
	if len(rp.shifts) > 0 {
		w.p("The same overlay2 rounds with a shift added to every round after the baseline: the share of %d trials "+
			"the detector confirmed within 1, 3 and %d measurement cycles (each with its confirmation rounds):", replayTrials, replayCap)
		var srows [][]string
		for _, sr := range rp.shifts {
			srows = append(srows, []string{times(sr.Level), fmt.Sprintf("%.0f%%", 100*sr.within(1)), fmt.Sprintf("%.0f%%", 100*sr.within(3)),
				fmt.Sprintf("%.0f%%", 100*sr.within(replayCap))})
		}
		w.table([]string{"shift", "within 1 cycle", "within 3", fmt.Sprintf("within %d", replayCap)}, srows)
	}
	w.p("### Simulation at the measured noise")
	if len(rp.delay) == 0 {
		w.p("No unperturbed container rounds to measure the noise on.")
		return
	}
	w.p("The benchmark's `DelayTable` (bench/simulate.go; %d trials per shift, normal noise, a settled %d-round baseline, horizon %d rounds) at "+
		"the robust σ of the container's unperturbed per-round fsync p99 log ratios on overlay2 (σ = %.3f), and at each "+
		"driver's A/A σ. Rounds are fsync rounds; a cycle ran %d of them (median), so a cycle count is about rounds/%d. "+
		"These are the figures of docs/detector.md's simulation section.", delayTrials, p.BaselineRounds, detectorHorizon(), rp.sigma, rp.block, rp.block)
	writeDelayTable(w, fmt.Sprintf("overlay2 container, σ = %.3f", rp.sigma), rp.delay, rp.block)
	for _, dd := range rp.aaDelay {
		writeDelayTable(w, fmt.Sprintf("%s bind (A/A), σ = %.3f", dd.driver, dd.sigma), dd.rows, rp.block)
	}
}

func writeDelayTable(w *mdWriter, title string, rows []DelayRow, block int) {
	w.p("**%s**:", title)
	var out [][]string
	for _, row := range rows {
		conf := "0, –, –"
		cycles := "–"
		if row.Confirmed > 0 {
			conf = fmt.Sprintf("%.3f, %.1f, %.0f", row.Confirmed, row.ConfirmMean, row.ConfirmP90)
			cycles = fmt.Sprintf("%.1f", row.ConfirmMean/float64(max(block, 1)))
		}
		sus := "0, –, –"
		if row.Suspected > 0 {
			sus = fmt.Sprintf("%.3f, %.1f, %.0f", row.Suspected, row.SuspectMean, row.SuspectP90)
		}
		out = append(out, []string{fmt.Sprintf("%.2f", math.Exp(row.Shift)), fmt.Sprintf("%.1f", row.Shift/row.Sigma), sus, conf, cycles})
	}
	w.table([]string{"fsync p99 ratio vs baseline", "shift/σ", "suspected: share, mean, p90 (rounds)", "confirmed: share, mean, p90 (rounds)", "cycles to confirm (mean)"}, out)
}
