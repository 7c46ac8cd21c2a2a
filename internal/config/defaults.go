package config

import (
	"slices"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// DefaultPath is where the CLI looks for the file when --config is not
// given. Without a file there, Default serves.
const DefaultPath = "/etc/layerprobe/config.yaml"

// DefaultEngineName names the engine measured when the file configures
// none: the one DOCKER_HOST, or the default socket, reaches.
const DefaultEngineName = "default"

// Engine types (Engine.Type).
const (
	EngineDocker     = "docker"
	EngineContainerd = "containerd"
)

// Snapshotters are the containerd snapshotters layerprobe measures.
var Snapshotters = []string{"overlayfs", "native", "btrfs", "fuse-overlayfs"}

// IsContainerd reports whether the engine is reached through containerd's
// own API.
func (e Engine) IsContainerd() bool { return e.Type == EngineContainerd }

// DefaultSideEvery: bind and volume run in one of every 3 adaptive rounds
// after the minimum, so that a round's bytes go to the headline pair
// (Budget.SideEvery).
const DefaultSideEvery = 3

// Default returns the built-in configuration: what an empty file, or no
// file at all, means. Each call returns a fresh value the caller may change.
func Default() *Config {
	return &Config{
		Profile: fio.DefaultProfile,
		Budget: Budget{
			Precision: 0.03,
			// 3 GiB: with the rounds given to the widest interval, what
			// reaches ±5 points on every workload on overlay2 on the test
			// machine's disk, in about 3 min 50 s (2.5 GiB until 5 Dec:
			// random and sequential writes read ±5.7 and ±5.4 there;
			// docs/methodology.md, "Where the precision stops").
			MaxBytes:    3 * GiB,
			MaxDuration: 5 * time.Minute,
			SideEvery:   DefaultSideEvery,
		},
		Targets:   []measure.Target{measure.TargetContainer, measure.TargetBind, measure.TargetVolume},
		Workloads: []measure.Workload{}, // all of the profile's
		Fio:       Fio{Binary: "fio"},
		FreeSpace: FreeSpace{
			MinFreeBytes: 1 * GiB,
			MinFreeRatio: 0.05,
		},
		Agent: Agent{
			ListenAddress: ":9811",
			StateDir:      "/var/lib/layerprobe",
			Interval:      6 * time.Hour,
			Jitter:        0.1,
			RetryBackoff:  2 * time.Minute,
			// 2 GiB a cycle, so that a new agent's window narrows within
			// days, not weeks. The cap is spent only while a window is
			// wider than the precision and not yet full (a full window
			// cannot narrow); then a cycle makes the minimum rounds
			// (docs/methodology.md, "The agent's window reaches ±3").
			Budget: Budget{
				MinRounds:   2,
				Precision:   0.03,
				MaxBytes:    2 * GiB,
				MaxDuration: 3 * time.Minute,
				SideEvery:   DefaultSideEvery,
			},
			// A default agent's first regular cycle wrote 507 MiB in
			// 36 s for 2-4 rounds of each job; 6 of each, on every
			// target, take about 1.2 GiB and 90 s on the same disk.
			FirstFill:    FirstFill{MaxBytes: 1536 * MiB, MaxDuration: 5 * time.Minute},
			ColdInterval: 12 * time.Hour,
			ColdRounds:   3,
			// 500 MiB told nothing that 10 and 100 do not: start-up is flat
			// in the image's size on every driver but vfs, whose growth 10
			// and 100 MiB show (docs/benchmarks.md §7); it was a third of a
			// new agent's first writes.
			StartupImages: []ByteSize{10 * MiB, 100 * MiB},
			// 144 rounds: what ±3 points of random and sequential writes
			// need on the benchmark disk's noisier days, which 48 could
			// never hold. Cold rounds come three a cycle every 12 h: 48
			// are 8 days of them.
			WindowRounds:     144,
			ColdWindowRounds: 48,
			Retention:        90 * 24 * time.Hour,
			// Four 2 GiB cycles and two cold ones a day, with room:
			// the budget is the guard against what the caps do not
			// foresee, not the plan.
			DailyByteBudget:  10 * GiB,
			MaxIOPressure:    10,
			MaxDiskUtil:      0.5,
			ChurnQuietPeriod: 60 * time.Second,
		},
		Detector: Detector{
			Metric:           "fsync_p99",
			BaselineRounds:   200,
			MinBaselineRound: 12,
			K:                0.5,
			H:                6,
			Clip:             3,
			// A 5% floor and 23 of 32 fresh rounds: the same sign-test
			// level as 13 of 16 over a 10% floor (P(Bin(32, ½) ≥ 23) =
			// 0.010), with the power to confirm a 25% regression at a
			// per-round σ near 0.2 (docs/detector.md).
			MinEffect:     0.05,
			ConfirmRounds: 32,
			ConfirmMin:    23,
		},
		Advisor: Advisor{
			Enabled:        true,
			MetricsTopN:    10,
			MinLayerBytes:  32 * MiB,
			WalkMaxEntries: 20000,
			WalkMaxTime:    time.Second,
			PassMaxTime:    30 * time.Second,
		},
	}
}

// EffectiveEngines returns the engines to measure: the configured ones, or
// when none is configured the single engine DefaultEngineName with an
// empty host (DOCKER_HOST or the default socket). The slice is a copy.
func (c *Config) EffectiveEngines() []Engine {
	if len(c.Engines) == 0 {
		return []Engine{{Name: DefaultEngineName}}
	}
	return slices.Clone(c.Engines)
}
