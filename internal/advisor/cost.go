package advisor

import (
	"math"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// timeMetric is the overhead metric that says how much longer a job's
// writes take: throughput for sequential writes, operations per second for
// random writes and the fsync job (whose operations include the fsyncs).
func timeMetric(w measure.Workload) string {
	if w == measure.SeqWrite {
		return measure.MetricBandwidth
	}
	return measure.MetricIOPS
}

// LayerVsVolume computes, per workload, the writable layer's slowdown relative
// to the named volume from measured rounds: the container target's samples
// paired round by round with the volume target's, exactly as every other
// overhead is paired with the host (Hodges-Lehmann estimate, exact
// signed-rank interval), so the interval is a real one, not two intervals
// combined. Jobs without a single valid pair are left out.
func LayerVsVolume(samples []measure.Sample, confidence float64) []api.LayerOverhead {
	var pairs []measure.Sample
	rate := map[measure.Workload]*struct{ bytes, ops, secs float64 }{}
	for _, s := range samples {
		switch s.Target {
		case measure.TargetVolume:
			s.Target = measure.TargetHost // the baseline of the pairing
			if s.OK() {
				r := rate[s.Workload]
				if r == nil {
					r = &struct{ bytes, ops, secs float64 }{}
					rate[s.Workload] = r
				}
				if secs := runtime(s.JobResult); secs > 0 {
					r.bytes += float64(s.Write.Bytes)
					r.ops += float64(s.Read.IOs + s.Write.IOs)
					r.secs += secs
				}
			}
		case measure.TargetContainer:
		default:
			continue
		}
		pairs = append(pairs, s)
	}
	var out []api.LayerOverhead
	for _, res := range measure.Summarize(pairs, confidence) {
		if res.Target != measure.TargetContainer {
			continue
		}
		m := timeMetric(res.Workload)
		o, ok := res.Overhead[m]
		r := rate[res.Workload]
		// A withheld interval (fewer rounds than a 95% one needs) gives
		// no cost range: the layer's cost waits for the rounds.
		if !ok || o.N == 0 || o.Withheld || r == nil || r.secs <= 0 || r.bytes <= 0 {
			continue
		}
		out = append(out, api.LayerOverhead{Workload: res.Workload, Metric: m,
			Slowdown: slowdown(o.Ratio), SlowdownLow: slowdown(o.CILow), SlowdownHigh: slowdown(o.CIHigh),
			Rounds: o.N, Coverage: o.Coverage, VolumeWriteBytesPerSecond: r.bytes / r.secs, VolumeOpsPerSecond: r.ops / r.secs})
	}
	return out
}

// runtime is how long a job ran, from its operations and their rate (fio's
// IOPS is operations over the measured runtime).
func runtime(r measure.JobResult) float64 {
	n := float64(r.Read.IOs + r.Write.IOs)
	iops := r.Read.IOPS + r.Write.IOPS
	if n <= 0 || !(iops > 0) || math.IsInf(iops, 0) {
		return 0
	}
	return n / iops
}

// slowdown turns a throughput overhead (1 - layer/volume: 0.2 = a fifth of
// the throughput lost) into extra time (volume/layer - 1: 0.25 = a quarter
// more time). The map is increasing, so an interval's ends map to the
// interval's ends.
func slowdown(o float64) float64 { return o / (1 - o) }

// costOf is the extra time writing bytes took in the layer rather than in
// a volume, for the job the container's writes are assumed to resemble;
// nil without a measured overhead for that job, or for less than
// minLanding bytes (nanoseconds of cost say nothing).
func costOf(bytes int64, job measure.Workload, overheads []api.LayerOverhead) *api.LayerCost {
	if bytes < minLanding {
		return nil
	}
	for _, o := range overheads {
		if o.Workload != job {
			continue
		}
		base := float64(bytes) / o.VolumeWriteBytesPerSecond
		return &api.LayerCost{Workload: job, Bytes: bytes, ExtraSeconds: base * o.Slowdown,
			Low: base * o.SlowdownLow, High: base * o.SlowdownHigh}
	}
	return nil
}
