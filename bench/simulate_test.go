//go:build bench

package bench

import (
	"flag"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
)

// delayTrials is the trials per shift in TestUnitDelayTable: enough for
// the rates it checks, at a few seconds. docs/detector.md's delay figures
// use 1000:
//
//	cd bench && go test -tags bench -run 'UnitDelayTable$' -v . -args -delay.trials=1000
var delayTestTrials = flag.Int("delay.trials", 200, "trials per shift in TestUnitDelayTable")

func TestUnitDelayTable(t *testing.T) {
	p := detector.ParamsFrom(config.Default().Detector)
	ratios := []float64{1, 1.05, 1.10, 1.20, 1.25, 1.5, 2}
	shifts := make([]float64, len(ratios))
	for i, r := range ratios {
		shifts[i] = math.Log(r)
	}
	n := *delayTestTrials
	// The robust σ of one round's fsync p99 log ratio measured on a
	// shared virtual disk (docs/detector.md): 0.10 to 0.15.
	for _, sigma := range []float64{0.10, 0.15} {
		rows := DelayTable(p, shifts, sigma, 1, n)
		var b strings.Builder
		fmt.Fprintf(&b, "σ = %.2f, %d trials, horizon %d rounds\n", sigma, n, DelayHorizon)
		fmt.Fprintf(&b, "  ratio  shift/σ  suspected  mean  p90  confirmed   mean   p90\n")
		for i, r := range rows {
			fmt.Fprintf(&b, "  %5.2f  %7.2f  %9.3f  %4.1f  %3.0f  %9.3f  %5.1f  %4.0f\n",
				ratios[i], r.Shift/sigma, r.Suspected, r.SuspectMean, r.SuspectP90, r.Confirmed, r.ConfirmMean, r.ConfirmP90)
		}
		t.Log(b.String())

		if len(rows) != len(shifts) {
			t.Fatalf("%d rows for %d shifts", len(rows), len(shifts))
		}
		for i, r := range rows {
			if r.Shift != shifts[i] || r.Sigma != sigma || r.Trials != n {
				t.Errorf("row %d = %+v, want shift %v sigma %v trials %d", i, r, shifts[i], sigma, n)
			}
		}
		row := func(ratio float64) DelayRow {
			for i, r := range ratios {
				if r == ratio {
					return rows[i]
				}
			}
			panic("no such ratio")
		}
		// No shift is never confirmed; half the effect floor almost never:
		// each attempt needs 13 of 16 rounds above a floor that a round
		// crosses with probability well under 1/2.
		if r := row(1); r.Confirmed != 0 {
			t.Errorf("σ %v: no shift confirmed in %.1f%% of trials", sigma, 100*r.Confirmed)
		}
		// A doubling is 4.6 to 7σ₀: z is clipped at 3, S gains 2.5 a round,
		// so it is noticed within 3 rounds, and confirmed.
		d := row(2)
		if d.Suspected != 1 || d.SuspectP90 > 3 {
			t.Errorf("σ %v: doubling suspected in %.3f of trials, p90 %v rounds; want all, within 3", sigma, d.Suspected, d.SuspectP90)
		}
		if d.Confirmed < 0.99 || d.ConfirmP90 > 3+float64(p.ConfirmRounds) {
			t.Errorf("σ %v: doubling confirmed in %.3f of trials, p90 after %v rounds; want all, within %d",
				sigma, d.Confirmed, d.ConfirmP90, 3+p.ConfirmRounds)
		}
		// Bigger shifts are noticed sooner: trial i uses the same noise
		// for every shift.
		for i := 1; i < len(rows); i++ {
			if rows[i].Suspected == 1 && rows[i-1].Suspected == 1 && rows[i].SuspectMean > rows[i-1].SuspectMean {
				t.Errorf("σ %v: %.2f× noticed after %.2f rounds, later than %.2f× (%.2f)",
					sigma, ratios[i], rows[i].SuspectMean, ratios[i-1], rows[i-1].SuspectMean)
			}
		}
		if r := row(1.05); r.Confirmed > 0.05 {
			t.Errorf("σ %v: 1.05× (half the effect floor) confirmed in %.1f%% of trials, want at most 5%%", sigma, 100*r.Confirmed)
		}
		// A 25% regression is what the detector exists for: confirmed in
		// nearly every trial, within three cycles' fsync rounds (an
		// adaptive cycle runs a dozen or more).
		within := 36.0 // σ 0.10: the p90 of trials
		if sigma > 0.1 {
			within = 48 // σ 0.15: the mean
		}
		if r := row(1.25); r.Confirmed < 0.9 || (sigma <= 0.1 && r.ConfirmP90 > within) || (sigma > 0.1 && r.ConfirmMean > within) {
			t.Errorf("σ %v: 1.25× confirmed in %.3f of trials, mean %v p90 %v rounds; want 90%%, within %v", sigma, r.Confirmed, r.ConfirmMean, r.ConfirmP90, within)
		}
	}
}

// TestUnitDelayTableDeterministic: DelayTable is a function of its arguments,
// and a row does not depend on which other shifts were asked for.
func TestUnitDelayTableDeterministic(t *testing.T) {
	p := detector.ParamsFrom(config.Default().Detector)
	shifts := []float64{0.2, math.Ln2}
	a := DelayTable(p, shifts, 0.05, 7, 10)
	b := DelayTable(p, shifts, 0.05, 7, 10)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two calls differ:\n%+v\n%+v", a, b)
	}
	if c := DelayTable(p, shifts[1:], 0.05, 7, 10); !reflect.DeepEqual(c[0], a[1]) {
		t.Errorf("row for ln 2 alone %+v, in a table %+v", c[0], a[1])
	}
	if c := DelayTable(p, shifts, 0.05, 8, 10); reflect.DeepEqual(c, a) {
		t.Errorf("seeds 7 and 8 gave the same table")
	}
	if rows := DelayTable(p, shifts, 0.05, 7, 0); len(rows) != 2 || rows[0].Suspected != 0 {
		t.Errorf("no trials: %+v", rows)
	}
}
