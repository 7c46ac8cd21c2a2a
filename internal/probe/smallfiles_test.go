package probe

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine/enginetest"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestMeasureSmallFiles: a helper job runs on every target in every round
// like a fio job, with the helper's verb in the container, nothing to lay
// out, and its figures summarized with an overhead against host.
func TestMeasureSmallFiles(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetSlowdown(measure.TargetContainer, 1.5)
	job := fio.Job{Workload: measure.SmallFiles, Files: 100, Timeout: time.Minute}
	prof := fio.Profile{Name: "sf", Steady: true, MinRounds: 6, Jobs: []fio.Job{job}}
	out := s.Measure(context.Background(), prof, Plan{Rounds: 6}, 1, rand.New(rand.NewPCG(3, 4)), nil)
	if len(out.Samples) != 6*4 || out.Stop != measure.StopRounds {
		t.Fatalf("%d samples, stop %s; want 24, rounds", len(out.Samples), out.Stop)
	}
	for _, sm := range out.Samples {
		if !sm.OK() || sm.Workload != measure.SmallFiles || sm.BytesWritten <= 0 {
			t.Errorf("%s round %d: %+v", sm.Target, sm.Round, sm.JobResult)
		}
	}
	jobs := eng.Jobs()
	if len(jobs) != 6*3 || slices.ContainsFunc(jobs, func(j enginetest.Job) bool { return j.Layout || j.Workload != measure.SmallFiles }) {
		t.Errorf("container jobs %+v: want 18 smallfiles executions and no layout", jobs)
	}
	for _, r := range measure.Summarize(out.Samples, measure.DefaultConfidence) {
		if r.Target != measure.TargetContainer {
			continue
		}
		o := r.Overhead[measure.HeadlineMetric(measure.SmallFiles)]
		if !(o.PercentOfHost > 60 && o.PercentOfHost < 70) {
			t.Errorf("container smallfiles at %.1f%% of host, want 1/1.5", o.PercentOfHost)
		}
	}
}
