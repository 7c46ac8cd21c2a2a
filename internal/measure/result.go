package measure

// Result summarizes one target and workload over all rounds.
type Result struct {
	Target       Target   `json:"target"`
	Workload     Workload `json:"workload"`
	RoundsOK     int      `json:"rounds_ok"`
	RoundsFailed int      `json:"rounds_failed"`
	// Raw holds the target's own figures over its successful rounds.
	Raw Raw `json:"raw"`
	// Overhead relative to host, by metric name (the Metric* constants).
	// Absent for the host target itself.
	Overhead map[string]Overhead `json:"overhead,omitempty"`
	Failures []FailedRound       `json:"failures,omitempty"`
}

// Raw holds a target's own figures over its successful rounds, in base
// units: throughput over their measured time together, latency percentiles
// of their latency samples pooled (where fio gave no histogram, the median
// of the rounds' own). NaN (null in JSON) means not applicable or not
// measured.
type Raw struct {
	IOPS           float64 `json:"iops"`                       // read + write
	BandwidthBytes float64 `json:"bandwidth_bytes_per_second"` // read + write
	LatencyP50     float64 `json:"latency_p50_seconds"`        // write completion latency
	LatencyP99     float64 `json:"latency_p99_seconds"`        // write completion latency
	FsyncP99       float64 `json:"fsync_p99_seconds"`          // fsync job only
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (r Raw) MarshalJSON() ([]byte, error) { return marshalFigures(r) }

// UnmarshalJSON implements json.Unmarshaler: null and absent figures read
// as NaN, so that a missing figure can never pass for a measured zero.
func (r *Raw) UnmarshalJSON(b []byte) error { return unmarshalFigures(b, r, true) }

// Overhead is the paired overhead of a target relative to host for one
// metric: the Hodges–Lehmann estimate of the per-round log ratios with its
// exact signed-rank interval (see stats.PairedOverhead for the
// definitions).
type Overhead struct {
	Ratio         float64 `json:"ratio"` // 0.08 = 8% slower than host; negative = faster
	CILow         float64 `json:"ci_low"`
	CIHigh        float64 `json:"ci_high"`
	PercentOfHost float64 `json:"percent_of_host"` // speed as % of host's: 92 = "92% of host"
	PercentLow    float64 `json:"percent_of_host_low"`
	PercentHigh   float64 `json:"percent_of_host_high"`
	N             int     `json:"rounds"`   // round pairs used
	Coverage      float64 `json:"coverage"` // achieved coverage of the interval
	// Withheld says the interval's bounds were dropped (NaN, null in
	// JSON) because its exact coverage is below the confidence asked for:
	// fewer round pairs than such an interval needs (6 for 95%). Coverage
	// is still what the range of the rounds would have covered.
	Withheld bool `json:"interval_withheld,omitempty"`
}

// HalfWidth is half the interval's width in ratio units (0.03 = 3
// percentage points); NaN without an interval.
func (o Overhead) HalfWidth() float64 { return (o.CIHigh - o.CILow) / 2 }

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (o Overhead) MarshalJSON() ([]byte, error) { return marshalFigures(o) }

// UnmarshalJSON implements json.Unmarshaler: null and absent figures read
// as NaN.
func (o *Overhead) UnmarshalJSON(b []byte) error { return unmarshalFigures(b, o, true) }

// FailedRound is one failed round of a target and workload.
type FailedRound struct {
	Round   int    `json:"round"`
	Reason  Reason `json:"reason"`
	Message string `json:"message"`
}
