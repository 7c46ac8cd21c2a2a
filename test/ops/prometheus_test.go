package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// promServer is a running Prometheus (Debian's package) with its own
// storage directory and port.
type promServer struct {
	*testharness.Proc
	base string
}

// startPrometheus writes a configuration that scrapes the agents at
// agentAddrs every 2s as job "layerprobe" (the job name of the shipped
// scrape configurations, with their default honor_labels) in cluster "ops"
// (as a multi-cluster setup labels targets; the dashboards' cluster variable
// lists it) and evaluates the shipped rules every 2s, and starts Prometheus
// on it.
func startPrometheus(t *testing.T, agentAddrs ...string) *promServer {
	t.Helper()
	bin := tool(t, "prometheus")
	dir := memDir(t)
	quoted := make([]string, len(agentAddrs))
	for i, a := range agentAddrs {
		quoted[i] = strconv.Quote(a)
	}
	// The shipped rules and the optional raw ratios, with the fleet
	// groups' own interval (5m, for figures that change once a cycle)
	// brought down to the 2s of the others: their series would otherwise
	// be missing for up to 5 minutes.
	var ruleFiles []string
	for _, name := range []string{rulesFile, rawRatioFile} {
		shipped, err := os.ReadFile(repoPath(name))
		if err != nil {
			t.Fatal(err)
		}
		rules := filepath.Join(dir, filepath.Base(name))
		fast := rulesEvery(shipped, 2*time.Second)
		if err := os.WriteFile(rules, fast, 0o600); err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, rules)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files: [%s]
scrape_configs:
  - job_name: layerprobe
    static_configs:
      - targets: [%s]
        labels: {cluster: ops}
`, strings.Join(ruleFiles, ", "), strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testharness.MustFreePort(t)
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := &promServer{base: fmt.Sprintf("http://127.0.0.1:%d", port), Proc: proc}
	t.Cleanup(func() {
		p.Stop(20 * time.Second)
		if t.Failed() {
			t.Logf("prometheus log:\n%s", testharness.Tail(p.Log.String(), 40))
		}
	})
	if err := testharness.WaitHTTP(context.Background(), p.base+"/-/ready", 30*time.Second, p.Done()); err != nil {
		t.Fatalf("prometheus: %v\n%s", err, p.Log.String())
	}
	return p
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// get calls Prometheus' HTTP API and decodes data into v; it returns the
// API's error instead of failing when the query itself is bad.
func (p *promServer) get(t testing.TB, path string, q url.Values, v any) error {
	t.Helper()
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", resp.Status, env.Error)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("GET %s: decode: %v: %s", path, err, env.Data)
	}
	return nil
}

// query runs an instant query; a bad query fails the test.
func (p *promServer) query(t testing.TB, expr string) []promSample {
	t.Helper()
	res, err := p.tryQuery(t, expr)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	return res
}

func (p *promServer) tryQuery(t testing.TB, expr string) ([]promSample, error) {
	t.Helper()
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data)
	return data.Result, err
}

// tryQueryAt runs an instant query evaluated at ts.
func (p *promServer) tryQueryAt(t testing.TB, expr string, ts time.Time) ([]promSample, error) {
	t.Helper()
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.get(t, "/api/v1/query", url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)}}, &data)
	return data.Result, err
}

func (p *promServer) tryQueryRange(t testing.TB, expr string, start, end time.Time, step time.Duration) ([]promSample, error) {
	t.Helper()
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.get(t, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(end.Unix())}, "step": {step.String()}}, &data)
	return data.Result, err
}

// dashboardAgentConfig: the smoke profile, four rounds a cycle with no
// byte cap (two cycles make 8 round pairs: 6 are needed before an interval
// is published, and a round lost on a loaded disk must not withhold one),
// seven cold rounds (one cold cycle publishes its interval, with a round to
// spare), a window of 8 rounds (the window keeps the last rounds whether or
// not they succeeded: at 6, the spare rounds fell outside it and one lost
// round in the last six withheld the interval) and every busy-host guard
// off, so that cycles run whatever the CI machine does; a daily budget, so
// that the budget series exist.
const dashboardAgentConfig = `profile: smoke
agent:
  interval: 1h
  jitter: 0
  cold_rounds: 7
  window_rounds: 8
  daily_byte_budget: 16GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
  budget:
    rounds: 4
    max_bytes: 0
`

// allowedEmpty lists the dashboard queries that may return no data from a
// healthy agent after two successful cycles, with the reason. Anything else
// that returns nothing fails the test; an entry that no longer names a
// query fails it too.
var allowedEmpty = map[string]string{
	"layerprobe-fleet/Firing layerprobe alerts per host/A": "ALERTS holds only pending and firing alerts: a healthy agent has none",
	// The fleet's exceptions: a single healthy agent has none of them.
	// TestFleetInPrometheus answers them from a fleet that has.
	"layerprobe-fleet/Hosts with an fsync regression in the last day/A":        "no regression flagged",
	"layerprobe-fleet/Hosts with an fsync regression in the last day/B":        "no regression flagged",
	"layerprobe-fleet/Hosts with an fsync regression in the last day/C":        "no regression flagged",
	"layerprobe-fleet/Confirmed fsync regressions per storage driver/A":        "no regression flagged",
	"layerprobe-fleet/Largest rise of fsync p99 overhead in a day ($target)/A": "less than a day of history",
	"layerprobe-fleet/Agents that stopped reporting/A":                         "the agent reports",
	"layerprobe-fleet/Databases in writable layers, by kind/A":                 "the test's containers keep no database in their layer",
	"layerprobe-fleet/Hosts with databases in their writable layer/A":          "the test's containers keep no database in their layer",
}

// TestPrometheusScrapesAgent: a real Prometheus scrapes a real agent that
// measures a private overlay2 dockerd, evaluates the shipped rules, and
// answers every query of every dashboard panel and variable with data.
//
// The agent runs with the privileges of the systemd unit: uid 0, an empty
// capability bounding set and no_new_privs (setpriv), which proves the
// unit's claim that no capability is needed, for all four targets.
func TestPrometheusScrapesAgent(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	setpriv := tool(t, "setpriv")
	bin := agentBinary(t)
	unit := unitDirectives(t, repoPath(unitFile))
	if got := unit["Service.CapabilityBoundingSet"]; len(got) != 1 || got[0] != "" || unit["Service.NoNewPrivileges"][0] != "yes" {
		t.Fatalf("the unit's privileges changed (CapabilityBoundingSet=%v); update this test's setpriv arguments", got)
	}

	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	// A user's container with a few MiB in its writable layer, for the
	// advisor's panels (built here: nothing is pulled). The advisor then
	// also runs with the unit's privileges.
	docker := testharness.NewDocker(d.Host)
	docker.ImportWorkload(t, "lp-ops/writer:1")
	docker.RunContainer(t, "lp-writer", "lp-ops/writer:1", []string{"write", "/data/blob", "4MiB"})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	token := "ops-e2e-token-0123456789abcdef"
	if err := os.WriteFile(cfg, []byte(dashboardAgentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentAddr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))

	// Prometheus first, so that it sees the counters move.
	prom := startPrometheus(t, agentAddr)

	cmd := exec.Command(setpriv, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--",
		bin, "agent", "--config", cfg, "--web.listen-address", agentAddr,
		"--api-token-file", filepath.Join(dir, "token"), "--state-dir", filepath.Join(dir, "state"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DOCKER_HOST=" + d.Host, "LAYERPROBE_LOCK_FILE=" + filepath.Join(dir, "layerprobe.lock")}
	agent, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		agent.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("agent log:\n%s", testharness.Tail(agent.Log.String(), 40))
		}
	})
	checkNoCapabilities(t, cmd.Process.Pid)

	// First cycle, then a second one triggered through the API, so that the
	// counters move while Prometheus watches.
	testharness.Eventually(t, 3*time.Minute, time.Second, "first successful cycle in Prometheus", func() (bool, string) {
		r := prom.query(t, `layerprobe_cycles_total{mode=~"steady|", result="ok"} >= 1`)
		return len(r) == 1, fmt.Sprint(r)
	})
	// The agent's own first cold cycle may be running by now (it starts a
	// minute after the first steady cycle, which an adaptive cycle on a
	// busy disk outlasts): try again while another cycle runs (409).
	testharness.Eventually(t, 10*time.Minute, 2*time.Second, "second steady cycle started", func() (bool, string) {
		switch code := triggerCycle(t, agentAddr, token, ""); code {
		case http.StatusAccepted:
			return true, ""
		case http.StatusConflict:
			return false, "another cycle runs"
		default:
			t.Fatalf("POST /api/v1/cycles: status %d", code)
			return false, ""
		}
	})
	testharness.Eventually(t, 3*time.Minute, time.Second, "second successful cycle in Prometheus", func() (bool, string) {
		r := prom.query(t, `layerprobe_cycles_total{mode=~"steady|", result="ok"} >= 2`)
		return len(r) == 1, fmt.Sprint(r)
	})
	if agentHasColdProbe {
		// A cold cycle (fresh containers, fsync and copy-up), so that the
		// cold panels and the cold alert have series to read. The agent
		// starts its first one by itself a minute after the first steady
		// cycle; start one through the API unless it has, trying again
		// while another cycle runs (409).
		triggered := false
		testharness.Eventually(t, 6*time.Minute, 2*time.Second, "successful cold cycle in Prometheus", func() (bool, string) {
			r := prom.query(t, `layerprobe_cycles_total{mode="cold", result="ok"} >= 1`)
			if len(r) == 1 {
				return true, ""
			}
			if !triggered {
				switch code := triggerCycle(t, agentAddr, token, "cold"); code {
				case http.StatusAccepted:
					triggered = true
				case http.StatusConflict:
				default:
					t.Fatalf("POST /api/v1/cycles?mode=cold: status %d", code)
				}
			}
			return false, fmt.Sprintf("cold cycle triggered through the API: %v; %v", triggered, r)
		})
	}
	// A few more scrapes and rule evaluations after the last change.
	time.Sleep(8 * time.Second)

	t.Run("workload label arrives as workload", func(t *testing.T) {
		if r := prom.query(t, `layerprobe_overhead_ratio{mode=~"steady|", workload="fsync", metric="fsync_p99"}`); len(r) != 3 {
			t.Errorf("fsync_p99 overheads with workload=fsync: %d series, want 3 (container, bind, volume)", len(r))
		}
		// The agent has no job label of its own: the scrape job's stays
		// whatever honor_labels says, and nothing becomes exported_job.
		if r := prom.query(t, `{__name__=~"layerprobe_.+", exported_job!=""}`); len(r) != 0 {
			t.Errorf("%d series with exported_job: the agent exposes a job label", len(r))
		}
		if r := prom.query(t, `count(layerprobe_overhead_ratio{job!="layerprobe"})`); len(r) != 0 {
			t.Errorf("overhead series outside the scrape job: %v", r)
		}
	})
	if agentHasColdProbe {
		t.Run("results carry their mode", func(t *testing.T) {
			if r := prom.query(t, `layerprobe_overhead_ratio{mode="steady", workload="fsync", metric="fsync_p99"}`); len(r) != 3 {
				t.Errorf("steady fsync_p99 overheads: %d series, want 3 (container, bind, volume)", len(r))
			}
			if r := prom.query(t, `layerprobe_overhead_ratio{mode="cold", workload="fsync", metric="fsync_p99"}`); len(r) != 1 {
				t.Errorf("cold fsync_p99 overheads: %d series, want 1 (container)", len(r))
			}
			if r := prom.query(t, `layerprobe_overhead_ratio{mode=""}`); len(r) != 0 {
				t.Errorf("%d overhead series without a mode", len(r))
			}
		})
	}
	t.Run("rules", func(t *testing.T) { checkRulesLoaded(t, prom) })
	t.Run("dashboards", func(t *testing.T) { checkDashboardQueries(t, prom, agentAddr) })
}

// triggerCycle asks the REST API for a cycle (mode "" = the default,
// steady) and returns the status: 202 when it started.
func triggerCycle(t *testing.T, agentAddr, token, mode string) int {
	t.Helper()
	u := "http://" + agentAddr + "/api/v1/cycles"
	if mode != "" {
		u += "?mode=" + url.QueryEscape(mode)
	}
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkNoCapabilities: the agent process runs with no capability at all and
// with no_new_privs, as the systemd unit prescribes.
func checkNoCapabilities(t *testing.T, pid int) {
	t.Helper()
	var status string
	testharness.Eventually(t, 10*time.Second, 50*time.Millisecond, "agent process started", func() (bool, string) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		status = string(b)
		return err == nil && strings.Contains(status, "layerprobe"), fmt.Sprint(err)
	})
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		if !strings.Contains(status, want) {
			t.Errorf("agent process status lacks %q:\n%s", want, status)
		}
	}
}

// sensitized turns each alert's expression into one that selects the live,
// healthy series (by a threshold a healthy agent passes), to prove that the
// expression's selectors match what a real agent exposes through a real
// Prometheus: a misspelt label or metric would select nothing. The regexp
// old is replaced by new; n is how many series the result must select.
var sensitized = map[string]struct {
	old, new string
	n        int
}{
	"LayerprobeFsyncRegression":   {`== 1`, `>= 0`, 3},
	"LayerprobeFsyncOverheadHigh": {`layerprobe:fsync_overhead_alert_level:ratio`, `(layerprobe:fsync_overhead_alert_level:ratio - 100)`, 2},
	"LayerprobeAgentStale":        {`> 54000`, `> -1`, 1},
	"LayerprobeCyclesFailing":     {`result="failed"`, `result="ok"`, 1},
	"LayerprobeBudgetExhausted":   {`> 0`, `>= 0`, 1},
	// The test's agent joins (value 1).
	"LayerprobeHostArmOutsideCPUCgroup": {`== 0\s*$`, `>= 0`, 1},
	"LayerprobeSlowStorageDriver":       {`vfs\|devicemapper\|aufs`, `overlay2`, 1},
	// The only engine has succeeded, so "never succeeded" has nothing to
	// select; its left-hand side (engines known to the agent) is checked.
	"LayerprobeAgentNeverSucceeded": {`\s*unless on \(cluster, job, instance, engine\)\s*layerprobe_last_success_timestamp_seconds\{mode=~"steady\|"\}\s*$`, ``, 1},
	// The container's cold fsync overhead, whatever its level.
	"LayerprobeColdFsyncOverheadHigh": {`\) > 1\s*$`, `) > -100`, 1},
	// The test's only user container is no database: 0 in the layer.
	"LayerprobeDatabaseInWritableLayer": {`\) > 0\s*$`, `) >= 0`, 1},
}

// measuredAlerts fire on a measured overhead's level: whether the test's
// real agent reaches it depends on this disk under the suite's load (one
// loaded run of smoke rounds put the container's fsync p99 interval above
// 90%), so only their selectors are checked on it.
var measuredAlerts = map[string]struct{}{
	"LayerprobeFsyncOverheadHigh":     {},
	"LayerprobeColdFsyncOverheadHigh": {},
}

// agentHasColdProbe: the agent built from this tree publishes the cold
// probe's results (mode="cold", copy-up, reflink), so TestPrometheusScrapesAgent
// runs a cold cycle and requires every cold panel and the cold alert's
// selectors to read real series. Setting it to false runs steady cycles only,
// for an agent built without the cold probe; TestSyntheticAgentsInPrometheus
// covers the cold queries with synthetic series either way.
const agentHasColdProbe = true

func checkRulesLoaded(t *testing.T, prom *promServer) {
	var data struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				State     string `json:"state"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := prom.get(t, "/api/v1/rules", nil, &data); err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			loaded = append(loaded, r.Name)
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
			}
			if r.Type == "alerting" && r.State == "firing" {
				t.Errorf("alert %s fires for a healthy agent", r.Name)
			}
		}
	}
	var want []string
	for _, r := range loadRules(t) {
		want = append(want, r.Alert+r.Record)
		if r.Alert == "" {
			continue
		}
		// The expression selects nothing for a healthy agent after two
		// successful cycles... except where that depends on what the disk
		// measured under the suite's load (TestSyntheticAgentsInPrometheus
		// covers those with known values)...
		if res := prom.query(t, r.Expr); len(res) != 0 {
			if _, measured := measuredAlerts[r.Alert]; measured {
				t.Logf("alert %s: expression selects %v: this machine measured an overhead above the alert level", r.Alert, res)
			} else {
				t.Errorf("alert %s: expression selects %v for a healthy agent", r.Alert, res)
			}
		}
		// ...and its selectors do match the agent's series.
		if _, cold := coldAlerts[r.Alert]; cold && !agentHasColdProbe {
			continue
		}
		s, ok := sensitized[r.Alert]
		if !ok {
			t.Errorf("alert %s: no sensitized variant in this test", r.Alert)
			continue
		}
		re := regexp.MustCompile(s.old)
		if !re.MatchString(r.Expr) {
			t.Errorf("alert %s: %q not in its expression %q; update the test", r.Alert, s.old, r.Expr)
			continue
		}
		changed := re.ReplaceAllLiteralString(r.Expr, s.new)
		if res := prom.query(t, changed); len(res) != s.n {
			t.Errorf("alert %s: %q selects %d series, want %d: the selectors do not match the agent's series", r.Alert, changed, len(res), s.n)
		}
	}
	slices.Sort(want)
	slices.Sort(loaded)
	if !slices.Equal(loaded, want) {
		t.Errorf("Prometheus loaded rules %v, want %v", loaded, want)
	}
	// Every recording rule has data, but those of the fleet's exceptions.
	for r := range recordingRuleNames(t) {
		res := prom.query(t, r)
		switch why := emptyRecordings[r]; {
		case len(res) == 0 && why == "":
			t.Errorf("recording rule %s has no data", r)
		case len(res) > 0 && why != "":
			t.Logf("recording rule %s has data although listed as empty for a healthy agent (%s)", r, why)
		}
	}
}

// emptyRecordings are the recording rules that record nothing for one
// healthy agent, with the reason. TestFleetInPrometheus has data for each.
var emptyRecordings = map[string]string{
	"host:layerprobe_node_uname:info":                            "no node_exporter here",
	"instance_engine_target:layerprobe_fsync_regression:flagged": "no regression flagged",
	"instance_engine_target:layerprobe_fsync_regression:max1d":   "no regression flagged",
	"job_driver:layerprobe_fsync_regression:count":               "no regression flagged",
	"instance_engine_target:layerprobe_fsync_overhead:delta1d":   "less than a day of history",
	"instance:layerprobe_agent:stopped_reporting":                "the agent reports",
	"job_database:layerprobe_container_database_in_layer:count":  "the test's containers keep no database in their layer",
}

// grafanaSubstitutions are the values the test gives Grafana's variables:
// what selecting "All" (or the one agent) in the drop-downs sends.
func grafanaSubstitutions(uid, agentAddr string) map[string]string {
	s := map[string]string{
		"$__rate_interval": "20s",
		"$__interval":      "4s",
		"$__range":         "10m",
		"$cluster":         ".*",
		"$job":             "layerprobe",
		"$instance":        ".+",
		"$engine":          ".+",
		"$workload":        ".+",
		"$target":          ".+",
	}
	switch uid {
	case "layerprobe-fleet":
		s["$target"] = "container" // a custom variable with one value
	case "layerprobe-host":
		s["$instance"] = grafanaRegexValue(agentAddr)
	}
	return s
}

// grafanaRegexValue is a single variable value, regex-escaped the way
// Grafana does it inside a PromQL string literal (a backslash is written as
// two).
func grafanaRegexValue(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}

func substitute(expr string, subs map[string]string) string {
	keys := make([]string, 0, len(subs))
	for k := range subs {
		keys = append(keys, k)
	}
	// Longest first: $__range must not be eaten by a shorter name.
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		expr = strings.ReplaceAll(expr, k, subs[k])
	}
	return expr
}

func checkDashboardQueries(t *testing.T, prom *promServer, agentAddr string) {
	// Every metric name a dashboard uses is one Prometheus has from the agent.
	var names []string
	if err := prom.get(t, "/api/v1/label/__name__/values", nil, &names); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{"ALERTS": true} // Prometheus' own, see allowedEmpty
	for _, n := range names {
		live[n] = true
	}
	seen := map[string]bool{}
	queries := 0
	recorded := recordingRuleNames(t)
	for _, d := range loadDashboards(t) {
		subs := grafanaSubstitutions(d.UID, agentAddr)
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				checkVariableQuery(t, prom, d.UID, v, subs, agentAddr)
			}
		}
		for _, p := range d.dataPanels() {
			for _, tg := range p.Targets {
				key := d.UID + "/" + p.Title + "/" + tg.RefID
				seen[key] = true
				queries++
				expr := substitute(tg.Expr, subs)
				if strings.Contains(expr, "$") {
					t.Errorf("%s: unsubstituted variable in %q", key, expr)
					continue
				}
				ps, err := scanPromQL(tg.Expr)
				if err != nil {
					t.Errorf("%s: %v", key, err)
				}
				// Without a cold probe in the agent, cold results cannot be
				// here; TestSyntheticAgentsInPrometheus runs these queries.
				// The agent runs the lean default: a panel that needs the
				// detail may be empty, and then says so (g.needsDetail);
				// TestSyntheticAgentsInPrometheus serves every series.
				mayBeEmpty := allowedEmpty[key] != "" || !agentHasColdProbe && readsCold(ps) || strings.Contains(p.FieldConfig.Defaults.NoValue, "agent.metrics_detail")
				for _, s := range ps.selectors {
					// A fleet recording rule that selects nothing records no series.
					if !live[s.name] && !(coldMetrics[s.name] && !agentHasColdProbe) && !(recorded[s.name] && allowedEmpty[key] != "") {
						t.Errorf("%s: metric %s is not exposed by the agent (not in Prometheus)", key, s.name)
					}
				}
				var res []promSample
				if tg.Instant {
					res, err = prom.tryQuery(t, expr)
				} else {
					end := time.Now()
					res, err = prom.tryQueryRange(t, expr, end.Add(-3*time.Minute), end, 2*time.Second)
				}
				switch {
				case err != nil:
					t.Errorf("%s: Prometheus refuses %q: %v", key, expr, err)
				case len(res) == 0 && !mayBeEmpty:
					t.Errorf("%s: no data for %q", key, expr)
				case len(res) > 0 && allowedEmpty[key] != "":
					t.Logf("%s: has data although listed as allowed to be empty (%s)", key, allowedEmpty[key])
				}
			}
		}
	}
	for k := range allowedEmpty {
		if !seen[k] {
			t.Errorf("allowedEmpty names %s, which is no dashboard query", k)
		}
	}
	if queries < 40 {
		t.Errorf("ran only %d dashboard queries", queries)
	}
	t.Logf("ran %d dashboard queries against Prometheus", queries)
}

// expectedVariableValues are values each variable must offer.
func expectedVariableValues(name, agentAddr string) []string {
	switch name {
	case "cluster":
		return []string{"ops"}
	case "job":
		return []string{"layerprobe"}
	case "instance":
		return []string{agentAddr}
	case "engine":
		return []string{"default"}
	case "target":
		return []string{"bind", "container", "volume"}
	case "workload":
		return []string{"fsync", "randwrite", "seqwrite", "smallfiles"}
	}
	return nil
}

// checkVariableQuery runs a label_values(selector, label) variable query the
// way Grafana does (the label values API with a match[] selector).
func checkVariableQuery(t *testing.T, prom *promServer, uid string, v variable, subs map[string]string, agentAddr string) {
	m := labelValuesRe.FindStringSubmatch(v.queryString())
	if m == nil {
		t.Errorf("%s variable %s: query %q", uid, v.Name, v.queryString())
		return
	}
	var values []string
	if err := prom.get(t, "/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {substitute(m[1], subs)}}, &values); err != nil {
		t.Errorf("%s variable %s: %v", uid, v.Name, err)
		return
	}
	want := expectedVariableValues(v.Name, agentAddr)
	if want == nil {
		t.Errorf("%s variable %s: no expected values in this test", uid, v.Name)
	}
	slices.Sort(values)
	if !slices.Equal(values, want) {
		t.Errorf("%s variable %s: values %v, want %v", uid, v.Name, values, want)
	}
}

// TestSensitizedVariantsMatch: every alert has a sensitized variant whose
// pattern is in its expression, so that the end-to-end tests do not find
// out late that an expression changed.
func TestSensitizedVariantsMatch(t *testing.T) {
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		s, ok := sensitized[r.Alert]
		if !ok {
			t.Errorf("alert %s: no sensitized variant", r.Alert)
			continue
		}
		if !regexp.MustCompile(s.old).MatchString(r.Expr) {
			t.Errorf("alert %s: %q not in its expression %q", r.Alert, s.old, r.Expr)
		}
	}
}

// rulesEvery is a rule file with every group's interval set to d, for a
// test that cannot wait the groups' own (5m, 1h). The hourly group's
// records of the change since its previous evaluation read a window and
// an offset of the group's interval (hourlyRulesInterval), which follow.
func rulesEvery(rules []byte, d time.Duration) []byte {
	// Prometheus' own notation: time.Duration's "2m0s" is not PromQL.
	dur := fmt.Sprintf("%ds", int(d.Seconds()))
	out := regexp.MustCompile(`(?m)^(\s+interval:) \S+$`).ReplaceAll(rules, []byte("$1 "+dur))
	out = regexp.MustCompile(`(last_over_time\([a-z_:]+)\[1h\]( offset 1h)?\)`).ReplaceAllFunc(out, func(m []byte) []byte {
		m = bytes.Replace(m, []byte("[1h]"), []byte("["+dur+"]"), 1)
		return bytes.Replace(m, []byte("offset 1h"), []byte("offset "+dur), 1)
	})
	return out
}
