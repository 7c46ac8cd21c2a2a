package asshipped

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// LoadedAgentConfig is the agent configuration of the loaded runs: the
// host arm and one target in the probe container, bind (the A/A
// comparison: the same file system as the host's scratch directory,
// through a bind mount; the container and volume arms run in the same
// container and add nothing to the join); the smoke profile with 6 rounds
// of each workload in the first cycle (the fewest with a 95% exact
// interval: four deployments' cycles one after the other on a busy host
// are the longest path of the suite); a cycle at start and no guardrail
// that would skip it on a busy host (the load is the point); no cold
// cycle, which would start a minute after the steady one and import its
// start-up images while the deployment is being removed. The listen
// address is filled in.
const LoadedAgentConfig = `profile: smoke
targets: [bind]
workloads: [randwrite, smallfiles]
agent:
  listen_address: %s
  interval: 1h
  cold_interval: 0s
  jitter: 0
  budget:
    rounds: 6
  daily_byte_budget: 8GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
`

// LoadedWorkloads are the workloads of LoadedAgentConfig: one run by fio
// (4 KiB random writes from four threads) and one by layerprobe's own
// small-file helper, the two kinds of host arm the join must hold for.
var LoadedWorkloads = []measure.Workload{measure.RandWrite, measure.SmallFiles}

// AgentConfigFile writes LoadedAgentConfig for listen address addr into
// the host's share as dir/config.yaml and returns its path in the host.
func AgentConfigFile(t testing.TB, h Host, dir, addr string) string {
	t.Helper()
	local := filepath.Join(h.Share(), filepath.FromSlash(dir))
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "config.yaml"), fmt.Appendf(nil, LoadedAgentConfig, addr), 0o644); err != nil {
		t.Fatal(err)
	}
	return h.SharedAt() + "/" + dir + "/config.yaml"
}

// AAFactor is how far from 100% of the host bind's headline interval may
// lie in the A/A check: bind writes the host's own file system through a
// bind mount, so its interval must reach into [100/AAFactor, 100×AAFactor]
// percent. A lost join on a loaded host read 289–1418% (cgroup v1) and
// fails it; the check is the interval's, so noisy rounds widen the
// interval rather than fail it.
const AAFactor = 1.5

// AAFigure is bind's headline overhead for one workload of the first
// steady cycle: the A/A comparison.
type AAFigure struct {
	Workload measure.Workload `json:"workload"`
	Metric   string           `json:"metric"`
	// Percent is bind's headline as a percentage of the host's, with its
	// 95% interval [Low, High].
	Percent  float64 `json:"percent_of_host"`
	Low      float64 `json:"percent_low"`
	High     float64 `json:"percent_high"`
	N        int     `json:"rounds"`
	Coverage float64 `json:"coverage"`
	// Pass says the interval reaches into [100/AAFactor, 100×AAFactor].
	Pass bool `json:"pass"`
}

// AAPasses says whether an interval [low, high] of percentages of the host
// reaches into [100/AAFactor, 100×AAFactor].
func AAPasses(low, high float64) bool { return low <= 100*AAFactor && high >= 100/AAFactor }

// Verdict is what a loaded deployment's agent published in its first
// steady cycle, and what its host arm really did.
type Verdict struct {
	// HostArmCgroup and its error are the engine's in /api/v1/engines.
	HostArmCgroup      string `json:"host_arm_cgroup"`
	HostArmCgroupError string `json:"host_arm_cgroup_error,omitempty"`
	// Baseline is the engine's stated baseline.
	Baseline string `json:"baseline,omitempty"`
	// JoinedMetric is layerprobe_host_arm_cgroup_joined's value on
	// /metrics, "" when there is no such series.
	JoinedMetric string `json:"joined_metric"`
	// Alert says the series would fire LayerprobeHostArmOutsideCPUCgroup
	// (a value of 0).
	Alert bool       `json:"alert"`
	AA    []AAFigure `json:"aa"`
	// ArmsSeen counts the host-arm processes the watcher saw, by what
	// they ran (HostArmWorkload).
	ArmsSeen map[string]int `json:"arms_seen"`
	// CycleSeconds is how long the first steady cycle took under load.
	CycleSeconds float64 `json:"cycle_seconds"`
	// FirstIntervalSeconds is the time a user waits for an answer: from
	// the install command (Agent.Installed: apt-get install, compose up,
	// systemctl enable --now, the pod's docker run) until
	// /api/v1/overhead had bind's 95% interval for every workload; 0 when
	// it had not.
	FirstIntervalSeconds float64 `json:"first_interval_seconds,omitempty"`
	// Problems are the failed checks: the join (published and watched),
	// the alert, a warning, the intervals; AAProblems the failed A/A
	// checks, apart, since a loaded test machine's noise can fail them
	// (Report).
	Problems   []string `json:"problems,omitempty"`
	AAProblems []string `json:"aa_problems,omitempty"`
}

// Agent is a running deployment's agent in a host.
type Agent struct {
	// Port is where the agent listens on the host's loopback.
	Port int
	// PID gives the agent's PID in the host, 0 while it has none.
	PID func() int
	// Alive says why the agent is not running, "" while it is.
	Alive func() string
	// Log is the agent's log so far.
	Log func() string
	// Installed is when the install command began.
	Installed time.Time
}

// API returns a getter of the agent's API.
func (a Agent) API(t testing.TB, h Host) func(path string) ([]byte, error) {
	base := h.URL(t, a.Port)
	c := &http.Client{Timeout: 30 * time.Second}
	return func(path string) ([]byte, error) {
		resp, err := c.Get(base + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, err
	}
}

// CheckLoadedAgent runs the load while the agent's first steady cycle
// runs, watches its arms meanwhile (lpworkload armcg), and returns what
// the cycle published and what the watcher saw (Verdict). It fails t only
// where nothing can be judged: the agent died, or its cycle did not end
// within timeout.
func CheckLoadedAgent(t testing.TB, h Host, l *Load, a Agent, timeout time.Duration) Verdict {
	t.Helper()
	l.Spin(t, true)
	spinning := true
	stopLoad := func() {
		if spinning {
			spinning = false
			l.Spin(t, false)
		}
	}
	defer stopLoad()
	get := a.API(t, h)
	start := time.Now()
	arms := watchArms(t, h, strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), a.PID)
	waitFirstSteadyCycle(t, timeout, get, a.Alive)
	var v Verdict
	ended := time.Now()
	v.CycleSeconds = ended.Sub(start).Seconds()
	t.Logf("first steady cycle under load: %s", time.Since(start).Round(time.Second))
	seen, problems := ArmCgroupProblems(arms(), "fio", "smallfiles")
	v.ArmsSeen = seen
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("... and %d more", len(problems)-5))
	}
	v.Problems = append(v.Problems, problems...)
	// The cycle judged ran under the load; its results are read without
	// it. An agent held to its pod's CPU request (cpu-shares 51) beside
	// busy loops on an emulated CPU may not answer /metrics within the
	// client's 30 s otherwise, and the run ends with no verdict.
	stopLoad()

	var engines api.EnginesResponse
	var overhead api.OverheadResponse
	for path, into := range map[string]any{"/api/v1/engines": &engines, "/api/v1/overhead": &overhead} {
		body, err := get(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, testharness.Tail(string(body), 20))
		}
	}
	v.judge(engines, overhead)
	if !a.Installed.IsZero() && v.intervals() {
		v.FirstIntervalSeconds = ended.Sub(a.Installed).Seconds()
	}
	if body, err := get("/metrics"); err != nil {
		t.Fatal(err)
	} else {
		const series = `layerprobe_host_arm_cgroup_joined{engine="default"} `
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, series) {
				v.JoinedMetric = strings.TrimSpace(strings.TrimPrefix(line, series))
			}
		}
	}
	switch v.JoinedMetric {
	case "1":
	case "0":
		v.Alert = true
		v.Problems = append(v.Problems, "layerprobe_host_arm_cgroup_joined is 0: LayerprobeHostArmOutsideCPUCgroup fires")
	default:
		// No series: only a comparison that states another baseline
		// may go without it.
		if v.Baseline == "" || v.Baseline == "native host disk" {
			v.Problems = append(v.Problems, fmt.Sprintf("/metrics has no layerprobe_host_arm_cgroup_joined{engine=\"default\"} (%q), and the engine states no baseline of its own (%q)", v.JoinedMetric, v.Baseline))
		}
	}
	for _, line := range strings.Split(a.Log(), "\n") {
		if strings.Contains(line, "outside the probe container's CPU cgroup") {
			v.Problems = append(v.Problems, "the agent logged: "+line)
			break
		}
	}
	return v
}

// judge fills v from the agent's engines and overheads: the host arm
// joined, no warning about it, and bind's intervals for every workload of
// LoadedWorkloads, 95% ones, against the A/A check.
func (v *Verdict) judge(engines api.EnginesResponse, overhead api.OverheadResponse) {
	if len(engines.Engines) != 1 {
		v.Problems = append(v.Problems, fmt.Sprintf("want one engine, have %+v", engines.Engines))
		return
	}
	e := engines.Engines[0]
	v.HostArmCgroup, v.HostArmCgroupError, v.Baseline = e.HostArmCgroup, e.HostArmCgroupError, e.Baseline
	if e.HostArmCgroup != "joined" {
		v.Problems = append(v.Problems, fmt.Sprintf("host arm: %q (%s), want joined; warnings %q", e.HostArmCgroup, e.HostArmCgroupError, e.Warnings))
	}
	for _, w := range e.Warnings {
		if strings.Contains(w, "CPU cgroup") {
			v.Problems = append(v.Problems, "engine warning: "+w)
		}
	}
	var steady *api.EngineOverhead
	for i := range overhead.Engines {
		if overhead.Engines[i].Mode == measure.ModeSteady {
			steady = &overhead.Engines[i]
		}
	}
	if steady == nil {
		v.Problems = append(v.Problems, fmt.Sprintf("no steady overheads: %+v", overhead))
		return
	}
	seen := map[measure.Workload]bool{}
	for _, r := range steady.Results {
		if r.Target != measure.TargetBind {
			continue
		}
		seen[r.Workload] = true
		m := measure.HeadlineMetric(r.Workload)
		o, ok := r.Overhead[m]
		if !ok {
			v.Problems = append(v.Problems, fmt.Sprintf("bind %s: no %s overhead", r.Workload, m))
			continue
		}
		f := AAFigure{Workload: r.Workload, Metric: m, Percent: o.PercentOfHost, Low: o.PercentLow, High: o.PercentHigh,
			N: o.N, Coverage: o.Coverage, Pass: AAPasses(o.PercentLow, o.PercentHigh)}
		v.AA = append(v.AA, f)
		if o.N < 6 || o.Coverage < 0.95 {
			v.Problems = append(v.Problems, fmt.Sprintf("bind %s: %d rounds, coverage %.2f: not a 95%% interval", r.Workload, o.N, o.Coverage))
		}
		if !f.Pass {
			v.AAProblems = append(v.AAProblems, fmt.Sprintf("bind %s %s: %.0f%% of host [%.0f–%.0f]: the interval does not reach into [%.0f, %.0f]%% (A/A)",
				r.Workload, m, o.PercentOfHost, o.PercentLow, o.PercentHigh, 100/AAFactor, 100*AAFactor))
		}
	}
	for _, w := range LoadedWorkloads {
		if !seen[w] {
			v.Problems = append(v.Problems, fmt.Sprintf("no bind result for %s", w))
		}
	}
}

// intervals says bind has a 95% interval for every workload of
// LoadedWorkloads.
func (v *Verdict) intervals() bool {
	have := map[measure.Workload]bool{}
	for _, f := range v.AA {
		if f.N >= 6 && f.Coverage >= 0.95 {
			have[f.Workload] = true
		}
	}
	for _, w := range LoadedWorkloads {
		if !have[w] {
			return false
		}
	}
	return true
}

// Report logs v's figures and fails t for each of its problems; for its
// A/A problems only when checkAA is set. test/ops's box shares a machine
// that the whole suite loads, where bind read from 3% to 15412% of the
// host with the join in place; the A/A figures are checked where the
// machine is the benchmark's.
func (v Verdict) Report(t testing.TB, checkAA bool) {
	t.Helper()
	t.Logf("host arm %s%s, layerprobe_host_arm_cgroup_joined %q; host-arm processes checked: %d of fio, %d of the small-file helper",
		v.HostArmCgroup, map[bool]string{true: " (" + v.HostArmCgroupError + ")", false: ""}[v.HostArmCgroupError != ""],
		v.JoinedMetric, v.ArmsSeen["fio"], v.ArmsSeen["smallfiles"])
	t.Logf("from the install command to the first interval of every workload: %s (the first cycle under load %s)",
		map[bool]string{true: time.Duration(v.FirstIntervalSeconds * float64(time.Second)).Round(time.Second).String(), false: "no interval"}[v.FirstIntervalSeconds > 0],
		time.Duration(v.CycleSeconds*float64(time.Second)).Round(time.Second))
	for _, f := range v.AA {
		t.Logf("bind %-9s %-9s %5.0f%% of host [%4.0f–%4.0f], %d rounds, coverage %.2f, A/A %s",
			f.Workload, f.Metric, f.Percent, f.Low, f.High, f.N, f.Coverage, map[bool]string{true: "passes", false: "fails"}[f.Pass])
	}
	for _, p := range v.Problems {
		t.Error(p)
	}
	for _, p := range v.AAProblems {
		if checkAA {
			t.Error(p)
		} else {
			t.Logf("%s (not checked here)", p)
		}
	}
}

// watchArms starts `lpworkload armcg` in the host for the agent whose PID
// pid returns, and returns a function that stops it and returns what it
// saw. lpworkload goes to the host's share.
func watchArms(t testing.TB, h Host, name string, pid func() int) func() []ArmProcess {
	t.Helper()
	var p int
	testharness.Eventually(t, 2*time.Minute, time.Second, "the agent's PID", func() (bool, string) {
		p = pid()
		return p > 0, "no PID yet"
	})
	t.Logf("watching the arms of the agent, PID %d in the host", p)
	workload := CopyToShare(t, h, testharness.WorkloadBinary(t), "lpworkload", 0o755)
	out, stop := "armcg-"+name+".jsonl", "armcg-"+name+".stop"
	done := make(chan Result, 1)
	go func() {
		done <- h.Exec(t, 60*time.Minute, workload, "armcg", strconv.Itoa(p), h.SharedAt()+"/"+out, h.SharedAt()+"/"+stop, h.ArmsPoll().String())
	}()
	return func() []ArmProcess {
		if err := os.WriteFile(filepath.Join(h.Share(), stop), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.Err != nil {
			t.Fatalf("lpworkload armcg:\n%s", r)
		}
		if now := pid(); now != p {
			t.Errorf("the agent's PID changed while its arms were watched: %d, then %d (a restart)", p, now)
		}
		b, err := os.ReadFile(filepath.Join(h.Share(), out))
		if err != nil {
			t.Fatal(err)
		}
		var procs []ArmProcess
		dec := json.NewDecoder(strings.NewReader(string(b)))
		for dec.More() {
			var a ArmProcess
			if err := dec.Decode(&a); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			procs = append(procs, a)
		}
		return procs
	}
}

// waitFirstSteadyCycle polls the agent's cycles through get until the
// first steady cycle has ended, and fails unless it succeeded.
func waitFirstSteadyCycle(t testing.TB, timeout time.Duration, get func(path string) ([]byte, error), alive func() string) {
	t.Helper()
	var last api.CyclesResponse
	testharness.Eventually(t, timeout, 3*time.Second, "the first steady cycle to end", func() (bool, string) {
		if why := alive(); why != "" {
			t.Fatalf("the agent is not running: %s", why)
		}
		b, err := get("/api/v1/cycles")
		if err != nil {
			return false, err.Error()
		}
		last = api.CyclesResponse{}
		if err := json.Unmarshal(b, &last); err != nil {
			return false, err.Error()
		}
		for _, c := range last.Cycles {
			if c.Mode == measure.ModeSteady && c.Result != "running" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("cycles: %+v", last.Cycles)
	})
	for _, c := range last.Cycles {
		if c.Mode == measure.ModeSteady && c.Result != "running" && c.Result != "ok" {
			t.Fatalf("the first steady cycle ended %s (%s: %s)", c.Result, c.Reason, c.Message)
		}
	}
}
