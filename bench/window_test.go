//go:build bench

package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// At a per-round σ of 0.15 (ln units) the signed-rank interval of 48 rounds
// is about ±1.96·1.02·σ/√48 = ±4.4 pp wide, and four times the rounds halve
// it: the replay must find both, and a window's extrapolated size must
// reach the goal when replayed.
func TestUnitReplayWindow(t *testing.T) {
	src := normalSources(rand.New(rand.NewPCG(5, 6)), 0.15, 20, 20)
	hw := replayWindow(src, 3, 48, windowDraws, stats.HigherIsBetter, 1)
	if len(hw) != windowDraws {
		t.Fatalf("%d half-widths, want %d", len(hw), windowDraws)
	}
	at48 := median(hw)
	if at48 < 3.6 || at48 > 5.2 {
		t.Errorf("median half-width at 48 rounds %.2f pp, want about 4.4", at48)
	}
	at192 := median(replayWindow(src, 3, 192, windowDraws, stats.HigherIsBetter, 1))
	if r := at192 / at48; r < 0.42 || r > 0.58 {
		t.Errorf("192 rounds: %.2f pp, %.2f of 48's, want about half", at192, r)
	}
}

// The driver's replay takes the container's rounds of the new binary's
// runs, a cycle's block scaled from a run's bytes, and the window the goal
// needs, with the days it spans at the interval.
func TestUnitReplayDriverWindow(t *testing.T) {
	var dr driverResult
	for i := range 12 {
		dr.Defaults = append(dr.Defaults, *docOf("new", nil, "", nil, syntheticRun(30, false, uint64(10+i))))
	}
	// An earlier method's run is not the method as it is now.
	dr.Defaults = append(dr.Defaults, *docOf("old", nil, "", nil, syntheticRun(30, true, 99)))
	d0 := dr.Defaults[0]
	cycle := d0.BytesWritten / 10 // a tenth of a run: 3 of its 30 fsync rounds
	wr, ok := replayDriverWindow(dr, "fsync", 48, cycle, 2, 6*time.Hour)
	if !ok {
		t.Fatal("no replay from 12 runs of 30 rounds")
	}
	if wr.Runs != 12 || wr.Rounds != 12*30 {
		t.Errorf("%d runs, %d rounds: want 12 and 360 (the old run left out)", wr.Runs, wr.Rounds)
	}
	if wr.PerCycle != 3 {
		t.Errorf("%d rounds per cycle, want 3", wr.PerCycle)
	}
	// The synthetic container is 10% slower with σ ≈ 0.14 per round (two
	// arms of 0.1): about ±4 pp at 48 rounds, above the goal.
	if wr.HW < 3 || wr.HW > 6 {
		t.Errorf("median half-width %.2f pp at 48 rounds, want about 4", wr.HW)
	}
	want := int(math.Ceil(48 * math.Pow(wr.HW/goalHalfWidthPP, 2)))
	if wr.Need != want || math.Abs(wr.NeedHW-goalHalfWidthPP) > 0.5 {
		t.Errorf("need %d rounds (%.2f pp replayed), want %d and about %.0f pp", wr.Need, wr.NeedHW, want, goalHalfWidthPP)
	}
	if c := (wr.Need + 2) / 3; wr.NeedCycles != c || wr.NeedDays != float64(c)/4 {
		t.Errorf("%d cycles over %.2f days, want %d and %.2f", wr.NeedCycles, wr.NeedDays, c, float64(c)/4)
	}
	// A window larger than the goal needs reaches it before it is full:
	// the days are those of the rounds the goal needs, not of the window.
	big, _ := replayDriverWindow(dr, "fsync", 4*wr.Need, cycle, 2, 6*time.Hour)
	if big.Need >= big.Window || big.Need < wr.Need*2/3 || big.Need > wr.Need*3/2 {
		t.Errorf("a window of %d: need %d rounds; want about the %d a window of 48 extrapolated to", big.Window, big.Need, wr.Need)
	}
	if c := (big.Need + 2) / 3; big.NeedCycles != c {
		t.Errorf("a window of %d: %d cycles, want the %d that make its %d rounds", big.Window, big.NeedCycles, c, big.Need)
	}
	if _, ok := replayDriverWindow(driverResult{Defaults: dr.Defaults[:1]}, "fsync", 48, cycle, 2, 6*time.Hour); ok {
		t.Error("a replay from one run: its rounds are one run's minutes, not a window's cycles")
	}
}

// A synthetic run's executions are 8 MiB each on host, container and bind
// (one of bind's failed), after 80 MiB of layout: the headline pair wrote
// two thirds of the executions' bytes, and less of the run's.
func TestUnitHeadlineShares(t *testing.T) {
	d := docOf("new", nil, "", nil, syntheticRun(10, false, 3))
	var exec, pair int64
	for _, x := range d.Executions {
		exec += x.Bytes
		if x.Target == "host" || x.Target == "container" {
			pair += x.Bytes
		}
	}
	if pair != 2*30*8<<20 {
		t.Fatalf("host and container wrote %d bytes, want %d", pair, 2*30*8<<20)
	}
	got := headlineShares([]runDoc{*d})
	want := float64(pair) / float64(exec+d.LayoutBytes)
	if len(got) != 1 || math.Abs(got[0]-want) > 1e-12 || d.BytesWritten != exec+d.LayoutBytes {
		t.Errorf("shares %v of %d bytes, want [%v] of %d", got, d.BytesWritten, want, exec+d.LayoutBytes)
	}
}
