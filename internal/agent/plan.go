package agent

import (
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
)

// The configuration maps to what the probe takes here and nowhere else: a
// budget to a plan, an engine's entry to a session's options. `layerprobe
// run` calls these as the agent's cycles do, so the same keys make the
// same measurement for both, and the probe knows no configuration.

// NewPlan is the plan a budget (config.Budget: a run's, or agent.budget
// for a cycle) makes for a profile (probe.Plan.ForProfile: profileRounds
// for a run, which takes a fixed profile's rounds).
func NewPlan(b config.Budget, prof fio.Profile, profileRounds bool) probe.Plan {
	p := probe.Plan{Rounds: b.Rounds, MinRounds: b.MinRounds, Precision: b.Precision,
		MaxBytes: int64(b.MaxBytes), MaxDuration: b.MaxDuration, SideEvery: b.SideEvery, Confidence: measure.DefaultConfidence}
	return p.ForProfile(prof, profileRounds)
}

// ProbeOptions are the probe session options of a configured engine: its
// probe image, scratch directory and topology, and the configuration's
// fio, targets and free-space reserve. What sets a run apart from the
// agent (throttling in tests, keeping the image) the caller adds.
func ProbeOptions(cfg *config.Config, ec config.Engine) probe.Options {
	return probe.Options{
		EngineName: ec.Name, FioBinary: cfg.Fio.Binary, ProbeImage: ec.ProbeImage, ScratchDir: ec.ScratchDir,
		Topology: ec.Topology, Targets: cfg.Targets, Mode: measure.ModeSteady,
		MinFreeBytes: int64(cfg.FreeSpace.MinFreeBytes), MinFreeRatio: cfg.FreeSpace.MinFreeRatio,
	}
}
