package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// agentProc is a running `layerprobe agent`.
type agentProc struct {
	*testharness.Proc
	t    *testing.T
	base string // http://127.0.0.1:PORT
}

// agentSetup is what several agent runs of one test share.
type agentSetup struct {
	testharness.AgentFiles
	host  string
	token string
	port  int
}

func newAgentSetup(t *testing.T, host, configYAML string) *agentSetup {
	t.Helper()
	const token = "e2e-token-0123456789abcdef"
	return &agentSetup{AgentFiles: testharness.MustWriteAgentFiles(t, configYAML, token), host: host, token: token,
		port: testharness.MustFreePort(t)}
}

// start runs the agent with extra environment and waits until it answers.
func (s *agentSetup) start(t *testing.T, env ...string) *agentProc {
	t.Helper()
	return s.startWith(t, nil, true, env...)
}

// startWith runs the agent with extra flags; wait says whether to wait for
// /healthz over plain HTTP.
func (s *agentSetup) startWith(t *testing.T, flags []string, wait bool, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(binary, s.Args(fmt.Sprintf("127.0.0.1:%d", s.port), append([]string{"--log.level", "debug"}, flags...)...)...)
	cmd.Env = append(lpEnv(t, s.host), env...)
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	a := &agentProc{Proc: p, t: t, base: fmt.Sprintf("http://127.0.0.1:%d", s.port)}
	t.Cleanup(func() {
		a.Kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", testharness.Tail(a.Log.String(), 60))
		}
	})
	if !wait {
		return a
	}
	if err := testharness.WaitHTTP(context.Background(), a.base+"/healthz", 30*time.Second, a.Done()); err != nil {
		t.Fatalf("agent at start: %v\n%s", err, a.Log.String())
	}
	return a
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (a *agentProc) stop() (int, time.Duration) {
	a.t.Helper()
	start := time.Now()
	code, inTime := a.Stop(30 * time.Second)
	if !inTime {
		a.t.Fatalf("agent did not exit within 30s of SIGTERM")
	}
	return code, time.Since(start)
}

// apiCycle is a listed cycle.
type apiCycle = api.Cycle

func (a *agentProc) api() testharness.API { return testharness.API{Base: a.base} }

func (a *agentProc) cycles(t *testing.T) []apiCycle { return a.api().Cycles(t) }

func (a *agentProc) getJSON(t *testing.T, path string, v any) { a.api().GetJSON(t, path, v) }

// waitCycles waits until at least n cycles with the result exist and, for
// successful ones, until /metrics has them too: the agent stores a cycle
// an instant before it rebuilds the metrics snapshot.
func (a *agentProc) waitCycles(t *testing.T, result string, n int, timeout time.Duration) []apiCycle {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cs := a.cycles(t)
		count := 0
		for _, c := range cs {
			if c.Result == result {
				count++
			}
		}
		if count >= n && (result != "ok" || a.published(t, cs)) {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d cycles with result %s, want %d; cycles: %+v", timeout, count, result, n, cs)
		}
		select {
		case <-a.Done():
			t.Fatalf("agent exited")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// published reports whether /metrics has the newest successful cycle of
// every engine and mode in cs: its last-success time is at least the
// cycle's end.
func (a *agentProc) published(t *testing.T, cs []apiCycle) bool {
	t.Helper()
	newest := map[[2]string]time.Time{}
	for _, c := range cs {
		k := [2]string{c.Engine, string(c.Mode)}
		if c.Result == "ok" && c.FinishedAt.After(newest[k]) {
			newest[k] = c.FinishedAt
		}
	}
	_, series := a.scrape(t)
	for k, end := range newest {
		v, ok := series.Find("layerprobe_last_success_timestamp_seconds", map[string]string{"engine": k[0], "mode": k[1]})
		if !ok || v < float64(end.UnixNano())/1e9-0.001 {
			return false
		}
	}
	return true
}

// scrape returns the raw exposition and its series.
func (a *agentProc) scrape(t *testing.T) (string, testharness.Metrics) { return a.api().Scrape(t) }

func (a *agentProc) do(t *testing.T, method, path, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, a.base+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}
