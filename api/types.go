// Package api holds the wire types of layerprobe's REST API (/api/v1). The
// OpenAPI 3 description of the same API is openapi.yaml beside this file,
// embedded here so the agent serves exactly the spec it was built with.
//
// The measurement figures (results, samples, overheads, copy-up) are the
// data model of `layerprobe run --output json` too; this package names
// them by aliases, so that one definition gives both documents one JSON
// form and a client needs nothing but this package to decode either.
package api

import (
	_ "embed"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// OpenAPI is api/openapi.yaml, served at /api/v1/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// The measurement data model.
type (
	// Mode is steady (the long-lived probe container) or cold (a fresh
	// container per round, and copy-up).
	Mode = measure.Mode
	// Target is host, container, bind or volume.
	Target = measure.Target
	// Workload is seqwrite, randwrite or fsync: the `workload` fields.
	Workload = measure.Workload
	// Result summarizes one target and workload over a window of rounds.
	Result = measure.Result
	// Raw holds a target's own figures (medians), null when not measured.
	Raw = measure.Raw
	// Overhead is a target's paired median overhead relative to host for
	// one metric, with its confidence interval.
	Overhead = measure.Overhead
	// FailedRound is one failed round of a Result.
	FailedRound = measure.FailedRound
	// Sample is one fio job on one target in one round.
	Sample = measure.Sample
	// JobResult is the fio figures of a Sample, or why the job failed.
	JobResult = measure.JobResult
	// Op holds the figures of one data direction (read, write) or of
	// the syncs.
	Op = measure.Op
	// Failure says why a job failed.
	Failure = measure.Failure
	// Reason classifies a Failure: a fixed set of words.
	Reason = measure.Reason
	// CopyUp is the cold probe's copy-up record.
	CopyUp = measure.CopyUp
	// CopyUpSize summarises one copy-up file size.
	CopyUpSize = measure.CopyUpSize
	// CopyUpSample is one timed first write.
	CopyUpSample = measure.CopyUpSample
	// Lookup is the cold probe's lookup record: stat walks of the cold
	// image's tree and first creates in its directories.
	Lookup = measure.Lookup
)

// ErrorResponse is every 4xx/5xx body: {"error": {"code": ..., "message": ...}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody names what went wrong. Code is a stable machine-readable word
// (bad_parameter, not_found, unauthorized, forbidden, conflict, ...).
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// CycleID is, in a 409 of POST /api/v1/cycles, the cycle that runs;
	// absent when it is still being prepared (not recorded yet).
	CycleID int64 `json:"cycle_id,omitempty"`
}

// OverheadResponse is GET /api/v1/overhead: the latest overhead per engine,
// target, workload and metric, over the agent's window of recent rounds.
type OverheadResponse struct {
	GeneratedAt time.Time        `json:"generated_at"`
	Confidence  float64          `json:"confidence"`
	Engines     []EngineOverhead `json:"engines"`
}

// EngineOverhead holds one engine's overheads.
type EngineOverhead struct {
	Engine      string     `json:"engine"`
	Driver      string     `json:"driver"`
	BackingFS   string     `json:"backing_fs"`
	Mode        Mode       `json:"mode"`          // steady or cold
	LastCycleID int64      `json:"last_cycle_id"` // 0 when none yet (of this mode)
	LastSuccess *time.Time `json:"last_success"`  // null before the first successful cycle (of this mode)
	Window      int        `json:"window_rounds"` // rounds the estimates are computed over
	// IntervalRounds is the rounds of a job an interval needs (6 at 95%):
	// a result on fewer has its estimate without the interval.
	IntervalRounds int `json:"interval_rounds"`
	// NextCycleAt is when the next cycle of this mode is due; null when
	// none is scheduled (the cold probe off).
	NextCycleAt *time.Time `json:"next_cycle_at"`
	Results     []Result   `json:"results"` // as in `layerprobe run --output json`
	// CopyUp is the cold entry's copy-up summary over the window (its
	// samples list is empty here; GET /api/v1/cycles/{id} has them).
	CopyUp *CopyUp `json:"copy_up,omitempty"`
	// Lookup is the cold entry's summary of the stat walks and first
	// creates in the cold image's tree over the window (samples as for
	// CopyUp).
	Lookup *Lookup `json:"lookup,omitempty"`
}

// Cycle is one measurement cycle of one engine, as listed by
// GET /api/v1/cycles.
type Cycle struct {
	ID              int64     `json:"id"`
	Engine          string    `json:"engine"`
	Mode            Mode      `json:"mode"`
	Profile         string    `json:"profile"`
	Result          string    `json:"result"`           // ok, failed, skipped, interrupted, running
	Reason          string    `json:"reason,omitempty"` // why it failed or was skipped (fixed set)
	Message         string    `json:"message,omitempty"`
	Trigger         string    `json:"trigger"` // schedule, api, confirm
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	Rounds          int       `json:"rounds"`
	BytesWritten    int64     `json:"bytes_written"`
	// StopReason says what ended the cycle's rounds; omitted for cycles
	// that never measured.
	StopReason measure.StopReason `json:"stop_reason,omitempty"`
	// Running is where a running cycle the agent is measuring stands;
	// absent otherwise.
	Running *CycleProgress `json:"running,omitempty"`
}

// CycleProgress is where a running cycle stands (Cycle.Running).
type CycleProgress struct {
	// Phase is waiting (a triggered cycle behind another engine's),
	// preparing (guard, probe container), layout, measure or cold.
	Phase string `json:"phase"`
	// Workload is the job it is on; empty before the first.
	Workload Workload `json:"workload,omitempty"`
	// RoundsDone counts the cycle's completed rounds.
	RoundsDone   int   `json:"rounds_done"`
	BytesWritten int64 `json:"bytes_written"`
	// EstimatedEnd is when the cycle is expected to end; null while
	// there is no estimate (before the first round ends).
	EstimatedEnd *time.Time `json:"estimated_end"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// CyclesResponse is GET /api/v1/cycles.
type CyclesResponse struct {
	Cycles []Cycle `json:"cycles"`
}

// CycleDetail is GET /api/v1/cycles/{id}: the cycle with its raw fio figures
// and the overheads computed when it ended.
type CycleDetail struct {
	Cycle
	Samples []Sample `json:"samples"`
	Results []Result `json:"results"`
	// CopyUp is a cold cycle's copy-up record; absent for steady cycles.
	CopyUp *CopyUp `json:"copy_up,omitempty"`
	// Lookup is a cold cycle's lookup record; absent for steady cycles.
	Lookup *Lookup `json:"lookup,omitempty"`
}

// Engine is one entry of GET /api/v1/engines.
type Engine struct {
	Name      string `json:"name"`
	Endpoint  string `json:"endpoint"`
	Reachable bool   `json:"reachable"`
	measure.EngineFacts
	Warnings        []string        `json:"warnings"`
	LastCycle       *Cycle          `json:"last_cycle"`
	FsyncRegression map[string]bool `json:"fsync_regression"` // target -> regressed
	// Detector is the fsync regression detector's state per target.
	Detector map[string]DetectorState `json:"detector"`
}

// DetectorState is where one target's fsync regression detector stands
// (docs/detector.md).
type DetectorState struct {
	// Phase is learning, watching, confirming or regressed.
	Phase string `json:"phase"`
	// Since is when the phase began; null before the first round.
	Since *time.Time `json:"since"`
	// Rounds is the number of rounds the detector has seen.
	Rounds int `json:"rounds"`
	// BaselineRatio is the baseline's median ratio target/host of the
	// watched metric; null before a baseline exists.
	BaselineRatio *float64 `json:"baseline_ratio"`
	// CUSUM is the screen's statistic; a suspicion opens above the
	// threshold H.
	CUSUM float64 `json:"cusum"`
	// ConfirmRemaining is how many confirmation rounds an open suspicion
	// still needs at most; 0 otherwise.
	ConfirmRemaining int `json:"confirm_remaining"`
}

// EnginesResponse is GET /api/v1/engines.
type EnginesResponse struct {
	Engines []Engine `json:"engines"`
}

// TriggerResponse is the 202 answer of POST /api/v1/cycles: the cycles
// it started, one per engine (they run one after another), each listed
// as running until it ends; its Location header names the first.
type TriggerResponse struct {
	Status  string   `json:"status"` // accepted
	Engines []string `json:"engines"`
	// CycleID is the first engine's cycle (GET /api/v1/cycles/{id}).
	CycleID int64 `json:"cycle_id"`
	// CycleIDs are every engine's cycle, in the order of Engines.
	CycleIDs []int64 `json:"cycle_ids"`
}

// Health is GET /healthz and /readyz.
type Health struct {
	Status string `json:"status"` // ok, not_ready
	Detail string `json:"detail,omitempty"`
}

// ContainersResponse is GET /api/v1/containers and the JSON of
// `layerprobe advise --output json`: per engine, the running containers
// ranked by what they wrote into their writable layer, where their writes
// land, and advice with the layer's measured cost.
type ContainersResponse struct {
	GeneratedAt time.Time          `json:"generated_at"`
	Confidence  float64            `json:"confidence"` // of every interval
	Engines     []EngineContainers `json:"engines"`
}

// EngineContainers is one engine's last advisor pass.
type EngineContainers struct {
	Engine     string     `json:"engine"`
	Driver     string     `json:"driver"`
	ObservedAt *time.Time `json:"observed_at"` // null before the first pass
	// Error says why the last pass could not list the containers; omitted
	// when it could.
	Error string `json:"error,omitempty"`
	// LayerVsVolume is this host's measured cost of the writable layer
	// relative to a named volume, per job; empty before there are
	// measurements to compute it from.
	LayerVsVolume []LayerOverhead `json:"layer_vs_volume"`
	Pass          *AdvisorPass    `json:"pass"` // null before the first pass
	// Containers are ranked: most bytes in the writable layer first.
	Containers []Container `json:"containers"`
}

// AdvisorPass is what one advisor pass over an engine cost this process.
type AdvisorPass struct {
	DurationSeconds float64 `json:"duration_seconds"`
	CPUSeconds      float64 `json:"cpu_seconds"` // user + system CPU of the whole process during the pass
	ReadBytes       int64   `json:"read_bytes"`  // bytes the process read from block devices during the pass
	Entries         int64   `json:"walked_entries"`
	Containers      int     `json:"containers"`
	// Capped counts the containers whose walk stopped at the entry or
	// time cap (their figures are lower bounds).
	Capped int `json:"capped"`
}

// LayerOverhead is the writable layer's measured slowdown relative to a
// named volume on the same host for one job, from the paired rounds the
// agent keeps: extra time per byte written into the layer instead of the
// volume, with its interval.
type LayerOverhead struct {
	Workload Workload `json:"workload"`
	// Metric is the overhead metric it rests on: bandwidth (seqwrite) or
	// iops (randwrite, fsync).
	Metric       string  `json:"metric"`
	Slowdown     float64 `json:"slowdown"` // 0.05 = writing to the layer takes 5% longer
	SlowdownLow  float64 `json:"slowdown_low"`
	SlowdownHigh float64 `json:"slowdown_high"`
	Rounds       int     `json:"rounds"`
	Coverage     float64 `json:"coverage"`
	// VolumeWriteBytesPerSecond is what the job wrote per second of its
	// run time on the volume: the rate that turns bytes into seconds.
	VolumeWriteBytesPerSecond float64 `json:"volume_write_bytes_per_second"`
	// VolumeOpsPerSecond is the job's operations per second of its run
	// time on the volume (for smallfiles, file operations): the rate that
	// turns a count of files into seconds.
	VolumeOpsPerSecond float64 `json:"volume_ops_per_second"`
}

// Container is one running container as the advisor saw it.
type Container struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Image     string      `json:"image"`
	StartedAt time.Time   `json:"started_at"`
	Rank      int         `json:"rank"` // 1 = most bytes in its writable layer
	Layer     LayerWrites `json:"layer"`
	// BlockIO is null when the container's cgroup could not be read.
	BlockIO *BlockWrites  `json:"block_io"`
	Mounts  []MountWrites `json:"mounts"`
	// WritesLand lists where the container's writes went, largest first:
	// the layer, volumes, bind mounts; empty when it wrote less than 1 MiB
	// anywhere.
	WritesLand []Landing `json:"writes_land"`
	// UnattributedBytes is what the block writes hold beyond the layer and
	// the mounts: rewrites of existing files, files written and deleted,
	// metadata, or mounts that were not measured. Null without block
	// writes.
	UnattributedBytes *int64 `json:"unattributed_bytes"`
	// Database is set when the image is a known database or queue.
	Database *Database `json:"database"`
	// Cost is what writing its layer bytes cost it over a volume, null
	// when the layer holds less than 1 MiB or the layer's overhead was not
	// measured.
	Cost   *LayerCost `json:"cost"`
	Advice []Advice   `json:"advice"`
}

// LayerWrites is the container's writable layer.
type LayerWrites struct {
	// Bytes is the layer's size: what the container wrote there since it
	// was created, net of what it deleted (files' apparent sizes, as
	// `docker ps -s` shows).
	Bytes int64 `json:"bytes"`
	// GrowthBytes is the change since the previous pass, over
	// GrowthSeconds; null on the first pass that saw the container.
	GrowthBytes   *int64  `json:"growth_bytes"`
	GrowthSeconds float64 `json:"growth_seconds"`
	// Source is where Bytes comes from: upper_dir (layerprobe walked the
	// driver's upper directory), engine (the engine's SizeRw) or none.
	Source string `json:"source"`
	// Exact is false when Bytes is a lower bound; Note then says why.
	Exact   bool   `json:"exact"`
	Note    string `json:"note,omitempty"`
	Entries int64  `json:"entries"` // files and directories walked
	// TopPaths are the directories inside the container that hold the
	// layer's bytes, largest first; empty when the driver has no upper
	// directory to walk.
	TopPaths []PathBytes `json:"top_paths"`
}

// PathBytes is a path inside the container and the bytes under it.
type PathBytes struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// BlockWrites are the block-device writes the kernel charged to the
// container's cgroup: an estimate, and an upper bound of what it wrote
// (rewrites count every time) on cgroup v2; on cgroup v1, writes the
// kernel flushed in the background are charged elsewhere (Note says so).
type BlockWrites struct {
	Bytes       int64    `json:"written_bytes"` // since the container started
	GrowthBytes *int64   `json:"growth_bytes"`  // since the previous pass; null on the first
	Cgroup      string   `json:"cgroup"`        // v1 or v2
	Devices     []string `json:"devices"`       // major:minor counted; empty = every device
	Note        string   `json:"note,omitempty"`
}

// MountWrites is one mount of the container.
type MountWrites struct {
	Type        string `json:"type"` // volume, bind, tmpfs, ...
	Name        string `json:"name,omitempty"`
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination"`
	RW          bool   `json:"rw"`
	// Bytes is the data under the mount's host directory; null when it
	// was not measured (read-only, tmpfs, a volume driver without a host
	// directory, or the walk's caps); ModifiedBytes the part in files
	// modified since the container started.
	Bytes         *int64 `json:"bytes"`
	ModifiedBytes *int64 `json:"modified_bytes"`
	Exact         bool   `json:"exact"`
	Note          string `json:"note,omitempty"`
}

// Landing is one place the container's writes went.
type Landing struct {
	Where       string `json:"where"` // layer, volume or bind
	Name        string `json:"name,omitempty"`
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
	Bytes       int64  `json:"bytes"`
	// Exact is true for the layer's size from a complete walk or the
	// engine; the bytes of a mount are an estimate (sizes of the files
	// modified since the container started).
	Exact bool `json:"exact"`
}

// Database is a container whose image is a known database or queue.
type Database struct {
	Name     string   `json:"name"`      // postgres, mysql, redis, ...
	DataDirs []string `json:"data_dirs"` // where it keeps its data
	// InLayer is true when no data directory is on a volume, bind mount or
	// tmpfs: its data lands in the writable layer.
	InLayer bool `json:"in_layer"`
}

// LayerCost is the extra time writing the container's layer bytes took
// over writing them to a named volume on this host, for the job whose
// pattern the container's is assumed to follow.
type LayerCost struct {
	Workload     Workload `json:"workload"` // fsync for databases and queues, seqwrite otherwise
	Bytes        int64    `json:"bytes"`    // the layer bytes the cost is for
	ExtraSeconds float64  `json:"extra_seconds"`
	Low          float64  `json:"extra_seconds_low"`
	High         float64  `json:"extra_seconds_high"`
}

// Advice is one concrete suggestion.
type Advice struct {
	Kind    string `json:"kind"` // database_in_layer, layer_writes or layer_small_files
	Path    string `json:"path"` // where to mount a volume, inside the container
	Message string `json:"message"`
}
