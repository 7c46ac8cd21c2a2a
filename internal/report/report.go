// Package report writes the output of `layerprobe run`: the JSON document
// written with --output json and the terminal table.
//
// The JSON schema is a public interface, documented field by field in
// docs/output.md (a test keeps the two in step). Within one SchemaVersion,
// fields are only ever added; a rename or a change of meaning bumps
// SchemaVersion. The document's building blocks (results, samples,
// overheads, copy-up) are the measurement data model of internal/measure.
package report

import (
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// SchemaVersion is the version of the JSON document written by WriteJSON.
// Version 2: rounds are per workload and adaptive, overheads are
// Hodges-Lehmann estimates with signed-rank intervals, raw figures are
// pooled over the rounds, and samples carry latency histograms.
const SchemaVersion = 2

// Run is one `layerprobe run`: every engine measured, with summaries and the
// raw samples they were computed from.
type Run struct {
	SchemaVersion     int    `json:"schema_version"`
	LayerprobeVersion string `json:"layerprobe_version"`
	Profile           string `json:"profile"`
	// Mode is "steady" (a long-lived probe container: Engine.Results),
	// "cold" (a fresh container per round and copy-up: Engine.Cold) or
	// "both".
	Mode measure.Mode `json:"mode"`
	// Rounds is the fixed number of rounds of every job, 0 when the run
	// was adaptive (Precision, MaxBytes).
	Rounds int `json:"rounds"`
	// Precision is the target half-width of an adaptive run (ratio units,
	// 0.03 = 3 percentage points); 0 when none. MaxBytes is its byte
	// budget per engine, 0 when none.
	Precision float64 `json:"precision"`
	MaxBytes  int64   `json:"max_bytes"`
	// Confidence of every interval in the document, e.g. 0.95.
	Confidence      float64   `json:"confidence"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	BytesWritten    int64     `json:"bytes_written"`
	Engines         []Engine  `json:"engines"`
}

// Engine is the measurement of one engine (Docker or containerd).
type Engine struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	// The engine's facts are the one type the API and the metrics carry
	// too; their JSON fields are this object's.
	measure.EngineFacts
	DriverNote string   `json:"driver_note,omitempty"`
	Warnings   []string `json:"warnings"`
	// Error is set when the engine could not be measured at all
	// (unreachable, scratch directory on another file system, ...).
	Error           *Error  `json:"error,omitempty"`
	BytesWritten    int64   `json:"bytes_written"`
	DurationSeconds float64 `json:"duration_seconds"`
	// Rounds is the number of rounds run (each runs one job on every
	// target); StopReason says what ended them. LayoutBytes is what laying
	// out the job files wrote (part of BytesWritten).
	Rounds      int                `json:"rounds"`
	StopReason  measure.StopReason `json:"stop_reason"`
	LayoutBytes int64              `json:"layout_bytes"`
	Results     []measure.Result   `json:"results"`
	Samples     []measure.Sample   `json:"samples"`
	// Cold is the cold-path measurement, present in modes cold and both.
	Cold *Cold `json:"cold,omitempty"`
}

// Error says why an engine could not be measured.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
