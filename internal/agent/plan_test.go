package agent

import (
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
)

// TestNewPlan: a budget's keys mean the same plan for a run and a cycle;
// only a run takes a fixed profile's rounds, and fixed rounds run every
// target in every round.
func TestNewPlan(t *testing.T) {
	quick, err := fio.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	seed, err := fio.LookupProfile("seed")
	if err != nil {
		t.Fatal(err)
	}
	b := config.Budget{Precision: 0.03, MaxBytes: 512 * config.MiB, MaxDuration: time.Minute, SideEvery: 3}
	for _, run := range []bool{true, false} {
		p := NewPlan(b, quick, run)
		if p.Rounds != 0 || p.MinRounds != quick.MinRounds || p.Precision != 0.03 || p.MaxBytes != 512<<20 ||
			p.MaxDuration != time.Minute || p.SideEvery != 3 || p.Confidence != measure.DefaultConfidence {
			t.Errorf("quick (run %v): %+v", run, p)
		}
	}
	if p := NewPlan(b, seed, true); p.Rounds != seed.DefaultRounds || p.SideEvery != 0 {
		t.Errorf("a run of seed: %d rounds, side every %d; want the profile's %d, every target", p.Rounds, p.SideEvery, seed.DefaultRounds)
	}
	if p := NewPlan(b, seed, false); p.Rounds != 0 || p.SideEvery != 3 {
		t.Errorf("a cycle of seed: %d rounds, side every %d; want adaptive", p.Rounds, p.SideEvery)
	}
	b.Rounds, b.MinRounds = 4, 2
	if p := NewPlan(b, quick, false); p.Rounds != 4 || p.MinRounds != 2 || p.SideEvery != 0 {
		t.Errorf("fixed rounds: %+v", p)
	}
}

// rounds are n fsync and seqwrite rounds on host and container, numbered
// from 1.
func rounds(n int) []measure.Sample {
	var out []measure.Sample
	for r := 1; r <= n; r++ {
		for _, w := range []measure.Workload{measure.Fsync, measure.SeqWrite} {
			for _, t := range []measure.Target{measure.TargetHost, measure.TargetContainer} {
				out = append(out, measure.Sample{Round: r, Target: t, JobResult: measure.JobResult{Workload: w}})
			}
		}
	}
	return out
}

// TestFillPlan: a window short of an interval's rounds for any job makes
// the cycle fill it, within the first fill's ceiling lowered to what the
// day leaves, never below the cycle's budget; a full window, fixed rounds
// or a ceiling of 0 make none.
func TestFillPlan(t *testing.T) {
	prof := fio.Profile{Name: "t", Jobs: []fio.Job{{Workload: measure.Fsync}, {Workload: measure.SeqWrite}}}
	ff := config.FirstFill{MaxBytes: 1536 * config.MiB, MaxDuration: 5 * time.Minute}
	base := probe.Plan{MinRounds: 2, Precision: 0.03, MaxBytes: 512 << 20, MaxDuration: 3 * time.Minute, Confidence: measure.DefaultConfidence}
	with := func(prior []measure.Sample) probe.Plan { p := base; p.Prior = prior; return p }

	if p := FillPlan(with(nil), ff, prof, -1); p.Fill != (probe.Fill{Pairs: 6, MaxBytes: 1536 << 20, MaxDuration: 5 * time.Minute}) {
		t.Errorf("empty window: fill %+v; want 6 rounds within 1.5 GiB and 5m", p.Fill)
	}
	if p := FillPlan(with(rounds(5)), ff, prof, -1); p.Fill.Pairs != 6 {
		t.Errorf("5 rounds in the window: fill %+v; want 6 rounds", p.Fill)
	}
	// seqwrite has 6 rounds, fsync 4: the fill is for the one that lacks.
	short := append(rounds(4), measure.Sample{Round: 5, Target: measure.TargetHost, JobResult: measure.JobResult{Workload: measure.SeqWrite}},
		measure.Sample{Round: 6, Target: measure.TargetHost, JobResult: measure.JobResult{Workload: measure.SeqWrite}})
	if p := FillPlan(with(short), ff, prof, -1); p.Fill.Pairs != 6 {
		t.Errorf("one job short: fill %+v; want 6 rounds", p.Fill)
	}
	if p := FillPlan(with(rounds(6)), ff, prof, -1); p.Fill.Pairs != 0 {
		t.Errorf("a full window: fill %+v; want none", p.Fill)
	}
	if p := FillPlan(with(nil), ff, prof, 1<<30); p.Fill.MaxBytes != 1<<30 {
		t.Errorf("1 GiB left of the day: ceiling %d; want 1 GiB", p.Fill.MaxBytes)
	}
	if p := FillPlan(with(nil), ff, prof, 100<<20); p.Fill.MaxBytes != 512<<20 {
		t.Errorf("100 MiB left of the day: ceiling %d; want the cycle's 512 MiB (the guard decides)", p.Fill.MaxBytes)
	}
	fixed := with(nil)
	fixed.Rounds = 2
	if p := FillPlan(fixed, ff, prof, -1); p.Fill.Pairs != 0 {
		t.Errorf("fixed rounds: fill %+v; want none", p.Fill)
	}
	if p := FillPlan(with(nil), config.FirstFill{}, prof, -1); p.Fill.Pairs != 0 {
		t.Errorf("first_fill.max_bytes 0: fill %+v; want none", p.Fill)
	}
}

// TestColdFillRounds: the first cold cycle makes the rounds the cold
// window lacks, as many as the ceiling holds; later ones cold_rounds.
func TestColdFillRounds(t *testing.T) {
	ff := config.FirstFill{MaxBytes: 1536 * config.MiB}
	for _, c := range []struct {
		name     string
		prior    []measure.Sample
		perRound int64
		dayLeft  int64
		want     int
	}{
		{"empty window", nil, 100 << 20, -1, 6},
		{"two rounds", rounds(2), 100 << 20, -1, 4},
		{"ceiling holds 5", nil, 300 << 20, -1, 5},
		{"the day holds 4", nil, 100 << 20, 400 << 20, 4},
		{"full window", rounds(6), 100 << 20, -1, 3},
		{"never below cold_rounds", nil, 1 << 30, -1, 3},
	} {
		if got := coldFillRounds(3, ff, c.prior, c.perRound, c.dayLeft); got != c.want {
			t.Errorf("%s: %d rounds, want %d", c.name, got, c.want)
		}
	}
	if got := coldFillRounds(3, config.FirstFill{}, nil, 1, -1); got != 3 {
		t.Errorf("no first fill: %d rounds, want cold_rounds 3", got)
	}
}

// TestCyclePlan: an adaptive cycle gives fsync the rounds that can open a
// suspicion of the detector on their own, above the budget's minimum of
// 2; a cycle of fixed rounds, or a minimum already as high, is left as it
// is.
func TestCyclePlan(t *testing.T) {
	quick, err := fio.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	p := CyclePlan(cfg, quick)
	if got := p.MinRoundsOf[measure.Fsync]; got != 3 || len(p.MinRoundsOf) != 1 || p.MinRounds != cfg.Agent.Budget.MinRounds {
		t.Errorf("defaults: min rounds %d, of %v; want %d, and 3 of fsync alone", p.MinRounds, p.MinRoundsOf, cfg.Agent.Budget.MinRounds)
	}
	cfg.Agent.Budget.MinRounds = 4
	if p := CyclePlan(cfg, quick); p.MinRoundsOf != nil {
		t.Errorf("min rounds 4: %v; want none raised", p.MinRoundsOf)
	}
	cfg = config.Default()
	cfg.Agent.Budget.Rounds = 5
	if p := CyclePlan(cfg, quick); p.MinRoundsOf != nil || p.Rounds != 5 {
		t.Errorf("fixed 5 rounds: rounds %d, %v; want 5 and none raised", p.Rounds, p.MinRoundsOf)
	}
}

// TestEstimateBeforeTheFirstCycle: with no byte cap and no cycle yet, the
// daily budget counts what each job's least rounds write, the fsync job's
// 3 among the others' 2, not the budget's minimum for every job.
func TestEstimateBeforeTheFirstCycle(t *testing.T) {
	quick, err := fio.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	plan := CyclePlan(cfg, quick)
	plan.MaxBytes, plan.Fill = 0, probe.Fill{}
	const targets = 4
	got := (&engineState{}).estimateBytes(quick, plan, targets)
	fsync := fsyncOnly(quick)
	least := cfg.Agent.Budget.MinRounds
	want := quick.MaxBytes(least, targets) - fsync.MaxBytes(least, targets) + fsync.MaxBytes(3, targets)
	if len(fsync.Jobs) != 1 || got != want {
		t.Errorf("estimate %d, want %d (fsync at 3 rounds, the rest at %d)", got, want, least)
	}
	if got <= quick.MaxBytes(least, targets) {
		t.Errorf("estimate %d is no more than every job at %d rounds, %d", got, least, quick.MaxBytes(least, targets))
	}
}
