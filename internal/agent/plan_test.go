package agent

import (
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
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
