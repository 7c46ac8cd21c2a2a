package e2e

import (
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

const coldRounds = 6 // the fewest rounds with a full-coverage 95% interval

// `layerprobe run --mode cold` on overlay2 over ext4, on btrfs and on
// overlay2 over xfs with reflink: cold fsync and copy-up figures are
// present and finite, copy-up latency grows with the file size where
// overlay2 copies whole files (ext4 cannot share extents), btrfs and xfs
// report reflink, and nothing is left behind.
func TestColdRunOnOverlay2AndBtrfs(t *testing.T) {
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
	cases := []struct {
		name        string
		opts        testdaemon.Options
		driver      string
		wantReflink bool
	}{
		{"overlay2", testdaemon.Options{Driver: "overlay2"}, "overlay2", false},
		{"btrfs", testdaemon.Options{Driver: "btrfs", Backing: "btrfs", SizeMiB: 4096}, "btrfs", true},
		// overlay2 copies up by cloning on a reflink file system.
		{"overlay2-xfs", testdaemon.Options{Driver: "overlay2", Backing: "xfs", SizeMiB: 2048}, "overlay2", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testdaemon.Start(t, c.opts)
			// Start-up cost has a test of its own (startup_test.go).
			res := layerprobe(t, d.Host, 10*time.Minute, "run", "--mode", "cold", "--output", "json",
				"--rounds", "6", "--startup-images=", "--log.level", "warn")
			if res.code != 0 {
				t.Fatalf("layerprobe run --mode cold exited %d\nstderr:\n%s", res.code, res.stderr)
			}
			var run report.Run
			if err := json.Unmarshal([]byte(res.stdout), &run); err != nil {
				t.Fatalf("decode output: %v\n%s", err, res.stdout)
			}
			if run.Mode != measure.ModeCold || len(run.Engines) != 1 {
				t.Fatalf("mode %q, %d engines; want cold, 1", run.Mode, len(run.Engines))
			}
			e := run.Engines[0]
			if e.Error != nil || e.Driver != c.driver {
				t.Fatalf("engine: driver %q, error %+v", e.Driver, e.Error)
			}
			if len(e.Samples) != 0 || len(e.Results) != 0 {
				t.Errorf("--mode cold ran %d steady samples", len(e.Samples))
			}
			if e.Cold == nil {
				t.Fatal("no cold section in the output")
			}
			checkCold(t, e.Cold, c.wantReflink)
			checkLookup(t, c.name, e.Cold.Lookup, 6)
			if c.driver == "overlay2" && !c.wantReflink {
				checkCopyUpGrows(t, e.Cold.CopyUp)
			}
			if e.BytesWritten <= 0 {
				t.Errorf("bytes written %d; the cold probe writes", e.BytesWritten)
			}
			sizes := e.Cold.CopyUp.Sizes
			t.Logf("%s cold: fsync p99 overhead %s; copy-up extra 1 MiB %.2f ms, 64 MiB %.2f ms, cost %s per MiB; %.0f s, %d MiB written",
				c.name, fmtRatio(e.Cold.Results), 1e3*sizes[0].ExtraSeconds, 1e3*sizes[len(sizes)-1].ExtraSeconds,
				fmtCost(e.Cold.CopyUp.CostSecondsPerMiB), run.DurationSeconds, run.BytesWritten>>20)
			checkNothingLeft(t, d)
		})
	}
}

func fmtRatio(rs []measure.Result) string {
	for _, r := range rs {
		if r.Target == measure.TargetContainer {
			o := r.Overhead[measure.MetricFsyncP99]
			return formatFloat(o.Ratio) + " [" + formatFloat(o.CILow) + ", " + formatFloat(o.CIHigh) + "]"
		}
	}
	return "-"
}

func fmtCost(c *float64) string {
	if c == nil {
		return "-"
	}
	return formatFloat(*c*1e3) + " ms"
}

func formatFloat(v float64) string {
	b, _ := json.Marshal(math.Round(v*1000) / 1000)
	return string(b)
}

// checkCold: every cold round measured host and container, the fsync
// overhead has a finite interval, every copy-up size has finite positive
// latencies on both sides, and the reflink answer matches the file system.
func checkCold(t *testing.T, c *report.Cold, wantReflink bool) {
	t.Helper()
	byTarget := map[measure.Target]measure.Result{}
	for _, r := range c.Results {
		if r.Workload != "fsync" {
			t.Errorf("cold result for workload %s; the cold probe runs fsync only", r.Workload)
		}
		byTarget[r.Target] = r
	}
	for _, tg := range []measure.Target{measure.TargetHost, measure.TargetContainer} {
		r, ok := byTarget[tg]
		if !ok || r.RoundsOK != coldRounds || r.RoundsFailed != 0 {
			t.Errorf("cold %s: present %v, %d ok, %d failed; want %d ok", tg, ok, r.RoundsOK, r.RoundsFailed, coldRounds)
		}
	}
	if len(byTarget) != 2 {
		t.Errorf("cold targets %v, want host and container", byTarget)
	}
	o, ok := byTarget[measure.TargetContainer].Overhead[measure.MetricFsyncP99]
	if !ok || o.N != coldRounds || !finite(o.Ratio, o.CILow, o.CIHigh) || o.CILow > o.Ratio || o.CIHigh < o.Ratio {
		t.Errorf("cold container fsync_p99 overhead %+v; want %d rounds and a finite interval around the ratio", o, coldRounds)
	}
	// Each round ran the container arm right after its container started:
	// one container sample per round, orders 1 or 2.
	rounds := map[int]int{}
	for _, s := range c.Samples {
		rounds[s.Round]++
		if !s.OK() || s.Order < 1 || s.Order > 2 {
			t.Errorf("cold sample round %d %s: ok %v, order %d", s.Round, s.Target, s.OK(), s.Order)
		}
	}
	if len(rounds) != coldRounds {
		t.Errorf("cold rounds %v, want %d with two samples each", rounds, coldRounds)
	}

	cu := c.CopyUp
	if cu.Reflink == nil || *cu.Reflink != wantReflink {
		t.Errorf("reflink = %v, want %v", cu.Reflink, wantReflink)
	}
	var sizes []int64
	for _, s := range cu.Sizes {
		sizes = append(sizes, s.SizeBytes)
		if s.Rounds != coldRounds || !finite(s.HostSeconds, s.ContainerSeconds, s.ExtraSeconds, s.ExtraCILow, s.ExtraCIHigh) ||
			!(s.HostSeconds > 0) || !(s.ContainerSeconds > 0) {
			t.Errorf("copy-up %d bytes: %+v; want %d rounds and finite positive latencies", s.SizeBytes, s, coldRounds)
		}
	}
	if want := []int64{1 << 20, 16 << 20, 64 << 20}; !slices.Equal(sizes, want) {
		t.Errorf("copy-up sizes %v, want %v", sizes, want)
	}
	if cu.CostSecondsPerMiB == nil || !finite(*cu.CostSecondsPerMiB) {
		t.Errorf("copy-up cost per MiB = %v, want a finite figure", cu.CostSecondsPerMiB)
	}
	for _, s := range cu.Samples {
		if s.Error != "" {
			t.Errorf("copy-up sample round %d %s %d: %s", s.Round, s.Target, s.SizeBytes, s.Error)
		}
	}
	if want := coldRounds * 3 * 2; len(cu.Samples) != want {
		t.Errorf("%d copy-up samples, want %d", len(cu.Samples), want)
	}
}

// checkCopyUpGrows: on overlay2 over ext4 the first write to a 64 MiB file
// copies 64 times the bytes of a 1 MiB one. The test runs beside other
// parallel tests whose fio shares the disk, so it asserts on robust
// figures only: the median extra latency and the Theil-Sen slope, which a
// stalled fsync in one or two of the six rounds cannot move. (Comparing
// interval ends did: with six rounds they are the smallest and largest
// of the six.) Without a copy-up the slope is about zero: 0.005 ms per MiB
// measured on btrfs and on overlay2 over xfs, which clone; copying on ext4
// costs 2.5 ms per MiB on a quiet disk and more on a busy one. The bound,
// 0.25 ms per MiB, sits a decade from both.
func checkCopyUpGrows(t *testing.T, cu measure.CopyUp) {
	t.Helper()
	if len(cu.Sizes) != 3 {
		return // checkCold reported it
	}
	small, big := cu.Sizes[0], cu.Sizes[2]
	if !(big.ExtraSeconds > small.ExtraSeconds) {
		t.Errorf("median extra first-write latency does not grow with the file size: 1 MiB %v s, 64 MiB %v s",
			small.ExtraSeconds, big.ExtraSeconds)
	}
	const minCost = 0.25e-3 // seconds per MiB
	if cu.CostSecondsPerMiB == nil || !(*cu.CostSecondsPerMiB > minCost) {
		t.Errorf("copy-up cost %s per MiB; copying whole files costs more than %v ms", fmtCost(cu.CostSecondsPerMiB), minCost*1e3)
	}
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// coldAgentConfig: agentConfig with the cold probe on; its first scheduled
// cold cycle would come a minute after start, the test triggers one.
var coldAgentConfig = strings.Replace(agentConfig, "cold_interval: 0s", "cold_interval: 1h\n  cold_rounds: 3\n  startup_images: [10MiB, 20MiB]", 1)

// The agent runs a cold cycle on POST /api/v1/cycles?mode=cold, records
// it with mode cold, serves its figures with mode="cold" in /metrics and
// /api/v1/overhead?mode=cold, keeps steady series apart, and leaves no
// fresh container behind. The cold window is empty, so that first cold
// cycle makes the rounds the first cold interval needs (coldRounds, the
// first fill), not agent.cold_rounds (3): the cold interval, of the
// lookups too, is there after it.
func TestAgentColdCycle(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, coldAgentConfig)
	a := s.start(t, "LAYERPROBE_TEST_FIRST_CYCLE_DELAY=1h")

	if code, body := a.do(t, "POST", "/api/v1/cycles?mode=lukewarm", s.token); code != 400 {
		t.Fatalf("mode=lukewarm: %d %v, want 400", code, body)
	}
	if code, body := a.do(t, "POST", "/api/v1/cycles?mode=cold", s.token); code != 202 {
		t.Fatalf("mode=cold: %d %v, want 202", code, body)
	}
	cs := a.waitCycles(t, "ok", 1, 4*time.Minute)
	if len(cs) != 1 || cs[0].Mode != "cold" || cs[0].Rounds != coldRounds {
		t.Fatalf("cycles after a cold trigger: %+v; want one cold cycle of %d rounds (the first fill of the empty cold window)", cs, coldRounds)
	}

	// A round's execution may fail on a loaded disk (a recorded result:
	// a timeout, no fsync in the window), and a round without its fsync
	// pair leaves fewer than an exact interval needs: then the interval
	// must be withheld, the estimate still there. Most rounds must pair.
	pairs := coldFsyncPairs(t, a, cs[0].ID)
	if pairs < coldRounds/2 {
		t.Errorf("%d of %d cold rounds have an fsync pair", pairs, coldRounds)
	}
	coldCI := map[string]string{"mode": "cold", "target": "container", "workload": "fsync", "metric": "fsync_p99"}
	_, series := a.scrape(t)
	if pairs < coldRounds {
		for _, name := range []string{"layerprobe_overhead_ci_low_ratio", "layerprobe_overhead_ci_high_ratio"} {
			if v, ok := series.Find(name, coldCI); ok {
				t.Errorf("%s%v = %v from %d fsync pairs, fewer than an exact interval needs (%d)", name, coldCI, v, pairs, coldRounds)
			}
		}
	}
	type query struct {
		name   string
		labels map[string]string
	}
	var ci []query
	if pairs == coldRounds {
		ci = []query{{"layerprobe_overhead_ci_low_ratio", coldCI}, {"layerprobe_overhead_ci_high_ratio", coldCI}}
	}
	for _, q := range append(ci, []query{
		{"layerprobe_cycles_total", map[string]string{"mode": "cold", "result": "ok"}},
		{"layerprobe_overhead_ratio", coldCI},
		{"layerprobe_lookup_extra_ci_low_seconds", map[string]string{"driver": "overlay2", "lookup": "walk"}},
		{"layerprobe_latency_seconds", map[string]string{"mode": "cold", "target": "host", "workload": "fsync", "op": "sync", "percentile": "99"}},
		{"layerprobe_copyup_latency_seconds", map[string]string{"target": "container", "size_bytes": "67108864"}},
		{"layerprobe_copyup_latency_seconds", map[string]string{"target": "host", "size_bytes": "1048576"}},
		{"layerprobe_copyup_cost_seconds_per_byte", map[string]string{"driver": "overlay2"}},
		{"layerprobe_backing_fs_reflink", map[string]string{"backing_fs": "extfs"}},
		{"layerprobe_startup_seconds", map[string]string{"driver": "overlay2", "image_bytes": "10485760"}},
		{"layerprobe_startup_device_written_bytes", map[string]string{"driver": "overlay2", "image_bytes": "20971520"}},
		{"layerprobe_startup_written_bytes_per_image_byte", map[string]string{"driver": "overlay2"}},
		{"layerprobe_last_success_timestamp_seconds", map[string]string{"mode": "cold"}},
		{"layerprobe_lookup_seconds", map[string]string{"driver": "overlay2", "lookup": "walk", "target": "container"}},
		{"layerprobe_lookup_seconds", map[string]string{"driver": "overlay2", "lookup": "dir_create", "target": "host"}},
		{"layerprobe_lookup_extra_seconds", map[string]string{"driver": "overlay2", "lookup": "walk"}},
		{"layerprobe_lookup_extra_seconds", map[string]string{"driver": "overlay2", "lookup": "dir_create"}},
	}...) {
		v, ok := series.Find(q.name, q.labels)
		if !ok || !finite(v) {
			t.Errorf("%s%v: present %v, value %v", q.name, q.labels, ok, v)
		}
	}
	if v, _ := series.Find("layerprobe_cycles_total", map[string]string{"mode": "cold", "result": "ok"}); v != 1 {
		t.Errorf("cold ok cycles = %v, want 1", v)
	}
	if v, _ := series.Find("layerprobe_cycles_total", map[string]string{"mode": "steady", "result": "ok"}); v != 0 {
		t.Errorf("steady ok cycles = %v after a cold cycle only, want 0", v)
	}
	if _, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"mode": "steady"}); ok {
		t.Error("steady overhead series exist though no steady cycle ran")
	}
	if v, _ := series.Find("layerprobe_backing_fs_reflink", nil); v != 0 {
		t.Errorf("reflink on ext4 = %v, want 0", v)
	}

	var ov api.OverheadResponse
	a.getJSON(t, "/api/v1/overhead?mode=cold", &ov)
	if len(ov.Engines) != 1 || ov.Engines[0].Mode != "cold" || ov.Engines[0].CopyUp == nil {
		t.Fatalf("overhead?mode=cold: %+v", ov.Engines)
	}
	if n := len(ov.Engines[0].CopyUp.Sizes); n != 3 {
		t.Errorf("overhead?mode=cold copy_up sizes: %d, want 3", n)
	}
	if l := ov.Engines[0].Lookup; l == nil || len(l.Summaries) != 2 || l.Summaries[0].Rounds != coldRounds || l.Summaries[0].Withheld {
		t.Errorf("overhead?mode=cold lookup: %+v; want walk and dir_create over %d rounds, with intervals", l, coldRounds)
	}
	var steady api.OverheadResponse // fresh: Unmarshal keeps fields the JSON lacks
	a.getJSON(t, "/api/v1/overhead?mode=steady", &steady)
	if len(steady.Engines) != 1 || steady.Engines[0].Mode != "steady" || steady.Engines[0].CopyUp != nil ||
		len(steady.Engines[0].Results) != 0 || steady.Engines[0].LastCycleID != 0 {
		t.Errorf("overhead?mode=steady after a cold cycle only: %+v", steady.Engines)
	}
	var detail api.CycleDetail
	a.getJSON(t, "/api/v1/cycles/"+strconv.FormatInt(cs[0].ID, 10), &detail)
	if detail.CopyUp == nil || len(detail.CopyUp.Samples) != coldRounds*3*2 || len(detail.Samples) != coldRounds*2 {
		t.Errorf("cycle detail: copy_up %v, %d fio samples; want %d copy-up and %d fio samples", detail.CopyUp != nil, len(detail.Samples), coldRounds*3*2, coldRounds*2)
	}
	if detail.Lookup == nil || len(detail.Lookup.Samples) < coldRounds*2*2 {
		t.Errorf("cycle detail: lookup %+v; want a walk and creates on both targets in each of %d rounds", detail.Lookup, coldRounds)
	}

	// Only the long-lived probe remains while the agent runs: every fresh
	// container of the cold rounds is gone.
	l := newAPI(d.Host).labelled(t)
	if len(l.Containers) != 1 {
		t.Errorf("containers while the agent runs: %v; want only the steady probe", l.Containers)
	}
	if code, _ := a.stop(); code != 0 {
		t.Errorf("agent exited %d", code)
	}
	if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) != 0 {
		t.Errorf("left behind after the agent stopped: %+v", l)
	}
	checkNoScratchFiles(t, d.DataRoot)
}

// A run killed while a fresh cold container exists leaves it behind; the
// next run's startup sweep removes it (the owner is dead), and that run
// leaves nothing either.
func TestKilledColdRunIsSweptByTheNext(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	dapi := newAPI(d.Host)
	coldContainers := func() []string {
		filter := url.QueryEscape(`{"label":["io.layerprobe.mode=cold"]}`)
		var cs []struct{ Names []string }
		dapi.get(t, "/containers/json?all=1&filters="+filter, &cs)
		var out []string
		for _, c := range cs {
			out = append(out, c.Names...)
		}
		return out
	}
	run := startLayerprobe(t, d.Host, "run", "--mode", "cold", "--rounds", "100", "--log.level", "warn")
	deadline := time.Now().Add(3 * time.Minute)
	for len(coldContainers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no fresh cold container appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	run.Kill()
	left := coldContainers()
	if len(left) == 0 {
		t.Skip("the cold container was removed between the check and the kill; nothing to sweep")
	}

	// One small start-up image: its image must go with the rest.
	res := layerprobe(t, d.Host, 5*time.Minute, "run", "--mode", "cold", "--rounds", "2", "--profile", "smoke",
		"--startup-images", "10MiB", "--log.level", "warn")
	if res.code != 0 {
		t.Fatalf("next run exited %d: %s", res.code, res.stderr)
	}
	if l := dapi.labelled(t); !l.Empty() {
		t.Errorf("left after the next run (killed run left %v): %+v", left, l)
	}
	if pids := fioUnder(d.DataRoot); len(pids) > 0 {
		t.Errorf("fio processes still running under %s: %v", d.DataRoot, pids)
	}
}

// Cold cycles spend the same daily budget: with room for a steady smoke
// cycle but not for the copy-up files, a cold trigger is skipped before
// any container starts, and counted under mode="cold".
func TestColdCycleRespectsTheBudget(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	cfg := strings.Replace(coldAgentConfig, "daily_byte_budget: 0", "daily_byte_budget: 64MiB", 1)
	s := newAgentSetup(t, d.Host, cfg)
	a := s.start(t, "LAYERPROBE_TEST_FIRST_CYCLE_DELAY=1h")
	if code, body := a.do(t, "POST", "/api/v1/cycles?mode=cold", s.token); code != 202 {
		t.Fatalf("mode=cold: %d %v, want 202", code, body)
	}
	cs := a.waitCycles(t, "skipped", 1, 2*time.Minute)
	if cs[0].Mode != "cold" || cs[0].Reason != "budget_exhausted" {
		t.Errorf("cycle %+v; want a cold cycle skipped for budget_exhausted", cs[0])
	}
	_, series := a.scrape(t)
	if v, _ := series.Find("layerprobe_cycles_total", map[string]string{"mode": "cold", "result": "skipped"}); v != 1 {
		t.Errorf("layerprobe_cycles_total{mode=cold,result=skipped} = %v, want 1", v)
	}
	if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) > 0 {
		t.Errorf("a skipped cold cycle created %+v", l)
	}
	a.stop()
}

// coldFsyncPairs counts the rounds of a cold cycle whose host and
// container fsync executions both succeeded with an fsync p99, the pairs
// its interval is made of, and logs the executions of those that did not.
func coldFsyncPairs(t *testing.T, a *agentProc, id int64) int {
	t.Helper()
	var detail api.CycleDetail
	a.getJSON(t, "/api/v1/cycles/"+strconv.FormatInt(id, 10), &detail)
	byRound := map[int][]api.Sample{}
	for _, s := range detail.Samples {
		byRound[s.Round] = append(byRound[s.Round], s)
	}
	pairs := 0
	for r, ss := range byRound {
		ok := len(ss) == 2
		for _, s := range ss {
			v := measure.MetricValue(measure.MetricFsyncP99, s.JobResult)
			ok = ok && s.OK() && finite(v) && v > 0
		}
		if ok {
			pairs++
			continue
		}
		for _, s := range ss {
			b, _ := json.Marshal(s)
			t.Logf("cold round %d without an fsync pair: %s", r, b)
		}
	}
	return pairs
}
