// Package measuretest builds synthetic measurement samples for tests of
// the code that summarizes, stores, publishes and writes them.
package measuretest

import (
	"math"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Fig describes the figures of one synthetic sample.
type Fig struct {
	IOPS, Bandwidth float64 // split half read, half write, so that sums are checked
	P50, P99        float64 // write latency, seconds
	FsyncP99        float64 // sync latency, seconds
	// Failed, when set, makes the sample a failed job with this reason
	// and Detail as its message, and no figures.
	Failed measure.Reason
	Detail string
}

// Sample is one sample of the workload on target in round with the
// figures f; its start time is a fixed date plus round seconds.
func Sample(round int, target measure.Target, w measure.Workload, f Fig) measure.Sample {
	s := measure.Sample{
		Round: round, Order: 1, Target: target,
		StartedAt:       time.Date(2026, 11, 22, 3, 0, round, 0, time.UTC),
		DurationSeconds: 1.5,
		JobResult: measure.JobResult{
			Workload:   w,
			FioVersion: "fio-3.33",
			Read:       measure.Op{IOPS: f.IOPS / 2, BandwidthBytes: f.Bandwidth / 2, LatencyP50Sec: math.NaN(), LatencyP99Sec: math.NaN()},
			Write:      measure.Op{IOPS: f.IOPS / 2, BandwidthBytes: f.Bandwidth / 2, LatencyP50Sec: f.P50, LatencyP99Sec: f.P99},
			Sync:       measure.Op{LatencyP99Sec: f.FsyncP99},
		},
	}
	if f.Failed != "" {
		s.JobResult = measure.JobResult{Workload: w, Failure: &measure.Failure{Reason: f.Failed, Message: f.Detail}}
	}
	return s
}

// HostFig gives the host a very different load in every round, so that
// any pairing other than by round shows up in the ratios. Over rounds 1..8
// the scale is 3 5 2 4 1 3 5 2.
func HostFig(round int) Fig {
	scale := float64(1 + (round*7)%5) // 1..5, shuffled over rounds
	return Fig{IOPS: 1000 * scale, Bandwidth: 100e6 * scale, P50: 1e-3 / scale, P99: 4e-3 / scale, FsyncP99: 8e-3 / scale}
}

// Scaled is f with throughput times speed and latencies times slowdown.
func (f Fig) Scaled(speed, slowdown float64) Fig {
	return Fig{IOPS: f.IOPS * speed, Bandwidth: f.Bandwidth * speed, P50: f.P50 * slowdown, P99: f.P99 * slowdown, FsyncP99: f.FsyncP99 * slowdown}
}
