//go:build bench

package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
)

// runDoc is one `layerprobe run --output json` as the benchmark keeps it:
// how it was started, what it cost and why it stopped, the headline
// estimates it reported, and every execution's figures. fio's latency
// histograms are left out: only the pooled raw figures use them, and they
// would make results.json a hundred times larger. The overheads do not
// depend on them (they are per-round ratios of per-execution figures), so
// every estimate can be recomputed from the executions.
type runDoc struct {
	// Binary is "new" (the binary under test) or "old" (OldRev).
	Binary string   `json:"binary"`
	Args   []string `json:"args"`   // after the binary's name
	Config string   `json:"config"` // the configuration file (YAML)
	Env    []string `json:"env,omitempty"`

	Version       string    `json:"layerprobe_version"`
	SchemaVersion int       `json:"schema_version"`
	Profile       string    `json:"profile"`
	StartedAt     time.Time `json:"started_at"`
	Seconds       float64   `json:"duration_seconds"`
	BytesWritten  int64     `json:"bytes_written"`
	LayoutBytes   int64     `json:"layout_bytes"`
	// Rounds is the number of rounds run: of all workloads together for the
	// adaptive method (a round runs one workload), of each workload for the earlier
	// one (a round ran every workload).
	Rounds     int    `json:"rounds"`
	StopReason string `json:"stop_reason,omitempty"`
	// Reported is the headline overhead the run reported, per
	// "target/workload".
	Reported   map[string]measure.Overhead `json:"reported"`
	Executions []execution                 `json:"executions"`
	// BindOwnFiles says bind measured files of its own. Runs recorded
	// before bind had them, and the old binary's, lack the field: there
	// host and bind measured one file, each once a round, and the
	// shared-file split (position.go) applies to them.
	BindOwnFiles bool `json:"bind_own_files,omitempty"`
}

// execution is one fio execution of a run, its figures in base units.
type execution struct {
	Round    int    `json:"r"`
	Order    int    `json:"o"`
	Target   string `json:"t"`
	Workload string `json:"j"`
	At       fnum   `json:"at"` // seconds from the run's start to the execution's
	Secs     fnum   `json:"s"`
	Bytes    int64  `json:"b"`
	// V holds the figures of measure.Metrics, in that order: IOPS,
	// bandwidth, write latency p50 and p99, fsync p99.
	V   []fnum `json:"v,omitempty"`
	Err string `json:"err,omitempty"` // the failure's reason
}

// fnum is a float64 that encodes NaN and ±Inf as null (and reads null back
// as NaN), with seven significant digits: far finer than any figure here
// is measured.
type fnum float64

func (f fnum) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', 7, 64), nil
}

func (f *fnum) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = fnum(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("number %s: %w", b, err)
	}
	*f = fnum(v)
	return nil
}

// docOf keeps what the benchmark needs of a run's document (one engine).
func docOf(binary string, args []string, config string, env []string, run *report.Run) *runDoc {
	d := &runDoc{Binary: binary, Args: args, Config: config, Env: env, Version: run.LayerprobeVersion,
		SchemaVersion: run.SchemaVersion, Profile: run.Profile, StartedAt: run.StartedAt, Seconds: run.DurationSeconds,
		BytesWritten: run.BytesWritten, Rounds: run.Rounds, Reported: map[string]measure.Overhead{},
		// The binary under test is this tree's: its probe lays out bind's
		// files apart from the host's (internal/probe).
		BindOwnFiles: binary == "new"}
	if len(run.Engines) == 0 {
		return d
	}
	e := run.Engines[0]
	d.LayoutBytes, d.StopReason = e.LayoutBytes, string(e.StopReason)
	if e.Rounds > 0 {
		d.Rounds = e.Rounds
	}
	for _, r := range e.Results {
		if o, ok := r.Overhead[measure.HeadlineMetric(r.Workload)]; ok {
			d.Reported[string(r.Target)+"/"+string(r.Workload)] = o
		}
	}
	for _, s := range e.Samples {
		x := execution{Round: s.Round, Order: s.Order, Target: string(s.Target), Workload: string(s.Workload),
			At: fnum(s.StartedAt.Sub(run.StartedAt).Seconds()), Secs: fnum(s.DurationSeconds), Bytes: s.BytesWritten}
		if s.OK() {
			for _, m := range measure.Metrics {
				x.V = append(x.V, fnum(measure.MetricValue(m, s.JobResult)))
			}
		} else {
			x.Err = string(s.Failure.Reason)
		}
		d.Executions = append(d.Executions, x)
	}
	return d
}

// samples turns the executions back into samples that measure.Summarize
// reads as the run did: every metric's value is the one the execution had.
// Executions of rounds above maxRound (0: none) are left out.
func (d *runDoc) samples(maxRound int) []measure.Sample {
	if d == nil {
		return nil
	}
	out := make([]measure.Sample, 0, len(d.Executions))
	for _, x := range d.Executions {
		if maxRound > 0 && x.Round > maxRound {
			continue
		}
		s := measure.Sample{Round: x.Round, Order: x.Order, Target: measure.Target(x.Target),
			StartedAt:       d.StartedAt.Add(time.Duration(float64(x.At) * float64(time.Second))),
			DurationSeconds: float64(x.Secs)}
		s.Workload, s.BytesWritten = measure.Workload(x.Workload), x.Bytes
		if x.Err != "" || len(x.V) != len(measure.Metrics) {
			s.Failure = &measure.Failure{Reason: measure.Reason(x.Err), Message: "as recorded"}
		} else {
			// MetricValue adds read and write throughput; all of it is
			// kept on the write side.
			s.Write = measure.Op{IOPS: float64(x.V[0]), BandwidthBytes: float64(x.V[1]),
				LatencyP50Sec: float64(x.V[2]), LatencyP99Sec: float64(x.V[3])}
			s.Sync = measure.Op{LatencyP99Sec: float64(x.V[4])}
		}
		out = append(out, s)
	}
	return out
}

// pairs returns the run's per-round headline pairs of every target with
// host, in round order.
func (d *runDoc) pairs() []roundObs {
	rs := roundsOf(0, d.samples(0))
	slices.SortStableFunc(rs, func(a, b roundObs) int { return a.Round - b.Round })
	return rs
}

// logRatios returns ln(target/host) of a workload's headline metric, round by
// round.
func (d *runDoc) logRatios(target, workload string) []float64 {
	var out []float64
	for _, o := range d.pairs() {
		if o.Target == target && o.Workload == workload {
			out = append(out, math.Log(o.Value/o.Host))
		}
	}
	return out
}

// reported returns the run's headline overhead of a target and workload, and
// whether it has one with an estimate.
func (d *runDoc) reported(target, workload string) (measure.Overhead, bool) {
	if d == nil {
		return measure.Overhead{}, false
	}
	o, ok := d.Reported[target+"/"+workload]
	return o, ok && !math.IsNaN(o.Ratio)
}
