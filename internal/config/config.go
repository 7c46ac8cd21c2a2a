// Package config holds layerprobe's configuration: the YAML schema, the
// built-in defaults (no file is needed) and validation that reports every
// problem at once with its location and what is allowed.
package config

import (
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Config is the whole configuration file. Every field has a default (see
// Default); a file only needs the keys it changes.
type Config struct {
	// Profile is the built-in fio profile (fio.ProfileNames).
	Profile string `yaml:"profile"`
	// Budget is how many rounds one `layerprobe run` makes per engine and
	// what stops them.
	Budget Budget `yaml:"budget"`
	// Targets to measure besides host (host is always measured: every
	// overhead is relative to it): container, bind, volume. A file may
	// list "host" too; Load drops it, so after Load Targets never holds it.
	Targets []measure.Target `yaml:"targets"`
	// Workloads of the profile to run; empty runs all of them. Only the
	// choice is the operator's: every job keeps the built-in profile's
	// options.
	Workloads []measure.Workload `yaml:"workloads"`
	Fio       Fio                `yaml:"fio"`
	// Engines to measure. Empty means one engine named "default" reached
	// through DOCKER_HOST or the default socket.
	Engines   []Engine  `yaml:"engines"`
	FreeSpace FreeSpace `yaml:"free_space"`
	Agent     Agent     `yaml:"agent"`
	Detector  Detector  `yaml:"detector"`
	Advisor   Advisor   `yaml:"advisor"`

	// Deprecated lists the deprecated keys the file set, in file order
	// (Load fills it; see Aliases).
	Deprecated []Deprecation `yaml:"-"`
}

// Budget is the rounds and the precision/byte/time budget of one
// measurement: a `layerprobe run` (the top-level budget) or an agent's
// steady cycle (agent.budget). Both have the same keys with the same
// meaning; agent.NewPlan turns either into the plan the probe follows.
type Budget struct {
	// Rounds fixes the rounds of every job; 0 makes the measurement
	// adaptive (for a run: the profile's fixed rounds when it has them).
	Rounds int `yaml:"rounds"`
	// MinRounds is how many rounds of every job an adaptive measurement
	// makes before it may stop; 0 means the profile's minimum.
	MinRounds int `yaml:"min_rounds"`
	// Precision is the 95% interval half-width, as a ratio (0.03 = 3
	// percentage points), at which an adaptive measurement stops.
	Precision float64 `yaml:"precision"`
	// MaxBytes bounds what the measurement writes per engine, file layout
	// included (probe.Plan.MaxBytes says how; RoundFits, what it must at
	// least hold). 0 is no cap.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// MaxDuration bounds how long an adaptive measurement adds rounds per
	// engine. 0 is no cap.
	MaxDuration time.Duration `yaml:"max_duration"`
	// SideEvery gives the headline (container against host) the bytes:
	// once an adaptive measurement has made MinRounds rounds of a job,
	// bind and volume run in one of every SideEvery rounds of it, and
	// Precision is asked of the container alone. 1 runs every target in
	// every round (0 means 1).
	SideEvery int `yaml:"side_every"`
}

// Fio configures the fio binary run on the host and copied into the probe
// image, so both arms run the very same binary.
type Fio struct {
	// Binary is the host fio: a name looked up in PATH or an absolute path.
	Binary string `yaml:"binary"`
}

// Engine is one container engine to measure.
type Engine struct {
	// Name is the `engine` label of every metric. Lowercase letters,
	// digits, '-' and '_', at most 63 characters.
	Name string `yaml:"name"`
	// Type is how layerprobe talks to the engine: EngineDocker (the Docker
	// Engine API, which Podman serves too) or EngineContainerd
	// (containerd's own API, as on a Kubernetes node). Empty means docker.
	Type string `yaml:"type"`
	// Host is a Docker endpoint such as unix:///var/run/docker.sock.
	// Empty means DOCKER_HOST, or the default socket. For containerd, the
	// socket as unix:///path; empty means /run/containerd/containerd.sock.
	Host string `yaml:"host"`
	// Namespace is the containerd namespace the probe lives in (type
	// containerd only). Empty means k8s.io, the kubelet's.
	Namespace string `yaml:"namespace"`
	// Snapshotter is the containerd snapshotter to measure (type
	// containerd only): overlayfs (empty), native, btrfs, fuse-overlayfs.
	Snapshotter string `yaml:"snapshotter"`
	// ScratchDir is the agent-owned host directory for the host and bind
	// targets. It must be on the same file system as the engine's data
	// root. Empty means "<data root>/layerprobe-scratch".
	ScratchDir string `yaml:"scratch_dir"`
	// Topology is where the engine runs (package topology): host (its data
	// root on this host's disks; every target on the data root's file
	// system) or vm (Docker Desktop, Lima, Colima, OrbStack, Podman
	// machine: host is this host's native disk, bind goes through the
	// VM's file sharing; scratch_dir must then be a host directory the VM
	// shares writable at the same path). Empty detects it from the engine.
	Topology string `yaml:"topology"`
	// ProbeImage names a local image that already contains fio. Empty
	// means build one from the host's fio binary. Never pulled.
	ProbeImage string `yaml:"probe_image"`
}

// FreeSpace guards the data root's file system: a job is refused (and
// recorded as no_space) if it would leave less than this free.
type FreeSpace struct {
	MinFreeBytes ByteSize `yaml:"min_free_bytes"`
	MinFreeRatio float64  `yaml:"min_free_ratio"`
}

// Agent configures `layerprobe agent`.
type Agent struct {
	ListenAddress string        `yaml:"listen_address"`
	WebConfigFile string        `yaml:"web_config_file"`
	StateDir      string        `yaml:"state_dir"`
	APITokenFile  string        `yaml:"api_token_file"`
	Interval      time.Duration `yaml:"interval"`
	Jitter        float64       `yaml:"jitter"`
	// RetryBackoff is how soon a scheduled steady cycle that was skipped
	// (busy host, lock, ...) or failed runs again: after RetryBackoff, then
	// twice as long after each further miss, never longer than Interval.
	// 0 waits the whole interval.
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// Budget is how many rounds a steady cycle makes and what stops them.
	// Its rounds are adaptive by default: at least MinRounds rounds of
	// every job, then more until the published interval (over the window,
	// this cycle's rounds included) is within Precision or the cycle has
	// written MaxBytes or run MaxDuration.
	Budget Budget `yaml:"budget"`
	// FirstFill is the ceiling of a cycle that fills an empty window: a
	// steady cycle whose window holds fewer rounds of a job than an exact
	// 95% interval needs (6) goes on until every job has them, and a cold
	// cycle makes the cold rounds its window lacks, within these bounds
	// instead of Budget's (and within the daily byte budget).
	FirstFill FirstFill `yaml:"first_fill"`
	// ColdInterval is the time between cold cycles (a fresh container per
	// round, and copy-up); 0 turns the cold probe off. ColdRounds is the
	// number of rounds per cold cycle.
	ColdInterval time.Duration `yaml:"cold_interval"`
	ColdRounds   int           `yaml:"cold_rounds"`
	// StartupImages are the files, beyond the probe image's own, of the
	// images a cold cycle times container start-up from (one start from
	// each per cycle); empty turns the start-up measurement off.
	StartupImages []ByteSize `yaml:"startup_images"`
	// WindowRounds is how many of the most recent steady rounds of each
	// workload (across cycles) the published overhead and its interval are
	// computed over; ColdWindowRounds the same for cold rounds, which come
	// three a cycle every 12 hours rather than dozens a day.
	WindowRounds     int           `yaml:"window_rounds"`
	ColdWindowRounds int           `yaml:"cold_window_rounds"`
	Retention        time.Duration `yaml:"retention"`
	DailyByteBudget  ByteSize      `yaml:"daily_byte_budget"`
	// Busy-host guard: a cycle is skipped (and counted) when the host is
	// busier than this.
	MaxIOPressure    float64       `yaml:"max_io_pressure"`    // PSI io "some" avg10, percent
	MaxDiskUtil      float64       `yaml:"max_disk_util"`      // 0-1 busy fraction of the data root's device
	ChurnQuietPeriod time.Duration `yaml:"churn_quiet_period"` // no container start/stop this recently
	// MetricsDetail exposes every figure on /metrics: every overhead
	// metric, every raw figure and percentile, the cold probe's raw
	// figures and advisor.metrics_top_n containers. false (the default)
	// keeps each target's and workload's headline figure and at most 3
	// containers, so that an agent costs its Prometheus about a third of
	// the series.
	MetricsDetail bool `yaml:"metrics_detail"`
}

// FirstFill bounds the cycles that fill an empty window
// (Agent.FirstFill). A MaxBytes of 0 turns the fill off: the first
// cycles make their regular rounds.
type FirstFill struct {
	MaxBytes    ByteSize      `yaml:"max_bytes"`
	MaxDuration time.Duration `yaml:"max_duration"`
}

// Detector configures the fsync regression detector.
type Detector struct {
	// Metric compared against the baseline: fsync_p99 or latency_p99.
	Metric           string  `yaml:"metric"`
	BaselineRounds   int     `yaml:"baseline_rounds"`     // rounds in the baseline window
	MinBaselineRound int     `yaml:"min_baseline_rounds"` // rounds needed before detecting
	K                float64 `yaml:"k"`                   // CUSUM allowance, in robust sigmas
	H                float64 `yaml:"h"`                   // CUSUM decision threshold
	Clip             float64 `yaml:"clip"`                // robust z-scores are clipped at +-Clip
	MinEffect        float64 `yaml:"min_effect"`          // effect floor: ratio must exceed baseline*(1+MinEffect)
	ConfirmRounds    int     `yaml:"confirm_rounds"`      // fresh rounds run to confirm a suspicion
	ConfirmMin       int     `yaml:"confirm_min"`         // of which at least this many must exceed the floor
}

// Advisor configures the layer-write advisor: per running container, what
// it writes into its writable layer and where the rest of its writes land.
// The agent runs a pass with every steady cycle; `layerprobe advise` runs
// one.
type Advisor struct {
	// Enabled turns the agent's passes on (`layerprobe advise` runs
	// regardless).
	Enabled bool `yaml:"enabled"`
	// MetricsTopN is how many containers, ranked by bytes in their
	// writable layer, carry metric series of their own; the others are
	// summed into one series.
	MetricsTopN int `yaml:"metrics_top_n"`
	// MinLayerBytes is the least a container must have written into its
	// layer to get advice (a database keeping its data there gets it
	// regardless).
	MinLayerBytes ByteSize `yaml:"min_layer_bytes"`
	// WalkMaxEntries and WalkMaxTime cap the walks of one container's
	// upper directory and mounts together; PassMaxTime caps one pass over
	// an engine.
	WalkMaxEntries int           `yaml:"walk_max_entries"`
	WalkMaxTime    time.Duration `yaml:"walk_max_time"`
	PassMaxTime    time.Duration `yaml:"pass_max_time"`
}

// WindowOf is the window of a mode's rounds: ColdWindowRounds for cold
// rounds, WindowRounds for steady ones.
func (a Agent) WindowOf(mode measure.Mode) int {
	if mode == measure.ModeCold {
		return a.ColdWindowRounds
	}
	return a.WindowRounds
}
