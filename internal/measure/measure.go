// Package measure is layerprobe's measurement data model: what is measured
// (targets, workloads, modes), what one fio job produced (JobResult), the
// raw samples a measurement keeps, and the summaries computed from them
// (Result, Raw, Overhead, CopyUp) with the functions that compute them.
//
// These types are the stable schema of everything layerprobe stores and
// writes: the JSON document of `layerprobe run` (docs/output.md), the REST
// API's wire types (api/), the store's sample records (docs/store.md) and
// the label values of the metrics. Within one schema version fields are
// only ever added. Figures a measurement could not produce (a latency fio
// did not report, an overhead without a single valid round pair) are NaN
// in Go and null in JSON, because encoding/json refuses NaN and a zero
// would read as a real measurement.
package measure

// Target is where a job runs. TargetHost is the reference: every overhead
// is relative to it. The values are the `target` label of the metrics and
// the `target` field of the JSON output.
type Target string

// Targets.
const (
	TargetHost      Target = "host"      // a host directory, fio run natively
	TargetContainer Target = "container" // the probe container's writable layer
	TargetBind      Target = "bind"      // the host directory bind-mounted into the probe container
	TargetVolume    Target = "volume"    // a named volume mounted into the probe container
)

// Targets lists every target in display order, host first.
var Targets = []Target{TargetHost, TargetContainer, TargetBind, TargetVolume}

// Workload names one of the measured workloads. The values are the
// `workload` label of every metric and the `workload` field of the JSON
// output. (Before run JSON schema_version 2 both were called `job`, which
// clashed with Prometheus' own `job` target label; legacy.go still reads
// the old field.)
type Workload string

// The workloads, in the order tables show them.
const (
	SeqWrite  Workload = "seqwrite"  // sequential 1 MiB writes
	RandWrite Workload = "randwrite" // 4 KiB random writes
	Fsync     Workload = "fsync"     // 4 KiB random read/write, fsync after every write
	// SmallFiles creates, writes, stats and deletes a nested tree of
	// small files, as a package install or a checkout does: the metadata
	// path, which the three data-path workloads do not take. Its ops are
	// file system operations (package smallfiles), not fio I/Os.
	SmallFiles Workload = "smallfiles"
)

// Workloads lists every workload in display order.
var Workloads = []Workload{SeqWrite, RandWrite, Fsync, SmallFiles}

// Mode says how a measurement treats the probe container. The values are
// the store's mode column, the API's mode field and the metrics' mode
// label.
type Mode string

// Modes.
const (
	ModeSteady Mode = "steady" // the long-lived probe container
	ModeCold   Mode = "cold"   // a fresh container per round, and copy-up
	// ModeBoth is a `layerprobe run` that measures steady and cold; no
	// single measurement has it.
	ModeBoth Mode = "both"
)

// Modes lists the modes a measurement (a cycle, a sample) can have.
var Modes = []Mode{ModeSteady, ModeCold}

// StopReason says what ended a measurement's rounds: the stop_reason of
// `layerprobe run --output json`, of the agent's cycles in the REST API
// and the store, and the "stopped by" of the tables. Empty for a
// measurement that never ran a round (an engine that could not be
// measured, a cycle skipped or failed before measuring, a cycle recorded
// before the store's schema 3).
type StopReason string

// Stop reasons.
const (
	// StopPrecision: every headline interval reached the target precision
	// (an agent's cycle counts its window's rounds).
	StopPrecision StopReason = "precision"
	// StopBytes: the next round would have exceeded the byte budget
	// (max_bytes).
	StopBytes StopReason = "bytes"
	// StopTime: the next round would have ended after the time budget
	// (max_duration).
	StopTime StopReason = "time"
	// StopRounds: the fixed (or the maximum) number of rounds is done, or
	// every job still wider than the precision fills the agent's window.
	StopRounds StopReason = "rounds"
	// StopCanceled: the caller stopped the measurement (an interrupted
	// run or cycle).
	StopCanceled StopReason = "canceled"
	// StopDecided: the plan's own test ended it: confirmation rounds that
	// reached the detector's verdict.
	StopDecided StopReason = "decided"
)

// DefaultConfidence is the confidence of every interval layerprobe
// publishes: the table and JSON of `layerprobe run`, the agent's metrics
// and REST API.
const DefaultConfidence = 0.95

// NonNil is s, or an empty list when s is nil: a record's lists are []
// in JSON, never null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
