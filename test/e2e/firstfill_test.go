package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// firstFillConfig is the default configuration but for the busy-host
// guard, which the tests' own load on this machine would trip, and the
// cold probe, which this test leaves out.
const firstFillConfig = `agent:
  cold_interval: 0s
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s`

// TestAgentFirstCycleShowsIntervals: a default agent (the quick profile,
// the default budget and first fill) shows an interval for every steady
// workload and target after its first cycle, which fills the empty window
// to 6 rounds of every job; the time to that interval is within the first
// fill's time ceiling (plus the first cycle's delay and what preparing
// the probe container and laying out the job files take, which the
// ceiling does not bound), whatever the disk's speed; and the cycle
// wrote no more than the first fill's byte ceiling.
func TestAgentFirstCycleShowsIntervals(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, firstFillConfig)
	start := time.Now()
	a := s.start(t)
	def := config.Default().Agent.FirstFill
	const preparation = 2 * time.Minute // probe image and job files: outside the ceiling
	limit := 5*time.Second + def.MaxDuration + preparation

	var ov api.OverheadResponse
	var elapsed time.Duration
	for {
		a.getJSON(t, "/api/v1/overhead", &ov)
		if missing := withoutInterval(ov); len(ov.Engines) > 0 && len(ov.Engines[0].Results) > 0 && len(missing) == 0 {
			elapsed = time.Since(start)
			break
		} else if time.Since(start) > limit {
			t.Fatalf("no interval for %v %s after the start (the first fill's ceiling %s, the first cycle's delay and %s of preparation); cycles %+v",
				missing, time.Since(start).Round(time.Second), def.MaxDuration, preparation, a.cycles(t))
		}
		select {
		case <-a.Done():
			t.Fatal("agent exited")
		case <-time.After(time.Second):
		}
	}
	cs := a.cycles(t)
	first := cs[len(cs)-1]
	t.Logf("time to the first interval of every steady workload: %s (first cycle %d: %s, %d rounds, %d MiB, stopped by %s)",
		elapsed.Round(time.Second), first.ID, time.Duration(first.DurationSeconds*float64(time.Second)).Round(time.Second),
		first.Rounds, first.BytesWritten>>20, first.StopReason)
	if len(cs) != 1 || first.Result != "ok" || first.BytesWritten > int64(def.MaxBytes) {
		t.Errorf("cycles %+v; want one, ok, within the first fill's %s", cs, def.MaxBytes)
	}
	if ov.Engines[0].IntervalRounds != 6 || ov.Engines[0].NextCycleAt == nil {
		t.Errorf("overhead entry: interval_rounds %d, next_cycle_at %v", ov.Engines[0].IntervalRounds, ov.Engines[0].NextCycleAt)
	}
	if res := layerprobe(t, s.host, time.Minute, "overhead", "--url", a.base); res.code != 0 || strings.Contains(res.stdout, "[no interval]") ||
		strings.Contains(res.stdout, "no interval yet") {
		t.Errorf("layerprobe overhead after the first cycle (exit %d): want every interval:\n%s%s", res.code, res.stdout, res.stderr)
	}
	a.stop()
}

// withoutInterval lists the steady results, target/workload, whose
// headline overhead has no interval yet.
func withoutInterval(ov api.OverheadResponse) []string {
	var out []string
	for _, e := range ov.Engines {
		if e.Mode != measure.ModeSteady {
			continue
		}
		for _, r := range e.Results {
			if r.Target == measure.TargetHost {
				continue
			}
			if o, ok := r.Overhead[measure.HeadlineMetric(r.Workload)]; !ok || o.Withheld || o.N < e.IntervalRounds {
				out = append(out, string(r.Target)+"/"+string(r.Workload))
			}
		}
	}
	return out
}
