//go:build bench

package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// detectionPlan sizes the detection section.
type detectionPlan struct {
	profile string
	// learnCap bounds the learning cycles; counted follow them.
	learnCap, counted int
	// calibration: `layerprobe run` under limits from ladderStart down by
	// ladderFactor until the slowdown reaches stopAt or maxSteps ran.
	calibArgs    []string
	ladderStart  float64
	ladderFactor float64
	maxSteps     int
	stopAt       float64
	levels       []float64 // nominal slowdowns
	capCycles    int
	cycleTimeout time.Duration
	// extraAgent is added to the agent's configuration (short mode's
	// stand-ins only).
	extraAgent string
}

func planDetection(short bool, counted int) detectionPlan {
	if short {
		return detectionPlan{profile: "smoke", learnCap: 12, counted: counted,
			calibArgs:   []string{"--profile", "smoke", "--rounds", "6"},
			ladderStart: 4000, ladderFactor: 0.25, maxSteps: 2, stopAt: 2.5,
			levels: []float64{1.25, 2}, capCycles: 2, cycleTimeout: 10 * time.Minute,
			// The smoke profile's intervals never reach 3 pp: cycles
			// would run for the default 3 minutes.
			extraAgent: "  cycle_max_duration: 10s\n"}
	}
	return detectionPlan{profile: "quick", learnCap: 40, counted: counted,
		calibArgs:   []string{"--profile", "quick", "--rounds", "6"},
		ladderStart: 16000, ladderFactor: 1 / math.Sqrt2, maxSteps: 9, stopAt: 2.5,
		levels: []float64{1.25, 1.5, 2}, capCycles: 6, cycleTimeout: 20 * time.Minute}
}

// detectionConfig is the agents' configuration: the shipped detector and
// cycle settings (adaptive cycles with their byte and time caps, the
// published window, every detector default); targets cut to the writable
// layer and the bind mount (the A/A control); the busy-host guards off,
// so that a busy machine cannot skip the cycles being counted; no daily
// budget; no cold probe (the detector watches steady cycles, and a cold
// cycle would be counted). The schedule is an hour away: the benchmark
// triggers every cycle itself.
func detectionConfig(plan detectionPlan) string {
	return fmt.Sprintf(`profile: %s
targets: [container, bind]
agent:
  interval: 1h
  cold_interval: 0s
  jitter: 0
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
%s`, plan.profile, plan.extraAgent)
}

// screening reports whether the detector of every target screens (has its
// minimum baseline) after the rounds so far, replayed.
func screening(rounds []roundObs) bool {
	for _, t := range []string{"container", "bind"} {
		if replay(detector.State{}, rounds, t).Phase != detector.PhaseWatching {
			return false
		}
	}
	return true
}

func measureDetection(ctx context.Context, p *progress, bin, host, lockFile, workDir string, plan detectionPlan) (*detectionResult, error) {
	ac := config.Default().Agent
	res := &detectionResult{Driver: "overlay2", Profile: plan.profile, AgentConfig: detectionConfig(plan),
		WindowRounds: ac.WindowRounds, CycleMaxBytes: int64(ac.Budget.MaxBytes),
		CountedCycles: plan.counted, CalibrationArgs: plan.calibArgs, CapCycles: plan.capCycles}

	// 1. Unperturbed cycles: the detector learns, then screens; every
	// alarm here is a false one.
	base, err := newAgentDir(filepath.Join(workDir, "agent-unperturbed"), res.AgentConfig)
	if err != nil {
		return res, err
	}
	a, err := startBenchAgent(ctx, bin, base, host, lockFile)
	if err != nil {
		return res, err
	}
	p.logf("unperturbed: learning (at most %d cycles), then %d counted cycles, profile %s, targets container and bind", plan.learnCap, plan.counted, plan.profile)
	sr := seriesRun{agent: a, timeout: plan.cycleTimeout}
	var runErr error
	for i, counted := 1, 0; counted < plan.counted && runErr == nil; i++ {
		sr.phase = "learn"
		if res.LearnCycles > 0 || i > plan.learnCap {
			sr.phase = "counted"
		}
		o, err := sr.one(ctx, &res.Unperturbed, i)
		if err != nil {
			runErr = fmt.Errorf("unperturbed cycle %d: %w", i, err)
			break
		}
		if sr.phase == "counted" {
			counted++
		} else if screening(res.Unperturbed.Rounds) || i == plan.learnCap {
			res.LearnCycles = i
		}
		c := o.cycles[0]
		note := ""
		if len(o.cycles) > 1 {
			note = fmt.Sprintf(", confirmation cycle of %d rounds", o.cycles[1].Rounds)
		}
		p.logf("  unperturbed %d (%s%s): %s in %.1f s, %d rounds, %s, stop %s, %s%s", i, sr.phase, countedOf(sr.phase, counted, plan.counted),
			c.Result, c.DurationSeconds, c.Rounds, gib(c.BytesWritten), orDash(string(c.StopReason)), fmtRegression(o.regression), note)
	}
	a.stop()
	res.Unperturbed.Events = a.events()
	a.saveLog(filepath.Join(base.Dir, "agent.log"))
	if runErr != nil {
		return res, runErr
	}

	// The baseline the throttled agents start from, as their detector
	// has it (replayed from the same rounds).
	st := replay(detector.State{}, res.Unperturbed.Rounds, "container")
	m0 := st.Baseline.Median
	p.logf("baseline: container fsync p99 ratio %.3f (σ₀ %.3f over %d rounds), floor %.2fx, phase %s",
		math.Exp(m0), st.Baseline.Sigma, st.Baseline.N, math.Exp(detectorParams().Floor(st.Baseline)-m0), st.Phase)

	// 2. Calibration: the slowdown of the container's fsync p99 ratio
	// under candidate limits, against the unperturbed baseline.
	var limits []uint64
	var slowdowns []float64
	limit := plan.ladderStart
	for step := 0; step < plan.maxSteps; step++ {
		l := roundLimit(limit)
		r := lpRun{binary: "new", bin: bin, host: host, lockFile: lockFile, workDir: filepath.Join(workDir, "calibration"),
			config: "targets: [container]\n", args: plan.calibArgs,
			env: []string{fmt.Sprintf("LAYERPROBE_TEST_THROTTLE_WRITE_IOPS=%d", l)}, timeout: 20 * time.Minute}
		run, err := r.run(ctx)
		if err != nil {
			return res, fmt.Errorf("calibration at %d write IOPS: %w", l, err)
		}
		res.Calibration = append(res.Calibration, calibPoint{WriteIOPS: l, Run: run})
		s := slowdownVs(m0, run.logRatios("container", "fsync"))
		limits, slowdowns = append(limits, l), append(slowdowns, s)
		p.logf("  calibration: %d write IOPS -> fsync p99 ratio x%.2f (%.0f s)", l, s, run.Seconds)
		if s >= plan.stopAt {
			break
		}
		limit *= plan.ladderFactor
	}
	curve := newCalibCurve(limits, slowdowns)

	// 3. Injected slowdowns: each level starts from a copy of the learned
	// state, and the agent restarts with its probe container throttled.
	for li, nominal := range plan.levels {
		l, pred := curve.limitFor(nominal)
		lv := levelResult{Nominal: nominal, WriteIOPS: l, Predicted: pred}
		p.logf("level x%.2f: %d write IOPS (calibration predicts x%.2f), up to %d cycles", nominal, l, pred, plan.capCycles)
		dir, err := base.cloneState(filepath.Join(workDir, fmt.Sprintf("agent-level%d", li+1)))
		if err != nil {
			return res, err
		}
		a, err := startBenchAgent(ctx, bin, dir, host, lockFile, fmt.Sprintf("LAYERPROBE_TEST_THROTTLE_WRITE_IOPS=%d", l))
		if err != nil {
			return res, err
		}
		lv.AgentStartedAt = a.started.UTC().Format(time.RFC3339)
		sr := seriesRun{agent: a, phase: "throttled", timeout: plan.cycleTimeout}
		start := time.Now()
		for i := 1; i <= plan.capCycles; i++ {
			o, err := sr.one(ctx, &lv.Series, i)
			if err != nil {
				runErr = fmt.Errorf("level x%.2f cycle %d: %w", nominal, i, err)
				break
			}
			xs := fsyncX(lv.Series.Rounds, "container")
			p.logf("  x%.2f cycle %d: %d cycle(s), %s, container ratio so far x%.2f vs baseline", nominal, i, len(o.cycles),
				fmtRegression(o.regression), slowdownVs(m0, xs))
			if o.regression["container"] == 1 {
				lv.FlaggedAfter = i
				lv.SecondsToFlag = time.Since(start).Seconds()
				break
			}
		}
		a.stop()
		lv.Series.Events = a.events()
		a.saveLog(filepath.Join(dir.Dir, "agent.log"))
		res.Levels = append(res.Levels, lv)
		if runErr != nil {
			return res, runErr
		}
		if lv.FlaggedAfter > 0 {
			p.logf("level x%.2f: flagged after %d measurement cycle(s), %.0f s", nominal, lv.FlaggedAfter, lv.SecondsToFlag)
		} else {
			p.logf("level x%.2f: not flagged within %d cycles", nominal, plan.capCycles)
		}
	}
	return res, nil
}

// countedOf is a progress line's "3/100" of the counted cycles.
func countedOf(phase string, counted, of int) string {
	if phase != "counted" {
		return ""
	}
	return fmt.Sprintf(" %d/%d", counted, of)
}

func fmtRegression(m map[string]float64) string {
	var parts []string
	for _, t := range []string{"container", "bind", "volume"} {
		if v, ok := m[t]; ok {
			parts = append(parts, fmt.Sprintf("%s=%g", t, v))
		}
	}
	return "regression " + strings.Join(parts, " ")
}

// baselineOf returns the detector state at the end of the unperturbed
// cycles, and the robust spread of the container's rounds.
func baselineOf(d *detectionResult) (detector.State, float64) {
	st := replay(detector.State{}, d.Unperturbed.Rounds, "container")
	return st, stats.RobustSigma(fsyncX(measurementRounds(d.Unperturbed, ""), "container"))
}
