package agent

import (
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
	"github.com/layerprobe/layerprobe/internal/stats"
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

// CyclePlan is the plan of a steady cycle from agent.budget: fixed rounds
// when agent.budget.rounds says so; adaptive otherwise, with fsync given
// at least the rounds that can open a suspicion of the detector on their
// own (detector.Params.RoundsToSuspect: 3 at the defaults). Once the
// window is narrow a cycle makes only the minimum rounds, and with 2
// fsync rounds a cycle no shift, however large, could be flagged before
// the second cycle (docs/detector.md, the run of 2026-12-05).
func CyclePlan(cfg *config.Config, prof fio.Profile) probe.Plan {
	p := NewPlan(cfg.Agent.Budget, prof, false)
	if n := detector.ParamsFrom(cfg.Detector).RoundsToSuspect(); p.Rounds == 0 && n > p.MinRounds {
		p.MinRoundsOf = map[measure.Workload]int{measure.Fsync: n}
	}
	return p
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

// windowRounds is how many rounds of each workload prior holds (a window
// of stored samples), failed ones included: the rounds its intervals
// rest on.
func windowRounds(prior []measure.Sample) map[measure.Workload]int {
	seen := map[measure.Workload]map[int]bool{}
	for _, s := range prior {
		if seen[s.Workload] == nil {
			seen[s.Workload] = map[int]bool{}
		}
		seen[s.Workload][s.Round] = true
	}
	out := make(map[measure.Workload]int, len(seen))
	for w, rs := range seen {
		out[w] = len(rs)
	}
	return out
}

// lacking is the most rounds any of the profile's jobs lacks in prior
// for an exact interval at the plan's confidence (stats.MinN): 0 when
// every job has them.
func lacking(prof fio.Profile, prior []measure.Sample, confidence float64) int {
	need := stats.MinN(confidence)
	have := windowRounds(prior)
	most := 0
	for _, j := range prof.Jobs {
		most = max(most, need-have[j.Workload])
	}
	return most
}

// FillPlan is a steady cycle's plan (plan.Prior holding the window) with
// the first fill (probe.Plan.Fill) when the window lacks rounds of a job
// for an exact interval: the cycle goes on until every job has them,
// within agent.first_fill, lowered to dayLeft, what the daily byte budget
// leaves (below 0: no daily budget), but never below the cycle's own
// budget (the guard then decides as for any cycle). Fixed rounds
// (agent.budget.rounds) and a max_bytes of 0 make no fill.
func FillPlan(plan probe.Plan, ff config.FirstFill, prof fio.Profile, dayLeft int64) probe.Plan {
	if plan.Rounds > 0 || ff.MaxBytes <= 0 || lacking(prof, plan.Prior, plan.Confidence) <= 0 {
		return plan
	}
	ceiling := int64(ff.MaxBytes)
	if dayLeft >= 0 {
		ceiling = min(ceiling, dayLeft)
	}
	ceiling = max(ceiling, plan.MaxBytes)
	plan.Fill = probe.Fill{Pairs: stats.MinN(plan.Confidence), MaxBytes: ceiling, MaxDuration: ff.MaxDuration}
	return plan
}

// coldFillRounds is the rounds of a cold cycle: agent.cold_rounds, or
// when the cold window (prior) holds fewer than an exact interval needs,
// the rounds it lacks, as many as the first fill's ceiling holds at
// perRound bytes a round (lowered to dayLeft as in FillPlan).
func coldFillRounds(rounds int, ff config.FirstFill, prior []measure.Sample, perRound, dayLeft int64) int {
	need := stats.MinN(measure.DefaultConfidence) - windowRounds(prior)[measure.Fsync]
	if ff.MaxBytes <= 0 || need <= rounds {
		return rounds
	}
	ceiling := int64(ff.MaxBytes)
	if dayLeft >= 0 {
		ceiling = min(ceiling, dayLeft)
	}
	if perRound > 0 {
		need = min(need, int(ceiling/perRound))
	}
	return max(rounds, need)
}
