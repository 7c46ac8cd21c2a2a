// Package report owns the output of `layerprobe run`: the JSON document
// written with --output json and the terminal table.
//
// The JSON schema is a public interface, documented field by field in
// docs/output.md (a test keeps the two in step). Within one SchemaVersion,
// fields are only ever added; a rename or a change of meaning bumps
// SchemaVersion. Figures a measurement could not produce (a latency fio did
// not report, an overhead without a single valid round pair) are NaN in Go
// and null in JSON, because encoding/json refuses NaN and a zero would read
// as a real measurement.
package report

import (
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
)

// SchemaVersion is the version of the JSON document written by WriteJSON.
const SchemaVersion = 1

// DefaultConfidence is the confidence of the intervals `layerprobe run`
// reports, and what WriteTable assumes when Run.Confidence is unset.
const DefaultConfidence = 0.95

// Targets. TargetHost is the reference: every overhead is relative to it.
const (
	TargetHost      = "host"      // a host directory, fio run natively
	TargetContainer = "container" // the probe container's writable layer
	TargetBind      = "bind"      // the host directory bind-mounted into the probe container
	TargetVolume    = "volume"    // a named volume mounted into the probe container
)

// targetOrder is the display and summary order; unknown targets follow it.
var targetOrder = []string{TargetHost, TargetContainer, TargetBind, TargetVolume}

// Run is one `layerprobe run`: every engine measured, with summaries and the
// raw samples they were computed from.
type Run struct {
	SchemaVersion     int    `json:"schema_version"`
	LayerprobeVersion string `json:"layerprobe_version"`
	Profile           string `json:"profile"`
	// Mode is "steady" (a long-lived probe container: Engine.Results),
	// "cold" (a fresh container per round and copy-up: Engine.Cold) or
	// "both".
	Mode   string `json:"mode"`
	Rounds int    `json:"rounds"`
	// Confidence of every interval in the document, e.g. 0.95.
	Confidence      float64   `json:"confidence"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	BytesWritten    int64     `json:"bytes_written"`
	Engines         []Engine  `json:"engines"`
}

// Engine is the measurement of one Docker engine.
type Engine struct {
	Name          string   `json:"name"`
	Endpoint      string   `json:"endpoint"`
	EngineVersion string   `json:"engine_version"`
	Driver        string   `json:"driver"`
	DriverClass   string   `json:"driver_class"`
	DriverNote    string   `json:"driver_note,omitempty"`
	BackingFS     string   `json:"backing_fs"`
	DataRoot      string   `json:"data_root"`
	ImageStore    string   `json:"image_store"`
	FioVersion    string   `json:"fio_version"`
	Rootless      bool     `json:"rootless"`
	Warnings      []string `json:"warnings"`
	// Error is set when the engine could not be measured at all
	// (unreachable, scratch directory on another file system, ...).
	Error           *Error   `json:"error,omitempty"`
	BytesWritten    int64    `json:"bytes_written"`
	DurationSeconds float64  `json:"duration_seconds"`
	Results         []Result `json:"results"`
	Samples         []Sample `json:"samples"`
	// Cold is the cold-path measurement, present in modes cold and both.
	Cold *Cold `json:"cold,omitempty"`
}

// Error says why an engine could not be measured.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Result summarizes one target and job over all rounds.
type Result struct {
	Target       string `json:"target"` // host, container, bind or volume
	Job          string `json:"job"`    // seqwrite, randwrite or fsync
	RoundsOK     int    `json:"rounds_ok"`
	RoundsFailed int    `json:"rounds_failed"`
	// Raw holds medians over the successful rounds.
	Raw Raw `json:"raw"`
	// Overhead relative to host, by metric name (the Metric* constants).
	// Absent for the host target itself.
	Overhead map[string]Overhead `json:"overhead,omitempty"`
	Failures []Failure           `json:"failures,omitempty"`
}

// Raw holds a target's own figures: medians over successful rounds, in base
// units. NaN (null in JSON) means not applicable or not measured.
type Raw struct {
	IOPS           float64 `json:"iops"`                       // read + write
	BandwidthBytes float64 `json:"bandwidth_bytes_per_second"` // read + write
	LatencyP50     float64 `json:"latency_p50_seconds"`        // write completion latency
	LatencyP99     float64 `json:"latency_p99_seconds"`        // write completion latency
	FsyncP99       float64 `json:"fsync_p99_seconds"`          // fsync job only
}

// Overhead is the paired median overhead of a target relative to host for
// one metric (see stats.PairedOverhead for the definitions).
type Overhead struct {
	Ratio         float64 `json:"ratio"` // 0.08 = 8% slower than host; negative = faster
	CILow         float64 `json:"ci_low"`
	CIHigh        float64 `json:"ci_high"`
	PercentOfHost float64 `json:"percent_of_host"` // speed as % of host's: 92 = "92% of host"
	PercentLow    float64 `json:"percent_of_host_low"`
	PercentHigh   float64 `json:"percent_of_host_high"`
	N             int     `json:"rounds"`   // round pairs used
	Coverage      float64 `json:"coverage"` // achieved coverage of the interval
}

// Failure is one failed round of a target and job.
type Failure struct {
	Round   int    `json:"round"`
	Reason  string `json:"reason"` // a fio.Reason
	Message string `json:"message"`
}

// Sample is one execution of one job on one target: the raw material of
// every summary, kept so that anyone can recompute or audit them.
type Sample struct {
	Round int `json:"round"` // 1-based
	// Order is the position of this target in the round's random order,
	// 1-based.
	Order           int       `json:"order"`
	Target          string    `json:"target"`
	StartedAt       time.Time `json:"started_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	fio.Result
}
