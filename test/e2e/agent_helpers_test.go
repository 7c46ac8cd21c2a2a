package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testharness"
)

// agentProc is a running `layerprobe agent`.
type agentProc struct {
	*testharness.Proc
	t    *testing.T
	base string // http://127.0.0.1:PORT
}

// agentSetup is what several agent runs of one test share.
type agentSetup struct {
	host     string
	dir      string
	config   string
	token    string
	stateDir string
	port     int
}

func newAgentSetup(t *testing.T, host, configYAML string) *agentSetup {
	t.Helper()
	dir := t.TempDir()
	s := &agentSetup{host: host, dir: dir, stateDir: filepath.Join(dir, "state"), port: testharness.MustFreePort(t),
		token: "e2e-token-0123456789abcdef"}
	s.config = filepath.Join(dir, "config.yml")
	if err := os.WriteFile(s.config, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
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
	args := append([]string{"agent", "--config", s.config,
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", s.port),
		"--api-token-file", filepath.Join(s.dir, "token"), "--state-dir", s.stateDir, "--log.level", "debug"}, flags...)
	cmd := exec.Command(binary, args...)
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

// apiCycle is the part of a listed cycle the tests look at.
type apiCycle struct {
	ID      int64  `json:"id"`
	Result  string `json:"result"`
	Reason  string `json:"reason"`
	Trigger string `json:"trigger"`
	Mode    string `json:"mode"`
	Rounds  int    `json:"rounds"`
}

func (a *agentProc) cycles(t *testing.T) []apiCycle {
	t.Helper()
	var body struct {
		Cycles []apiCycle `json:"cycles"`
	}
	a.getJSON(t, "/api/v1/cycles?limit=1000", &body)
	return body.Cycles
}

func (a *agentProc) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(a.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: decode: %v\n%s", path, err, b)
	}
}

// waitCycles waits until at least n cycles with the result exist.
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
		if count >= n {
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

// scrape returns the raw exposition and its series.
func (a *agentProc) scrape(t *testing.T) (string, testharness.Metrics) {
	t.Helper()
	raw, series, err := testharness.Scrape(context.Background(), http.DefaultClient, a.base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return raw, series
}

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
