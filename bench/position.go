//go:build bench

package bench

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// meanSE is a mean with its standard error.
type meanSE struct {
	Mean, SE float64
	N        int
}

func meanSEOf(xs []float64) meanSE {
	if len(xs) < 2 {
		return meanSE{Mean: math.NaN(), SE: math.NaN(), N: len(xs)}
	}
	m, sd := stat.MeanStdDev(xs, nil)
	return meanSE{Mean: m, SE: sd / math.Sqrt(float64(len(xs))), N: len(xs)}
}

// orderSplit is the A/A pair split by which of host and bind ran first in
// a round: bind's overhead over host (ln, signed so that positive is
// slower) in the rounds bind ran first and in those host ran first. Shared
// says the runs were ones where host and bind measured one file.
type orderSplit struct {
	BindFirst, HostFirst meanSE
	Shared               bool
}

// orderSplitOf computes the split for workload over the rounds in which both
// host and bind measured, of those runs whose bind shared the host's file
// (shared) or had files of its own (!shared): the two cannot be pooled,
// since only a shared file is executed twice a round.
func orderSplitOf(runs []runDoc, workload string, shared bool) orderSplit {
	metric := headlineOf(workload)
	sign := 1.0
	if measure.MetricDirection(metric) == stats.HigherIsBetter {
		sign = -1
	}
	var bindFirst, hostFirst []float64
	for i := range runs {
		if runs[i].BindOwnFiles == shared {
			continue
		}
		type arm struct {
			order int
			v     float64
		}
		rounds := map[int]map[measure.Target]arm{}
		for _, s := range runs[i].samples(0) {
			if string(s.Workload) != workload || (s.Target != measure.TargetHost && s.Target != measure.TargetBind) {
				continue
			}
			v := measure.MetricValue(metric, s.JobResult)
			if !s.OK() || !(v > 0) || math.IsInf(v, 0) {
				continue
			}
			if rounds[s.Round] == nil {
				rounds[s.Round] = map[measure.Target]arm{}
			}
			rounds[s.Round][s.Target] = arm{s.Order, v}
		}
		for _, r := range rounds {
			h, okH := r[measure.TargetHost]
			b, okB := r[measure.TargetBind]
			if !okH || !okB || h.order == b.order {
				continue
			}
			d := sign * math.Log(b.v/h.v)
			if b.order < h.order {
				bindFirst = append(bindFirst, d)
			} else {
				hostFirst = append(hostFirst, d)
			}
		}
	}
	return orderSplit{BindFirst: meanSEOf(bindFirst), HostFirst: meanSEOf(hostFirst), Shared: shared}
}

// Arm is what separates the two arms whichever ran first: the mean of the
// two orders.
func (s orderSplit) Arm() meanSE {
	return meanSE{Mean: (s.BindFirst.Mean + s.HostFirst.Mean) / 2, SE: math.Hypot(s.BindFirst.SE, s.HostFirst.SE) / 2,
		N: s.BindFirst.N + s.HostFirst.N}
}

// Second is how much slower (positive) the second of the pair in a round
// reads than the first: half the difference of the two orders. On a shared
// file that is the file's second execution; it cancels between host and
// bind over balanced orders, but host, second half the time, sits Second/2
// slower than a file of its own would, and every target with files of its
// own reads Second/2 faster against it. With files of their own it is the
// position alone, which the balanced orders cancel for every target.
func (s orderSplit) Second() meanSE {
	return meanSE{Mean: (s.HostFirst.Mean - s.BindFirst.Mean) / 2, SE: math.Hypot(s.BindFirst.SE, s.HostFirst.SE) / 2,
		N: s.BindFirst.N + s.HostFirst.N}
}

// verdict says, for a systematic A/A offset, how much of it belongs to
// the arm and how much to the order within a round (on a shared file, the
// file's second execution), in a sentence for the report; "" when the
// rounds are too few to tell.
func (s orderSplit) verdict() string {
	if s.BindFirst.N < 10 || s.HostFirst.N < 10 || math.IsNaN(s.BindFirst.SE) || math.IsNaN(s.HostFirst.SE) {
		return ""
	}
	arm, second := s.Arm(), s.Second()
	where, later := "on their shared file", "the file's second execution in a round"
	if !s.Shared {
		where, later = "on files of their own", "running second in a round"
	}
	split := fmt.Sprintf("Split by which of the two ran first %s in a round, bind reads %s ± %.1f pp when it ran first "+
		"and %s ± %.1f pp when host did: %s ± %.1f pp between the arms whichever ran first, and %s "+
		"%s ± %.1f pp against the first, which cancels between bind and host over the balanced orders (section 3, the shared file)",
		where, signedPP(s.BindFirst.Mean), 100*s.BindFirst.SE, signedPP(s.HostFirst.Mean), 100*s.HostFirst.SE, signedPP(arm.Mean), 100*arm.SE,
		later, signedPP(second.Mean), 100*second.SE)
	if math.Abs(arm.Mean) > 2*arm.SE {
		files := ""
		if !s.Shared {
			files = " (and, with files of their own, where those lie: fsync keeps one file per target for a run)"
		}
		return split + ". So the offset belongs to the arm. What differs between the arms is fio started by `docker exec` inside " +
			"the probe container (its mount namespace, and on cgroup v1 its memory and block-I/O cgroups, which the host arm " +
			"does not join) against fio started natively" + files + "; which of these costs the offset, this run cannot tell."
	}
	return split + ". Between the arms themselves nothing stands out from the noise of these rounds."
}

// signedPP formats a log ratio as signed percentage points, one decimal.
func signedPP(x float64) string { return fmt.Sprintf("%+.1f", 100*x) }
