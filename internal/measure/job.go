package measure

import "time"

// JobResult is what one execution of one fio job produced: its figures per
// data direction, or why it failed.
type JobResult struct {
	Workload   Workload      `json:"workload"`
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
func (r JobResult) OK() bool { return r.Failure == nil }

// Op holds the figures of one fio data direction (read, write) or of the
// sync (fsync) section. Latencies are in seconds; a latency fio did not
// report (no samples, missing percentile, nan) is NaN. In JSON, NaN and
// ±Inf are null, and null reads back as NaN.
type Op struct {
	IOs            int64   `json:"ios"`
	IOPS           float64 `json:"iops"`
	BandwidthBytes float64 `json:"bandwidth_bytes_per_second"`
	Bytes          int64   `json:"bytes"`
	LatencyMeanSec float64 `json:"latency_mean_seconds"`
	LatencyP50Sec  float64 `json:"latency_p50_seconds"`
	LatencyP99Sec  float64 `json:"latency_p99_seconds"`
	LatencyP999Sec float64 `json:"latency_p99_9_seconds"`
	// Histogram is fio's latency histogram of the op (completion latency
	// for read and write, fsync latency for sync), nil when fio printed
	// none (output other than json+, fio 2, no I/O).
	Histogram *Histogram `json:"latency_histogram,omitempty"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf figures (a latency
// fio did not report) are written as null.
func (o Op) MarshalJSON() ([]byte, error) { return marshalFigures(o) }

// UnmarshalJSON implements json.Unmarshaler: null figures read back as NaN,
// so a JobResult survives a JSON round trip. Absent fields keep their value.
func (o *Op) UnmarshalJSON(b []byte) error { return unmarshalFigures(b, o, false) }

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
	ReasonNoIO               Reason = "no_io"               // fio exited cleanly but measured no I/O
)

// Reasons is the whole set, in the order above (the API spec enumerates it).
var Reasons = []Reason{ReasonFioMissing, ReasonODirectUnsupported, ReasonNoSpace, ReasonTimeout,
	ReasonCanceled, ReasonFioError, ReasonCrashed, ReasonParse, ReasonExec, ReasonNoIO}

// Failure describes a failed job. A failed job is a recorded result, never a
// crash of the caller.
type Failure struct {
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
}

func (f *Failure) Error() string { return string(f.Reason) + ": " + f.Message }

// Sample is one execution of one job on one target: the raw material of
// every summary, kept so that anyone can recompute or audit them.
type Sample struct {
	Round int `json:"round"` // 1-based
	// Order is the position of this target in the round's random order,
	// 1-based.
	Order           int       `json:"order"`
	Target          Target    `json:"target"`
	StartedAt       time.Time `json:"started_at"`
	DurationSeconds float64   `json:"duration_seconds"`
	JobResult
}
