//go:build bench

package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// sharedRuns are runs of rounds fsync rounds over four targets in a random
// order, each execution's fsync p99 e^(noise) times the round's shock: bind
// arm times slower than host, and the second of host and bind on their
// shared file second times slower than the first.
func sharedRuns(rounds int, arm, second float64) []runDoc {
	rng := rand.New(rand.NewPCG(7, 11))
	targets := []string{"host", "container", "bind", "volume"}
	var d runDoc
	for r := 1; r <= rounds; r++ {
		shock := math.Exp(0.3 * rng.NormFloat64()) // the round's moment of the disk
		seen := false
		for i, p := range rng.Perm(len(targets)) {
			t := targets[p]
			v := 2e-3 * shock * math.Exp(0.1*rng.NormFloat64())
			if t == "bind" {
				v *= arm
			}
			if t == "host" || t == "bind" {
				if seen {
					v *= second
				}
				seen = true
			}
			d.Executions = append(d.Executions, execution{Round: r, Order: i + 1, Target: t, Workload: "fsync",
				V: []fnum{1000, 4e6, 1e-4, 1e-3, fnum(v)}})
		}
	}
	return []runDoc{d}
}

func TestUnitOrderSplit(t *testing.T) {
	near := func(name string, got meanSE, want float64) {
		t.Helper()
		if math.Abs(got.Mean-want) > 4*got.SE || !(got.SE > 0) {
			t.Errorf("%s: %+.4f ± %.4f, want %+.4f", name, got.Mean, got.SE, want)
		}
	}
	// bind 2% slower, the file's second execution 3% faster.
	s := orderSplitOf(sharedRuns(2000, 1.02, 1/1.03), "fsync", true)
	near("arm", s.Arm(), math.Log(1.02))
	near("second", s.Second(), -math.Log(1.03))
	near("bind first", s.BindFirst, math.Log(1.02)+math.Log(1.03))
	if v := s.verdict(); !strings.Contains(v, "belongs to the arm") {
		t.Errorf("bind 2%% slower: verdict %q", v)
	}

	// Only the order: the arm is within noise, and the verdict says so.
	s = orderSplitOf(sharedRuns(2000, 1, 1.10), "fsync", true)
	near("second only", s.Second(), math.Log(1.10))
	if v := s.verdict(); !strings.Contains(v, "nothing stands out") {
		t.Errorf("order alone: verdict %q", v)
	}

	// A throughput workload: a slower bind (lower IOPS) is a positive offset.
	runs := sharedRuns(2000, 1.05, 1) // fsync p99 1.05 times host's, so IOPS 1/1.05
	for i := range runs[0].Executions {
		e := &runs[0].Executions[i]
		e.Workload, e.V[0] = "randwrite", 1/e.V[4]
	}
	near("randwrite arm", orderSplitOf(runs, "randwrite", true).Arm(), math.Log(1.05))

	// Runs with bind on files of its own are split apart from shared
	// ones and worded as a position, not a file's second execution.
	own := sharedRuns(2000, 1.02, 1)
	own[0].BindOwnFiles = true
	mixed := append(sharedRuns(2000, 1, 1.10), own...)
	if s := orderSplitOf(mixed, "fsync", true); s.BindFirst.N+s.HostFirst.N != 2000 {
		t.Errorf("shared rounds of the mixed runs: %d, want 2000", s.BindFirst.N+s.HostFirst.N)
	}
	s = orderSplitOf(mixed, "fsync", false)
	near("own files arm", s.Arm(), math.Log(1.02))
	near("own files second", s.Second(), 0)
	if v := s.verdict(); !strings.Contains(v, "on files of their own") || !strings.Contains(v, "belongs to the arm") {
		t.Errorf("own files, bind 2%% slower: verdict %q", v)
	}

	// Too few rounds, no runs, a failed arm: no verdict, no panic.
	if v := orderSplitOf(sharedRuns(8, 1, 1), "fsync", true).verdict(); v != "" {
		t.Errorf("8 rounds: verdict %q, want none", v)
	}
	if v := orderSplitOf(nil, "fsync", true).verdict(); v != "" {
		t.Errorf("no runs: verdict %q, want none", v)
	}
	failed := sharedRuns(50, 1, 1)
	for i := range failed[0].Executions {
		if e := &failed[0].Executions[i]; e.Target == "host" {
			e.V, e.Err = nil, "timeout"
		}
	}
	if s := orderSplitOf(failed, "fsync", true); s.BindFirst.N+s.HostFirst.N != 0 || s.verdict() != "" {
		t.Errorf("host failed in every round: %+v", s)
	}
}

func TestUnitShiftRatio(t *testing.T) {
	// fsync p99 10% slower, moved back by ln 1.1: no overhead.
	if got := shiftRatio(0.1, -math.Log(1.1), "fsync"); math.Abs(got) > 1e-12 {
		t.Errorf("fsync: %v, want 0", got)
	}
	// IOPS at half the host's (ratio 0.5: 50% slower) is +ln 2 on the
	// signed scale; moved by −ln 2 it is none.
	if got := shiftRatio(0.5, -math.Log(2), "randwrite"); math.Abs(got) > 1e-12 {
		t.Errorf("randwrite: %v, want 0", got)
	}
	if got := shiftRatio(0, math.Log(2), "randwrite"); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("randwrite slower by ln 2: %v, want 0.5", got)
	}
}

// reportedRun is a run that reported these overhead ratios for workload, with
// a ±1 pp interval around each.
func reportedRun(workload string, ratios map[string]float64) runDoc {
	d := runDoc{Reported: map[string]measure.Overhead{}}
	for t, r := range ratios {
		d.Reported[t+"/"+workload] = measure.Overhead{Ratio: r, CILow: r - 0.01, CIHigh: r + 0.01, N: 10}
	}
	return d
}

func TestUnitArmToArmWhy(t *testing.T) {
	// The reference's host arm read 5% fast: its container and bind both
	// read +5% against it, the default runs +1% and +0% against theirs.
	// Against bind the two agree within 1 pp, against host they are 4 pp
	// apart: the text must say the miss lies in a host arm.
	ref := reportedRun("fsync", map[string]float64{"container": 0.05, "bind": 0.04})
	dr := driverResult{Driver: "overlay2", References: []runDoc{ref}}
	for range 5 {
		dr.Defaults = append(dr.Defaults, reportedRun("fsync", map[string]float64{"container": 0.01, "bind": 0.0}))
	}
	why := armToArmWhy(dr, "fsync", 0.01)
	for _, want := range []string{"bind at +4.0% [+3.0%, +5.0%]", "container at +1.0 and the reference at +1.0", "0.0 pp apart", "lies in a host arm"} {
		if !strings.Contains(why, want) {
			t.Errorf("armToArmWhy lacks %q:\n%s", want, why)
		}
	}
	// The container itself differs (the reference's bind reads like its
	// host): no host-arm verdict.
	ref2 := reportedRun("randwrite", map[string]float64{"container": 0.10, "bind": 0.0})
	dr2 := driverResult{Driver: "btrfs", References: []runDoc{ref2}, Defaults: []runDoc{reportedRun("randwrite", map[string]float64{"container": 0.0, "bind": 0.0})}}
	if why := armToArmWhy(dr2, "randwrite", 0.0); !strings.Contains(why, "where against host they are 10.5 pp apart") || strings.Contains(why, "host arm") {
		t.Errorf("a container-only difference:\n%s", why)
	}
	// No bind in the reference, or none in the runs: nothing to say.
	noBind := reportedRun("fsync", map[string]float64{"container": 0.05})
	if why := armToArmWhy(driverResult{References: []runDoc{noBind}, Defaults: dr.Defaults}, "fsync", 0.01); why != "" {
		t.Errorf("without the reference's bind: %q", why)
	}
	if why := armToArmWhy(driverResult{References: []runDoc{ref}}, "fsync", 0.01); why != "" {
		t.Errorf("without default runs: %q", why)
	}
}

func TestUnitSignedLog(t *testing.T) {
	for _, c := range []struct {
		workload string
		ratio    float64
	}{{"fsync", 0.1}, {"fsync", -0.2}, {"randwrite", 0.5}, {"seqwrite", -0.3}} {
		if got := shiftRatio(0, signedLog(c.ratio, c.workload), c.workload); math.Abs(got-c.ratio) > 1e-12 {
			t.Errorf("%s %v: shiftRatio(0, signedLog) = %v", c.workload, c.ratio, got)
		}
	}
}

func TestUnitAgrees(t *testing.T) {
	// Two independent, unbiased estimates with true 95% intervals agree
	// about 95% of the time, whatever their widths; coverage of the
	// reference's point by the first interval alone is far lower when the
	// reference is the less precise.
	rng := rand.New(rand.NewPCG(3, 5))
	rate := func(bias float64) (agree, cover float64) {
		const n = 4000
		var a, c int
		for range n {
			e := 0.02 * rng.NormFloat64()
			r := bias + 0.04*rng.NormFloat64()
			run := est{Ratio: e, Low: e - 1.96*0.02, High: e + 1.96*0.02}
			ref := est{Ratio: r, Low: r - 1.96*0.04, High: r + 1.96*0.04}
			if run.agrees(ref) {
				a++
			}
			if run.covers(ref.Ratio) {
				c++
			}
		}
		return float64(a) / n, float64(c) / n
	}
	if agree, cover := rate(0); agree < 0.93 || agree > 0.97 || cover > 0.7 { // cover: about 62%
		t.Errorf("unbiased: agree %.3f (want about 0.95), cover %.3f (want well below)", agree, cover)
	}
	if agree, _ := rate(0.2); agree > 0.2 {
		t.Errorf("a bias of 4.5 joint σ: agree %.3f, want rarely", agree)
	}
	// Asymmetric intervals: the sides that face each other count.
	run := est{Ratio: 0, Low: -0.01, High: 0.03}
	if !run.agrees(est{Ratio: 0.05, Low: 0.01, High: 0.06}) { // hypot(0.03, 0.04) = 0.05
		t.Error("difference 0.05 within hypot(0.03, 0.04) should agree")
	}
	if run.agrees(est{Ratio: -0.05, Low: -0.06, High: -0.01}) { // hypot(0.01, 0.04) < 0.05
		t.Error("difference 0.05 beyond hypot(0.01, 0.04) should not agree")
	}
}
