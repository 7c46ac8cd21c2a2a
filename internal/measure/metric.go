package measure

import (
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// Metric names: keys of Result.Overhead, and the `metric` label of the
// layerprobe_overhead_* series.
const (
	MetricIOPS       = "iops"        // read + write IOPS
	MetricBandwidth  = "bandwidth"   // read + write bytes per second
	MetricLatencyP50 = "latency_p50" // write completion latency, median
	MetricLatencyP99 = "latency_p99" // write completion latency, 99th percentile
	MetricFsyncP99   = "fsync_p99"   // fsync latency, 99th percentile (fsync job only)
)

// Metrics lists every metric in display order.
var Metrics = []string{MetricIOPS, MetricBandwidth, MetricLatencyP50, MetricLatencyP99, MetricFsyncP99}

// MetricsFor returns the metrics that apply to a workload: fsync_p99 only
// means something for the fsync job, whose every write is followed by an
// fsync.
func MetricsFor(w Workload) []string {
	if w == Fsync {
		return slices.Clone(Metrics)
	}
	return []string{MetricIOPS, MetricBandwidth, MetricLatencyP50, MetricLatencyP99}
}

// MetricDirection says whether a higher value of metric is better
// (throughput) or worse (latency). It panics on an unknown metric name,
// which is a programming error.
func MetricDirection(metric string) stats.Direction {
	switch metric {
	case MetricIOPS, MetricBandwidth:
		return stats.HigherIsBetter
	case MetricLatencyP50, MetricLatencyP99, MetricFsyncP99:
		return stats.LowerIsBetter
	}
	panic("measure: unknown metric " + metric)
}

// HeadlineMetric is the metric the table's "% of host" column shows for a
// workload: what a user of that workload cares about most. Sequential
// writes are about throughput, random writes about IOPS, fsync about the
// tail latency of the flush itself, small files about file operations per
// second.
func HeadlineMetric(w Workload) string {
	switch w {
	case SeqWrite:
		return MetricBandwidth
	case RandWrite:
		return MetricIOPS
	case Fsync:
		return MetricFsyncP99
	case SmallFiles:
		return MetricIOPS // file operations per second
	}
	return MetricIOPS
}

// MetricValue extracts metric from one job's result, in base units (IOPS,
// bytes per second, seconds). It returns NaN when the value does not exist:
// a failed job, a latency fio did not report, fsync_p99 of a job other
// than fsync, or an unknown metric name.
func MetricValue(metric string, r JobResult) float64 {
	if !r.OK() {
		return math.NaN()
	}
	switch metric {
	case MetricIOPS:
		return r.Read.IOPS + r.Write.IOPS
	case MetricBandwidth:
		return r.Read.BandwidthBytes + r.Write.BandwidthBytes
	case MetricLatencyP50:
		return r.Write.LatencyP50Sec
	case MetricLatencyP99:
		return r.Write.LatencyP99Sec
	case MetricFsyncP99:
		if r.Workload == Fsync {
			return r.Sync.LatencyP99Sec
		}
	}
	return math.NaN()
}
