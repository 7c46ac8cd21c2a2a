//go:build bench

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// The agent's published window replayed from the default runs. The
// detection section measures the window of real agent cycles, but only
// when it runs (about an hour), so its figures can predate the method.
// The default runs measure the same quick profile's container/host pairs
// with the current method: a window is their rounds resampled in blocks
// of the rounds one agent cycle makes of the workload (consecutive rounds
// of one run, as a cycle's are; several runs, hours apart, as a window's
// cycles are), and its interval is the one the agent publishes
// (measure.Summarize: the Hodges–Lehmann estimate with the signed-rank
// interval). What the window would need for ±3 pp is then replayed too,
// not only extrapolated.

// windowReplay is one driver's and workload's replayed window.
type windowReplay struct {
	Driver, Workload string
	Runs, Rounds     int // default runs and container rounds they hold
	// PerCycle is the rounds of the workload one default agent cycle
	// makes: the runs' rounds scaled from a run's bytes to a cycle's cap.
	PerCycle int
	Window   int     // agent.window_rounds
	HW, HW90 float64 // median and p90 half-width at Window, pp
	// Need is the window for a median half-width of goalHalfWidthPP,
	// (HW/goal)²·Window (at least an exact interval's rounds); NeedHW its
	// median half-width replayed. Above Window, the agent's window never
	// holds it.
	Need   int
	NeedHW float64
	// NeedCycles and NeedDays: the cycles a window of Need rounds spans,
	// and how long they take at the default agent interval.
	NeedCycles int
	NeedDays   float64
}

const (
	windowDraws = 200
	windowSeed  = 20261201
)

var windowCache sync.Map // *results -> []windowReplay

// windowReplays replays the default window of every driver's default runs
// and every workload of the default profile, once per results.
func windowReplays(r *results) []windowReplay {
	if v, ok := windowCache.Load(r); ok {
		return v.([]windowReplay)
	}
	ac := config.Default().Agent
	var out []windowReplay
	for _, dr := range r.Drivers {
		for _, workload := range profileWorkloads() {
			if wr, ok := replayDriverWindow(dr, workload, ac.WindowRounds, int64(ac.Budget.MaxBytes), ac.Budget.MinRounds, ac.Interval); ok {
				out = append(out, wr)
			}
		}
	}
	windowCache.Store(r, out)
	return out
}

// replayDriverWindow is replayWindow over one driver's default runs.
func replayDriverWindow(dr driverResult, workload string, window int, cycleBytes int64, minRounds int, interval time.Duration) (windowReplay, bool) {
	var src aaSources
	var perCycle []float64
	for i := range dr.Defaults {
		d := &dr.Defaults[i]
		if d.Binary != "new" || d.BytesWritten <= 0 {
			continue
		}
		xs := d.logRatios("container", workload)
		if len(xs) == 0 {
			continue
		}
		src = append(src, xs)
		perCycle = append(perCycle, float64(len(xs))*float64(cycleBytes)/float64(d.BytesWritten))
	}
	if src.rounds() < window/2 || len(src) < 2 {
		return windowReplay{}, false
	}
	wr := windowReplay{Driver: dr.Driver, Workload: workload, Runs: len(src), Rounds: src.rounds(), Window: window,
		PerCycle: max(minRounds, int(math.Round(median(perCycle)))), NeedHW: math.NaN()}
	dir := measure.MetricDirection(headlineOf(workload))
	hw := replayWindow(src, wr.PerCycle, window, windowDraws, dir, windowSeed)
	wr.HW, wr.HW90 = median(hw), quantile(hw, 0.9)
	// Replayed at the extrapolated window as well: a window that long
	// mixes more runs, and the runs' own errors do not shrink with it. A
	// window that needs fewer rounds than it holds reaches ±goal as it
	// fills, before it is full; one that needs more never does.
	wr.Need = max(int(math.Ceil(float64(window)*math.Pow(wr.HW/goalHalfWidthPP, 2))), stats.MinN(confidence))
	wr.NeedHW = median(replayWindow(src, wr.PerCycle, wr.Need, windowDraws, dir, windowSeed+1))
	wr.NeedCycles = int(math.Ceil(float64(wr.Need) / float64(wr.PerCycle)))
	wr.NeedDays = float64(wr.NeedCycles) * interval.Hours() / 24
	return wr, true
}

// replayWindow returns the half-widths (pp) of draws windows of n rounds,
// each made of blocks of consecutive rounds of one source (the last block
// cut to fit), with the interval measure.Summarize gives a window.
func replayWindow(src aaSources, block, n, draws int, dir stats.Direction, seed uint64) []float64 {
	rs := newResampler(src, rand.New(rand.NewPCG(seed, uint64(n))))
	out := make([]float64, 0, draws)
	xs := make([]float64, 0, n)
	for range draws {
		xs = xs[:0]
		for len(xs) < n {
			xs = append(xs, rs.block(min(block, n-len(xs)))...)
		}
		o := stats.FromLogInterval(stats.WilcoxonCI(xs, confidence), dir)
		out = append(out, estFromStats(o).halfWidthPP())
	}
	return out
}

// writeWindowReplay reports the window replayed from the default runs.
func writeWindowReplay(w *mdWriter, r *results) {
	wrs := windowReplays(r)
	if len(wrs) == 0 {
		return
	}
	ac := config.Default().Agent
	w.p("### The window replayed from the default runs")
	when := "when this section was last measured"
	if at, ok := lastMeasured(r, "detection"); ok {
		when = "on " + at.Format("2 Jan 2006")
	}
	w.p("The cycles above ran %s; the default runs of section 2 measure the same "+
		"profile's pairs with the method as it is now. Their container rounds, resampled in blocks of the rounds one "+
		"default cycle makes of a workload (a run's rounds scaled from its bytes to the cycle's %s cap, at least %d; "+
		"consecutive rounds of one run, as a cycle's are), make %d windows of the agent's %d rounds, each with the "+
		"interval the agent publishes. *Window for ±%.0f pp* is (median / %.0f)² × %d rounds, replayed at that size "+
		"too (drawn with replacement, so a window may hold more rounds than the runs did); *cycles* and *days* are what "+
		"the agent takes to make it at its %s interval. A window that needs more rounds than the agent's holds never reaches it.",
		when, gib(int64(ac.Budget.MaxBytes)), ac.Budget.MinRounds, windowDraws, ac.WindowRounds, goalHalfWidthPP, goalHalfWidthPP,
		ac.WindowRounds, dur(ac.Interval.Seconds()))
	var rows [][]string
	for _, wr := range wrs {
		rows = append(rows, []string{wr.Driver, wr.Workload + " (" + headlineOf(wr.Workload) + ")",
			fmt.Sprintf("%d (%d rounds)", wr.Runs, wr.Rounds), fmt.Sprint(wr.PerCycle), pp(wr.HW), pp(wr.HW90),
			fmt.Sprint(wr.Need), pp(wr.NeedHW), fmt.Sprint(wr.NeedCycles), fmt.Sprintf("%.1f", wr.NeedDays)})
	}
	w.table([]string{"driver", "workload", "runs", "rounds per cycle", fmt.Sprintf("median at %d", ac.WindowRounds), "p90",
		fmt.Sprintf("window for ±%.0f pp", goalHalfWidthPP), "replayed there", "cycles", "days"}, rows)
}

// lastMeasured is when a section was last measured: the newest rerun that
// measured it, or the first run's start when none did.
func lastMeasured(r *results, section string) (time.Time, bool) {
	for i := len(r.Reruns) - 1; i >= 0; i-- {
		if slices.Contains(r.Reruns[i].Sections, section) {
			return r.Reruns[i].StartedAt, true
		}
	}
	return r.StartedAt, !r.StartedAt.IsZero()
}
