//go:build bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// agentToken is the trigger token of the agents the benchmark starts.
const agentToken = "bench-token-0123456789abcdef0123"

// agentDir is one agent's files: config, token and state. The state
// directory (history and detector state) can be copied to another agentDir
// so several runs start from one learned baseline.
type agentDir struct{ testharness.AgentFiles }

func newAgentDir(dir, configYAML string) (agentDir, error) {
	f, err := testharness.WriteAgentFiles(dir, configYAML, agentToken)
	return agentDir{f}, err
}

// cloneState copies this directory's state (the agent must be stopped)
// into a fresh agentDir with the same configuration.
func (a agentDir) cloneState(dir string) (agentDir, error) {
	cfg, err := os.ReadFile(a.Config)
	if err != nil {
		return agentDir{}, fmt.Errorf("read config: %w", err)
	}
	n, err := newAgentDir(dir, string(cfg))
	if err != nil {
		return n, err
	}
	ents, err := os.ReadDir(a.StateDir)
	if err != nil {
		return n, fmt.Errorf("read state dir: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(a.StateDir, e.Name()))
		if err != nil {
			return n, fmt.Errorf("copy state: %w", err)
		}
		if err := os.WriteFile(filepath.Join(n.StateDir, e.Name()), b, 0o600); err != nil {
			return n, fmt.Errorf("copy state: %w", err)
		}
	}
	return n, nil
}

// benchAgent is a running `layerprobe agent`. Its scheduled cycles are an
// hour away (LAYERPROBE_TEST_FIRST_CYCLE_DELAY, interval 1h): every cycle
// the benchmark counts is started with POST /api/v1/cycles, one after the
// other, so the cycles are back to back and none is missed or doubled.
type benchAgent struct {
	*testharness.Proc
	base    string
	http    *http.Client
	started time.Time
}

func startBenchAgent(ctx context.Context, bin string, d agentDir, host, lockFile string, env ...string) (*benchAgent, error) {
	port, err := testharness.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, d.Args(addr, "--log.format", "json")...)
	cmd.Env = append(append(lpBaseEnv(host, lockFile), "LAYERPROBE_TEST_FIRST_CYCLE_DELAY=24h"), env...)
	p, err := testharness.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	a := &benchAgent{Proc: p, base: "http://" + addr, http: &http.Client{Timeout: 30 * time.Second}, started: time.Now()}
	if err := testharness.WaitHTTP(ctx, a.base+"/readyz", time.Minute, a.Done()); err != nil {
		a.stop()
		return nil, fmt.Errorf("agent at start: %w\n%s", err, testharness.Tail(a.Log.String(), 30))
	}
	return a, nil
}

// stop ends the agent with SIGTERM (it stops fio and removes its probe
// container) and SIGKILL after a minute.
func (a *benchAgent) stop() { a.Stop(time.Minute) }

func (a *benchAgent) saveLog(path string) {
	_ = os.WriteFile(path, []byte(a.Log.String()), 0o600)
}

func (a *benchAgent) getJSON(ctx context.Context, path string, v any) error {
	return testharness.GetJSON(ctx, a.http, a.base+path, v)
}

// scrape returns the series of /metrics.
func (a *benchAgent) scrape(ctx context.Context) (testharness.Metrics, error) {
	_, ms, err := testharness.Scrape(ctx, a.http, a.base+"/metrics")
	return ms, err
}

// trigger starts a cycle: POST /api/v1/cycles until it is accepted. 409
// (a cycle, or its confirmation, still runs) and 429 (the trigger's rate
// limit) are waited out.
func (a *benchAgent) trigger(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/api/v1/cycles", nil)
		if err != nil {
			return fmt.Errorf("trigger: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+agentToken)
		resp, err := a.http.Do(req)
		if err != nil {
			return fmt.Errorf("trigger: %w", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted:
			return nil
		case http.StatusConflict, http.StatusTooManyRequests:
		default:
			return fmt.Errorf("trigger: %s: %s", resp.Status, b)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("trigger: still %s after 10 minutes", resp.Status)
		}
		if err := a.pause(ctx); err != nil {
			return err
		}
	}
}

// pause waits half a second between polls, and fails when ctx ends or the
// agent exits meanwhile.
func (a *benchAgent) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.Done():
		return fmt.Errorf("agent exited:\n%s", testharness.Tail(a.Log.String(), 30))
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

// cycleOutcome is one triggered cycle with its confirmation, if any.
type cycleOutcome struct {
	cycles     []api.CycleDetail // the measurement cycle first
	regression map[string]float64
}

// runCycle triggers one cycle and waits until the agent has published its
// outcome and that of the confirmation cycle a suspicion starts. The agent
// publishes its metrics as soon as a cycle is stored, so a change of
// layerprobe_cycles_total says only that the triggered cycle is over; its
// confirmation, if the detector became suspicious, follows it. The
// verdict is final once no target's detector is confirming and no cycle
// after the triggered one still runs (idle); layerprobe_fsync_regression
// is read then.
func (a *benchAgent) runCycle(ctx context.Context, timeout time.Duration) (*cycleOutcome, error) {
	fams, err := a.scrape(ctx)
	if err != nil {
		return nil, err
	}
	before := fams.Sum("layerprobe_cycles_total")
	var listed api.CyclesResponse
	if err := a.getJSON(ctx, "/api/v1/cycles?limit=1", &listed); err != nil {
		return nil, err
	}
	var lastID int64
	if len(listed.Cycles) > 0 {
		lastID = listed.Cycles[0].ID
	}
	if err := a.trigger(ctx); err != nil {
		return nil, err
	}
	// The detector's phase turns confirming before the triggered cycle is
	// stored and stays so until the confirmation's verdict, so there is no
	// moment between the two cycles at which this wait would end early.
	deadline := time.Now().Add(timeout)
	for {
		if err := a.pause(ctx); err != nil {
			return nil, err
		}
		fams, err = a.scrape(ctx)
		if err != nil {
			return nil, err
		}
		if fams.Sum("layerprobe_cycles_total") > before {
			idle, err := a.idle(ctx, lastID)
			if err != nil {
				return nil, err
			}
			if idle {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cycle and its confirmation not over within %s:\n%s", timeout, testharness.Tail(a.Log.String(), 20))
		}
	}
	// Read again once idle: the verdict is published just after the last
	// cycle is stored.
	if fams, err = a.scrape(ctx); err != nil {
		return nil, err
	}
	out := &cycleOutcome{regression: fams.ByLabel("layerprobe_fsync_regression", "target")}
	if err := a.getJSON(ctx, "/api/v1/cycles?limit=10", &listed); err != nil {
		return nil, err
	}
	// Newest first; this run's cycles are the ones after lastID.
	for i := len(listed.Cycles) - 1; i >= 0; i-- {
		c := listed.Cycles[i]
		if c.ID <= lastID {
			continue
		}
		var d api.CycleDetail
		if err := a.getJSON(ctx, fmt.Sprintf("/api/v1/cycles/%d", c.ID), &d); err != nil {
			return nil, err
		}
		out.cycles = append(out.cycles, d)
	}
	if len(out.cycles) == 0 || out.cycles[0].Trigger != "api" {
		return nil, fmt.Errorf("no triggered cycle after cycle %d: %+v", lastID, listed.Cycles)
	}
	return out, nil
}

// idle reports whether no target's detector is confirming a suspicion and
// no cycle after cycle lastID still runs.
func (a *benchAgent) idle(ctx context.Context, lastID int64) (bool, error) {
	var engines api.EnginesResponse
	if err := a.getJSON(ctx, "/api/v1/engines", &engines); err != nil {
		return false, err
	}
	for _, e := range engines.Engines {
		for _, d := range e.Detector {
			if d.Phase == "confirming" {
				return false, nil
			}
		}
	}
	var listed api.CyclesResponse
	if err := a.getJSON(ctx, "/api/v1/cycles?limit=10", &listed); err != nil {
		return false, err
	}
	for _, c := range listed.Cycles {
		if c.ID > lastID && c.Result == "running" {
			return false, nil
		}
	}
	return true, nil
}

// events parses the detector events out of the agent's JSON log.
func (a *benchAgent) events() []eventObs {
	var out []eventObs
	sc := bufio.NewScanner(strings.NewReader(a.Log.String()))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l struct {
			Time    string   `json:"time"`
			Msg     string   `json:"msg"`
			Target  string   `json:"target"`
			Targets []string `json:"targets"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case strings.HasPrefix(l.Msg, "fsync regression suspected"):
			out = append(out, eventObs{Time: l.Time, Event: "suspected", Targets: l.Targets})
		case l.Msg == "fsync regression confirmed":
			out = append(out, eventObs{Time: l.Time, Event: "confirmed", Targets: []string{l.Target}})
		case l.Msg == "fsync regression over":
			out = append(out, eventObs{Time: l.Time, Event: "recovered", Targets: []string{l.Target}})
		}
	}
	return out
}

// seriesRun records the cycles of one agent into an agentSeries; phase
// labels them.
type seriesRun struct {
	agent   *benchAgent
	phase   string
	timeout time.Duration
}

// one runs a measurement cycle (with its confirmation) and appends it to s.
func (r seriesRun) one(ctx context.Context, s *agentSeries, index int) (*cycleOutcome, error) {
	o, err := r.agent.runCycle(ctx, r.timeout)
	if err != nil {
		return nil, err
	}
	for i, c := range o.cycles {
		co := cycleObs{ID: c.ID, Trigger: c.Trigger, Index: index, Phase: r.phase, Result: c.Result, Reason: c.Reason,
			StopReason: string(c.StopReason), StartedAt: c.StartedAt.UTC().Format(time.RFC3339), DurationSeconds: c.DurationSeconds,
			Rounds: c.Rounds, BytesWritten: c.BytesWritten}
		if i == 0 {
			co.Regression = o.regression
		}
		co.Published = publishedOf(c.Results)
		s.Cycles = append(s.Cycles, co)
		s.Rounds = append(s.Rounds, roundsOf(c.ID, c.Samples)...)
	}
	return o, nil
}

// publishedOf keeps the headline overhead of every target and workload the
// agent published after a cycle (over its window of recent rounds), with
// its interval.
func publishedOf(rs []measure.Result) map[string]measure.Overhead {
	out := map[string]measure.Overhead{}
	for _, r := range rs {
		if o, ok := r.Overhead[measure.HeadlineMetric(r.Workload)]; ok && !math.IsNaN(o.Ratio) && !math.IsInf(o.Ratio, 0) {
			out[string(r.Target)+"/"+string(r.Workload)] = o
		}
	}
	return out
}

// roundsOf pairs every target's headline figure with the host's in the
// same round. Rounds without both figures are left out.
func roundsOf(cycleID int64, samples []measure.Sample) []roundObs {
	type key struct {
		round    int
		workload measure.Workload
	}
	host := map[key]float64{}
	for _, s := range samples {
		if s.Target == "host" && s.OK() {
			host[key{s.Round, s.Workload}] = measure.MetricValue(measure.HeadlineMetric(s.Workload), s.JobResult)
		}
	}
	var out []roundObs
	for _, s := range samples {
		if s.Target == "host" || !s.OK() {
			continue
		}
		m := measure.HeadlineMetric(s.Workload)
		h, ok := host[key{s.Round, s.Workload}]
		v := measure.MetricValue(m, s.JobResult)
		if !ok || !(h > 0) || !(v > 0) || math.IsInf(h, 0) || math.IsInf(v, 0) {
			continue
		}
		out = append(out, roundObs{CycleID: cycleID, Round: s.Round, Target: string(s.Target), Workload: string(s.Workload),
			Metric: m, Host: h, Value: v})
	}
	return out
}
