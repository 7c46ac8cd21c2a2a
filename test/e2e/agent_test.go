package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// agentConfig: the smoke profile and every busy-host guard off, so cycles
// run whatever the CI machine is doing; no cold probe, so the tests count
// steady cycles only (cold_test.go turns it on); every figure on /metrics
// (metrics_detail), which checkContractSeries and the REST comparison
// read (test/ops' image test and TestSeriesBudget run the lean default).
const agentConfig = `profile: smoke
agent:
  metrics_detail: true
  interval: 1h
  cold_interval: 0s
  jitter: 0
  rounds_per_cycle: 2
  window_rounds: 6
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s`

func TestAgentServesMetricsAndAPI(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, agentConfig)
	a := s.start(t)

	// The first cycle runs soon after start.
	cs := a.waitCycles(t, "ok", 1, 3*time.Minute)
	first := cs[len(cs)-1].ID

	raw, series := a.scrape(t)
	// The first cycle made 2 rounds, fewer than a 95% interval needs
	// (6): no surface may show one, while the estimates are there.
	checkContractSeries(t, series, "overlay2", "extfs", true)
	checkFirstCycleWithheld(t, a, s.host)
	promtool := exec.Command("promtool", "check", "metrics")
	promtool.Stdin = strings.NewReader(raw)
	if out, err := promtool.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics on a real scrape: %v\n%s", err, out)
	}

	// The REST answer agrees with the metrics.
	var ov struct {
		Engines []struct {
			Engine  string `json:"engine"`
			Results []struct {
				Target   string `json:"target"`
				Workload string `json:"workload"`
				Overhead map[string]struct {
					Ratio  *float64 `json:"ratio"`
					CILow  *float64 `json:"ci_low"`
					CIHigh *float64 `json:"ci_high"`
				} `json:"overhead"`
			} `json:"results"`
		} `json:"engines"`
	}
	a.getJSON(t, "/api/v1/overhead", &ov)
	if len(ov.Engines) != 1 || len(ov.Engines[0].Results) == 0 {
		t.Fatalf("overhead answer: %+v", ov)
	}
	compared := 0
	for _, r := range ov.Engines[0].Results {
		for m, o := range r.Overhead {
			if o.Ratio == nil {
				continue
			}
			v, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"target": r.Target, "workload": r.Workload, "metric": m})
			if !ok || math.Abs(v-*o.Ratio) > 1e-9*math.Max(1, math.Abs(v)) {
				t.Errorf("%s/%s %s: API ratio %v, metric %v (present %v)", r.Target, r.Workload, m, *o.Ratio, v, ok)
			}
			compared++
		}
	}
	if compared < 9*4 {
		t.Errorf("compared %d overheads between API and metrics, want at least 36", compared)
	}

	// `layerprobe overhead` prints the same figures as a table.
	res := layerprobe(t, s.host, time.Minute, "overhead", "--url", a.base)
	if res.code != 0 {
		t.Errorf("layerprobe overhead: exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"container", "bind", "volume", "fsync", "% OF HOST"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("layerprobe overhead output lacks %q:\n%s", want, res.stdout)
		}
	}

	// Bad query parameters: 400 with the JSON error naming the parameter.
	for path, param := range map[string]string{
		"/api/v1/cycles?limit=abc":     "limit",
		"/api/v1/cycles?limit=0":       "limit",
		"/api/v1/cycles?since=someday": "since",
		"/api/v1/cycles?bogus=1":       "bogus",
		"/api/v1/cycles/notanumber":    "id",
	} {
		code, body := a.do(t, "GET", path, "")
		e, _ := body["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code != 400 || e["code"] != "bad_parameter" || !strings.Contains(msg, param) {
			t.Errorf("GET %s: %d %v; want 400 bad_parameter naming %q", path, code, body, param)
		}
	}
	if code, _ := a.do(t, "GET", "/api/v1/cycles/999999", ""); code != 404 {
		t.Errorf("unknown cycle: %d, want 404", code)
	}

	// Triggering needs the token; a second trigger while one runs is 409.
	if code, _ := a.do(t, "POST", "/api/v1/cycles", ""); code != 401 {
		t.Errorf("POST without token: %d, want 401", code)
	}
	if code, _ := a.do(t, "POST", "/api/v1/cycles", "wrong-token-0123456789"); code != 401 {
		t.Errorf("POST with a wrong token: %d, want 401", code)
	}
	if code, body := a.do(t, "POST", "/api/v1/cycles", s.token); code != 202 {
		t.Fatalf("POST with the token: %d %v, want 202", code, body)
	}
	if code, _ := a.do(t, "POST", "/api/v1/cycles", s.token); code != 409 {
		t.Errorf("POST while a cycle runs: %d, want 409", code)
	}
	a.waitCycles(t, "ok", 2, 3*time.Minute)

	// Restart: history survives, and metrics come back before any new cycle.
	if code, took := a.stop(); code != 0 || took > 10*time.Second {
		t.Errorf("SIGTERM: exit %d after %s; want 0 within 10s", code, took)
	}
	a = s.start(t)
	ids := map[int64]bool{}
	for _, c := range a.cycles(t) {
		ids[c.ID] = true
	}
	if !ids[first] || len(ids) < 2 {
		t.Errorf("after restart the cycles are %v; want the earlier cycle %d among at least 2", ids, first)
	}
	_, series = a.scrape(t)
	if _, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"target": "container", "workload": "fsync", "metric": "fsync_p99"}); !ok {
		t.Error("after restart the stored overheads are not exposed")
	}

	// SIGTERM during a cycle: fio is stopped, the cycle is recorded as
	// interrupted, the agent exits 0 within 10 s and leaves nothing.
	a.waitCycles(t, "ok", 3, 3*time.Minute) // the restarted agent's first cycle
	// Three cycles of 2 rounds fill the window of 6: every interval is
	// a 95% one now, and exposed.
	_, series = a.scrape(t)
	checkContractSeries(t, series, "overlay2", "extfs", false)
	if code, body := a.do(t, "POST", "/api/v1/cycles", s.token); code != 202 {
		t.Fatalf("POST: %d %v", code, body)
	}
	waitRunning(t, a)
	time.Sleep(2 * time.Second)
	if code, took := a.stop(); code != 0 || took > 10*time.Second {
		t.Errorf("SIGTERM during a cycle: exit %d after %s; want 0 within 10s", code, took)
	}
	if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) > 0 {
		t.Errorf("left behind after SIGTERM: %+v", l)
	}
	if pids := fioUnder(d.DataRoot); len(pids) > 0 {
		t.Errorf("fio still running after SIGTERM: %v", pids)
	}
	checkNoScratchFiles(t, d.DataRoot)
	a = s.start(t)
	interrupted := false
	for _, c := range a.cycles(t) {
		if c.Result == "interrupted" {
			interrupted = true
		}
	}
	if !interrupted {
		t.Errorf("the cycle stopped by SIGTERM is not recorded as interrupted: %+v", a.cycles(t))
	}
	a.stop()
}

func waitRunning(t *testing.T, a *agentProc) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, c := range a.cycles(t) {
			if c.Result == "running" {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no running cycle appeared")
}

// checkNoScratchFiles: no file is left in the scratch directory tree.
func checkNoScratchFiles(t *testing.T, dataRoot string) {
	t.Helper()
	_ = filepath.Walk(filepath.Join(dataRoot, "layerprobe-scratch"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("file left in scratch: %s", p)
		}
		return nil
	})
}

// checkContractSeries asserts every contract series (docs/metrics.md) for every target
// and job is present in a scrape taken after a successful cycle.
// With withheld (fewer rounds than a 95% interval needs), the overhead's
// estimate must be there and its ci_low/ci_high series must not.
func checkContractSeries(t *testing.T, series testharness.Metrics, driver, backing string, withheld bool) {
	t.Helper()
	for _, tg := range wantTargets {
		for _, j := range wantJobs {
			l := map[string]string{"engine": "default", "driver": driver, "target": tg, "workload": j, "op": "write"}
			for _, name := range []string{"layerprobe_iops", "layerprobe_bandwidth_bytes_per_second"} {
				if v, ok := series.Find(name, l); !ok || !(v > 0) {
					t.Errorf("%s%v = %v (present %v)", name, l, v, ok)
				}
			}
			for _, p := range []string{"50", "99"} {
				l2 := map[string]string{"target": tg, "workload": j, "op": "write", "percentile": p}
				if v, ok := series.Find("layerprobe_latency_seconds", l2); !ok || !(v > 0) {
					t.Errorf("layerprobe_latency_seconds%v = %v (present %v)", l2, v, ok)
				}
			}
			if j == "fsync" {
				l2 := map[string]string{"target": tg, "workload": j, "op": "sync", "percentile": "99"}
				if v, ok := series.Find("layerprobe_latency_seconds", l2); !ok || !(v > 0) {
					t.Errorf("layerprobe_latency_seconds%v = %v (present %v)", l2, v, ok)
				}
			}
			if tg == "host" {
				continue
			}
			metrics := []string{"iops", "bandwidth", "latency_p50", "latency_p99"}
			if j == "fsync" {
				metrics = append(metrics, "fsync_p99")
			}
			for _, m := range metrics {
				l := map[string]string{"engine": "default", "driver": driver, "target": tg, "workload": j, "metric": m}
				for _, name := range []string{"layerprobe_overhead_ratio", "layerprobe_overhead_ci_low_ratio", "layerprobe_overhead_ci_high_ratio"} {
					v, ok := series.Find(name, l)
					switch {
					case withheld && name != "layerprobe_overhead_ratio" && ok:
						t.Errorf("%s%v = %v after too few rounds for a 95%% interval; want no series", name, l, v)
					case (!withheld || name == "layerprobe_overhead_ratio") && (!ok || math.IsNaN(v)):
						t.Errorf("%s%v missing", name, l)
					}
				}
			}
		}
		if tg != "host" {
			if v, ok := series.Find("layerprobe_fsync_regression", map[string]string{"target": tg}); !ok || v != 0 {
				t.Errorf("layerprobe_fsync_regression{target=%q} = %v (present %v), want 0", tg, v, ok)
			}
		}
		if v, ok := series.Find("layerprobe_written_bytes_total", map[string]string{"target": tg}); !ok || !(v > 0) {
			t.Errorf("layerprobe_written_bytes_total{target=%q} = %v (present %v)", tg, v, ok)
		}
	}
	if v, ok := series.Find("layerprobe_cycles_total", map[string]string{"result": "ok"}); !ok || v < 1 {
		t.Errorf("layerprobe_cycles_total{result=ok} = %v (present %v)", v, ok)
	}
	for _, name := range []string{"layerprobe_cycle_duration_seconds", "layerprobe_last_success_timestamp_seconds"} {
		if v, ok := series.Find(name, map[string]string{"engine": "default"}); !ok || !(v > 0) {
			t.Errorf("%s = %v (present %v)", name, v, ok)
		}
	}
	info := map[string]string{"engine": "default", "driver": driver, "backing_fs": backing}
	if v, ok := series.Find("layerprobe_engine_info", info); !ok || v != 1 {
		t.Errorf("layerprobe_engine_info%v = %v (present %v)", info, v, ok)
	}
	for _, s := range series["layerprobe_engine_info"] {
		if s.Labels["fio_version"] == "" || s.Labels["engine_version"] == "" || s.Labels["data_root"] == "" {
			t.Errorf("layerprobe_engine_info lacks labels: %v", s.Labels)
		}
	}
}

// detectorConfig: the fsync workload alone (workloads), on one target
// (container), short cycles of fixed rounds, a short baseline and a short confirmation, so
// that the detection test fits CI's budget. The effect floor is high
// (four times the baseline): this test checks that the agent wires the
// detector to real measurements, with a slowdown far beyond the floor and
// far beyond what a busy disk does to the ratio. How small a regression
// the default detector finds, and how often noise fools it, is measured by
// `make bench` and simulated in internal/detector (docs/detector.md).
const detectorConfig = `profile: smoke
targets: [container]
workloads: [fsync]
agent:
  interval: 10s
  cold_interval: 0s
  jitter: 0
  rounds_per_cycle: 3
  window_rounds: 6
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
detector:
  baseline_rounds: 60
  min_baseline_rounds: 6
  h: 3
  min_effect: 3
  confirm_rounds: 5
  confirm_min: 4`

// detectorThrottleIOPS is the write IOPS the throttled probe container gets
// on the data root's device. Every fsync in the container waits for at
// least one throttled write, so its fsync p99 is at least 1/2 s, against a
// host p99 of well under a millisecond on a quiet disk and tens of
// milliseconds on this project's busiest test machine: a ratio above the
// 4x floor in every round. The host arm joins only the container's CPU
// cgroups, never its block I/O cgroup, so it is not throttled.
const detectorThrottleIOPS = 2

// A real slowdown (the probe container's writes throttled with cgroup
// blkio) makes layerprobe_fsync_regression 1 after a suspicion and its
// confirmation rounds, while unthrottled cycles keep it 0.
func TestDetectorFlagsThrottledFsync(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, detectorConfig)
	regressed := func(a *agentProc) float64 {
		_, series := a.scrape(t)
		v, ok := series.Find("layerprobe_fsync_regression", map[string]string{"target": "container"})
		if !ok {
			t.Fatal(`layerprobe_fsync_regression{target="container"} missing`)
		}
		return v
	}

	// Unthrottled: 2 cycles (6 rounds) learn the baseline, one more is
	// screened; the detector stays quiet through all of them.
	const unthrottled = 3
	a := s.start(t)
	for n := 1; n <= unthrottled; n++ {
		a.waitCycles(t, "ok", n, 5*time.Minute)
		if v := regressed(a); v != 0 {
			t.Fatalf("unthrottled cycle %d: layerprobe_fsync_regression = %v", n, v)
		}
	}
	before := len(a.cycles(t))
	// workloads: [fsync] runs that workload alone: the others have no
	// results at all.
	_, series := a.scrape(t)
	fsyncSeries := 0
	for _, s := range series["layerprobe_overhead_ratio"] {
		if s.Labels["workload"] != "fsync" {
			t.Errorf("workloads: [fsync], yet %v", s.Labels)
		} else {
			fsyncSeries++
		}
	}
	if fsyncSeries == 0 {
		t.Error("no fsync layerprobe_overhead_ratio series")
	}
	a.stop()

	// Throttled: history and detector state carry over to the agent's next
	// probe container. The deadline only bounds a hang; the assertions are
	// on what happened.
	a = s.start(t, fmt.Sprintf("LAYERPROBE_TEST_THROTTLE_WRITE_IOPS=%d", detectorThrottleIOPS))
	deadline := time.Now().Add(10 * time.Minute)
	for regressed(a) != 1 {
		if time.Now().After(deadline) {
			cs := a.cycles(t)
			t.Fatalf("no regression flagged within 10 minutes of throttling; cycles since: %+v", cs[:len(cs)-before])
		}
		time.Sleep(time.Second)
	}
	cs := a.cycles(t)
	since := cs[:len(cs)-before] // newest first
	var scheduled, confirm int
	for _, c := range since {
		switch c.Trigger {
		case "confirm":
			confirm++
		default:
			scheduled++
		}
	}
	// The confirmation rounds run in a cycle of their own, or, when the
	// suspicion opens early in a scheduled cycle, partly in its remaining
	// rounds: either way the detector confirmed with fresh rounds.
	t.Logf("throttled: layerprobe_fsync_regression became 1 after %d scheduled and %d confirmation cycles", scheduled, confirm)
	// Three throttled rounds each add the clipped z-score to the CUSUM, so
	// the first throttled cycle raises the suspicion; allow one more for a
	// baseline that a busy disk made wide, and one that has just started.
	if scheduled > 3 {
		t.Errorf("detection took %d scheduled cycles, want at most 3", scheduled)
	}
	a.stop()
}

// The write budget guard skips a cycle before anything is written, counts
// the skip with its reason, and creates no probe container.
func TestAgentSkipsWhenBudgetWouldBeExceeded(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	cfg := strings.Replace(agentConfig, "daily_byte_budget: 0", "daily_byte_budget: 1MiB", 1)
	s := newAgentSetup(t, d.Host, cfg)
	a := s.start(t)
	cs := a.waitCycles(t, "skipped", 1, 2*time.Minute)
	if cs[0].Reason != "budget_exhausted" {
		t.Errorf("skipped cycle reason %q, want budget_exhausted", cs[0].Reason)
	}
	_, series := a.scrape(t)
	if v, ok := series.Find("layerprobe_cycle_skips_total", map[string]string{"reason": "budget_exhausted"}); !ok || v < 1 {
		t.Errorf("layerprobe_cycle_skips_total{reason=budget_exhausted} = %v (present %v)", v, ok)
	}
	if v, ok := series.Find("layerprobe_cycles_total", map[string]string{"result": "skipped"}); !ok || v < 1 {
		t.Errorf("layerprobe_cycles_total{result=skipped} = %v (present %v)", v, ok)
	}
	if v, ok := series.Find("layerprobe_daily_budget_bytes", nil); !ok || v != 1<<20 {
		t.Errorf("layerprobe_daily_budget_bytes = %v (present %v), want 1 MiB", v, ok)
	}
	if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) > 0 {
		t.Errorf("a skipped cycle created %+v", l)
	}
	a.stop()
}

// checkFirstCycleWithheld: after a first cycle of fewer rounds than a 95%
// interval needs, the API gives every non-host overhead its estimate with
// null bounds and interval_withheld, the status page draws no interval
// bar and marks every row, and `layerprobe overhead` prints no interval.
func checkFirstCycleWithheld(t *testing.T, a *agentProc, host string) {
	t.Helper()
	var ov struct {
		Engines []struct {
			Results []struct {
				Target   string `json:"target"`
				Workload string `json:"workload"`
				Overhead map[string]struct {
					Ratio    *float64 `json:"ratio"`
					CILow    *float64 `json:"ci_low"`
					CIHigh   *float64 `json:"ci_high"`
					PctLow   *float64 `json:"percent_of_host_low"`
					Rounds   int      `json:"rounds"`
					Coverage *float64 `json:"coverage"`
					Withheld bool     `json:"interval_withheld"`
				} `json:"overhead"`
			} `json:"results"`
		} `json:"engines"`
	}
	a.getJSON(t, "/api/v1/overhead", &ov)
	rows := (len(wantTargets) - 1) * len(wantJobs) // every target but host, every job
	checked := 0
	for _, e := range ov.Engines {
		for _, r := range e.Results {
			for m, o := range r.Overhead {
				if o.Rounds == 0 {
					continue
				}
				checked++
				if o.Ratio == nil || o.CILow != nil || o.CIHigh != nil || o.PctLow != nil || !o.Withheld ||
					o.Coverage == nil || *o.Coverage >= 0.95 {
					t.Errorf("%s/%s %s after the first cycle: ratio %v, bounds %v..%v, withheld %v, coverage %v; want the estimate, null bounds, withheld, coverage < 0.95",
						r.Target, r.Workload, m, ptr(o.Ratio), ptr(o.CILow), ptr(o.CIHigh), o.Withheld, ptr(o.Coverage))
				}
			}
		}
	}
	if checked < rows*4 {
		t.Errorf("checked %d overheads of the first cycle, want at least %d", checked, rows*4)
	}
	resp, err := http.Get(a.base + "/")
	if err != nil {
		t.Fatalf("GET /: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	code, page := resp.StatusCode, string(b)
	if code != 200 || strings.Contains(page, `class="ci"`) || strings.Count(page, `data-withheld="true"`) != rows ||
		!strings.Contains(page, "no interval yet: 2 of 6 rounds") {
		t.Errorf("status page after the first cycle (%d): want %d rows marked withheld (2 of 6 rounds) and no interval bar:\n%s", code, rows, page)
	}
	res := layerprobe(t, host, time.Minute, "overhead", "--url", a.base)
	if res.code != 0 || strings.Count(res.stdout, "[no interval]*") != rows || !strings.Contains(res.stdout, "no 95% interval exists yet") {
		t.Errorf("layerprobe overhead after the first cycle (exit %d): want %d rows with [no interval]* and the footnote:\n%s%s", res.code, rows, res.stdout, res.stderr)
	}
}

func ptr(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
