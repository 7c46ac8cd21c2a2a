// Package fio holds layerprobe's built-in fio workload profiles, builds fio
// command lines from them and parses fio's JSON output into results.
//
// No user input ever reaches a fio command line: profiles are compiled in and
// the only variable part of a command is the directory, which the caller
// derives from agent-owned paths.
package fio

import "time"

// Workload names one of the three measured workloads. The values are the
// `job` label of every metric and the `job` field of the JSON output.
type Workload string

// The workloads, in the order tables show them.
const (
	SeqWrite  Workload = "seqwrite"  // sequential 1 MiB writes
	RandWrite Workload = "randwrite" // 4 KiB random writes
	Fsync     Workload = "fsync"     // 4 KiB random read/write, fsync after every write
)

// Workloads lists every workload in display order.
var Workloads = []Workload{SeqWrite, RandWrite, Fsync}

// Profile is a fixed, built-in set of fio jobs plus how many rounds a
// `layerprobe run` makes by default.
type Profile struct {
	Name          string
	Description   string
	DefaultRounds int
	Jobs          []Job
}

// Job is one built-in fio job of a profile.
type Job struct {
	Workload Workload
	// Options are fio command-line options (without the leading "--") that
	// define the job, e.g. "rw=randwrite". They never contain filename,
	// directory, output or exec options: the builder adds those.
	Options []string
	// FileBytes is the size of the file(s) the job lays out on the target:
	// the free-space check needs at least this much (plus a margin).
	FileBytes int64
	// Timeout bounds one execution of the job, including layout.
	Timeout time.Duration
}

// Op holds the figures of one fio data direction (read, write) or of the
// sync (fsync) section. Latencies are in seconds; a latency fio did not
// report (no samples, missing percentile, nan) is NaN. Op's JSON form
// (jsonfloat.go) writes NaN and ±Inf as null and reads null back as NaN.
type Op struct {
	IOs            int64   `json:"ios"`
	IOPS           float64 `json:"iops"`
	BandwidthBytes float64 `json:"bandwidth_bytes_per_second"`
	Bytes          int64   `json:"bytes"`
	LatencyMeanSec float64 `json:"latency_mean_seconds"`
	LatencyP50Sec  float64 `json:"latency_p50_seconds"`
	LatencyP99Sec  float64 `json:"latency_p99_seconds"`
	LatencyP999Sec float64 `json:"latency_p99_9_seconds"`
}

// Reason classifies why a job failed. The set is small and fixed because it
// becomes a metric label value.
type Reason string

// Failure reasons.
const (
	ReasonFioMissing         Reason = "fio_missing"         // binary not found / not executable
	ReasonODirectUnsupported Reason = "odirect_unsupported" // EINVAL on O_DIRECT open or first direct I/O
	ReasonNoSpace            Reason = "no_space"            // ENOSPC / EDQUOT, or the free-space check refused
	ReasonTimeout            Reason = "timeout"             // job exceeded its timeout and was killed
	ReasonCanceled           Reason = "canceled"            // the caller stopped the run (SIGTERM, ctx canceled)
	ReasonFioError           Reason = "fio_error"           // any other error reported by fio
	ReasonCrashed            Reason = "crashed"             // fio died from a signal / exited without JSON
	ReasonParse              Reason = "parse_error"         // output could not be parsed
	ReasonExec               Reason = "exec_error"          // the job could not be started (engine exec failed, ...)
)

// Failure describes a failed job. A failed job is a recorded result, never a
// crash of the caller.
type Failure struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
}

func (f *Failure) Error() string { return string(f.Reason) + ": " + f.Message }

// Result is what one execution of a job produced.
type Result struct {
	Workload   Workload      `json:"job"`
	FioVersion string        `json:"fio_version,omitempty"`
	Read       Op            `json:"read"`
	Write      Op            `json:"write"`
	Sync       Op            `json:"sync"`
	Runtime    time.Duration `json:"-"`
	// BytesWritten is what the job wrote to the target: the data fio
	// wrote plus the file layout fio performs before a job that reads.
	BytesWritten int64    `json:"bytes_written"`
	Failure      *Failure `json:"error,omitempty"`
}

// OK reports whether the job succeeded.
func (r Result) OK() bool { return r.Failure == nil }
