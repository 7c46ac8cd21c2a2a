//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sweepVariants are the detector settings TestDetectorSweep compares: the
// effect floor and the confirmation's length, each n/c pair the smallest
// count c with P(Bin(n, ½) ≥ c) ≈ 0.01, the sign test's level at the floor.
var sweepVariants = []struct {
	minEffect float64
	rounds    int
	min       int
}{
	{0.10, 16, 13}, // the defaults until 2026-11-25
	{0.10, 24, 18},
	{0.05, 16, 13},
	{0.05, 24, 18},
	{0.05, 28, 21},
	{0.05, 32, 23},
	{0.05, 40, 28},
	{0.03, 32, 23},
	{0, 16, 13},
}

// TestDetectorSweep replays the measured A/A rounds of the results file
// (BENCH_RESULTS, default ../docs/bench/results.json) through the detector
// at each of sweepVariants, as the report's replay does with the defaults:
// false confirmations per 1000 cycles per driver, and on overlay2 the share
// of injected shifts confirmed within 1 and 3 cycles. It measures nothing.
//
//	go test -tags bench -run TestDetectorSweep -v .
func TestDetectorSweep(t *testing.T) {
	path := os.Getenv("BENCH_RESULTS")
	if path == "" {
		path = filepath.Join("..", "docs", "bench", "results.json")
	}
	r, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	block := cycleBlock(r.Detection)
	if block == 0 {
		t.Skip("the results have no agent cycles: no cycle size to replay")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d fsync rounds per cycle; false confirmations per 1000 cycles (%d×%d); overlay2 shifts confirmed within 1 / 3 cycles (%d trials)\n",
		block, replayAgents, replayCycles, replayTrials)
	fmt.Fprintf(&b, "%-10s %-7s", "min_effect", "confirm")
	for _, dr := range r.Drivers {
		fmt.Fprintf(&b, " %9s", "fa "+dr.Driver)
	}
	for _, l := range replayLevels {
		fmt.Fprintf(&b, " %11s", times(l))
	}
	b.WriteString("\n")
	for _, v := range sweepVariants {
		p := detectorParams()
		p.MinEffect, p.ConfirmRounds, p.ConfirmMin = v.minEffect, v.rounds, v.min
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%-10.2f %-7s", v.minEffect, fmt.Sprintf("%d/%d", v.min, v.rounds))
		var over aaSources
		for _, dr := range r.Drivers {
			src := aaSourcesOf(r, dr.Driver)
			if dr.Driver == "overlay2" {
				over = src
			}
			if src.rounds() < p.MinBaselineRounds {
				fmt.Fprintf(&b, " %9s", "–")
				continue
			}
			fmt.Fprintf(&b, " %9.2f", replayFalseAlarms(p, src, block, replayAgents, replayCycles, replaySeed).perThousand())
		}
		for _, l := range replayLevels {
			if over.rounds() < p.MinBaselineRounds {
				fmt.Fprintf(&b, " %11s", "–")
				continue
			}
			s := replayShift(p, over, block, l, replayTrials, replayCap, replaySeed)
			fmt.Fprintf(&b, " %4.0f%%/%4.0f%%", 100*s.within(1), 100*s.within(3))
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
}
