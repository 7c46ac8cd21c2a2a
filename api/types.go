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
	// Workload is seqwrite, randwrite or fsync: the `job` fields.
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
}

// OverheadResponse is GET /api/v1/overhead: the latest overhead per engine,
// target, job and metric, over the agent's window of recent rounds.
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
	Results     []Result   `json:"results"`       // as in `layerprobe run --output json`
	// CopyUp is the cold entry's copy-up summary over the window (its
	// samples list is empty here; GET /api/v1/cycles/{id} has them).
	CopyUp *CopyUp `json:"copy_up,omitempty"`
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
	// StopReason says what ended the cycle's rounds: precision, bytes,
	// time, rounds, decided (confirmation rounds) or canceled; omitted for
	// cycles that never measured.
	StopReason string `json:"stop_reason,omitempty"`
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
}

// Engine is one entry of GET /api/v1/engines.
type Engine struct {
	Name            string          `json:"name"`
	Endpoint        string          `json:"endpoint"`
	Reachable       bool            `json:"reachable"`
	Runtime         string          `json:"runtime"` // docker or podman (its Docker-compatible API)
	EngineVersion   string          `json:"engine_version"`
	Driver          string          `json:"driver"`
	DriverClass     string          `json:"driver_class"`
	BackingFS       string          `json:"backing_fs"`
	DataRoot        string          `json:"data_root"`
	ImageStore      string          `json:"image_store"`
	Rootless        bool            `json:"rootless"`
	FioVersion      string          `json:"fio_version"`
	Warnings        []string        `json:"warnings"`
	LastCycle       *Cycle          `json:"last_cycle"`
	FsyncRegression map[string]bool `json:"fsync_regression"` // target -> regressed
}

// EnginesResponse is GET /api/v1/engines.
type EnginesResponse struct {
	Engines []Engine `json:"engines"`
}

// TriggerResponse is the 202 answer of POST /api/v1/cycles.
type TriggerResponse struct {
	Status  string   `json:"status"` // accepted
	Engines []string `json:"engines"`
}

// Health is GET /healthz and /readyz.
type Health struct {
	Status string `json:"status"` // ok, not_ready
	Detail string `json:"detail,omitempty"`
}
