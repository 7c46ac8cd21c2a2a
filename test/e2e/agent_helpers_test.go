package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentProc is a running `layerprobe agent`.
type agentProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	log  *bytes.Buffer
	done chan struct{}
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
	s := &agentSetup{host: host, dir: dir, stateDir: filepath.Join(dir, "state"), port: freePort(t),
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{t: t, cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", s.port), log: &log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(a.done) }()
	t.Cleanup(func() {
		select {
		case <-a.done:
		default:
			_ = cmd.Process.Kill()
			<-a.done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(log.String(), 60))
		}
	})
	if !wait {
		return a
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a
			}
		}
		select {
		case <-a.done:
			t.Fatalf("agent exited at start:\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not answer /healthz within 30s:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (a *agentProc) stop() (int, time.Duration) {
	a.t.Helper()
	start := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		a.t.Fatalf("agent did not exit within 30s of SIGTERM")
	}
	return a.cmd.ProcessState.ExitCode(), time.Since(start)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
		case <-a.done:
			t.Fatalf("agent exited")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sample is one exposed series.
type sample struct {
	labels map[string]string
	value  float64
}

// scrape returns the raw exposition and the parsed layerprobe_ series.
func (a *agentProc) scrape(t *testing.T) (string, map[string][]sample) {
	t.Helper()
	resp, err := http.Get(a.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), parseExposition(string(b))
}

// parseExposition parses the text format's sample lines (enough for the
// labels layerprobe uses: no escaped quotes in values).
func parseExposition(s string) map[string][]sample {
	out := map[string][]sample{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = strings.Trim(v, `"`)
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			name, rest = f[0], f[1]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], sample{labels, v})
	}
	return out
}

func splitLabels(s string) []string {
	var out []string
	inQ := false
	start := 0
	for i, r := range s {
		switch {
		case r == '"':
			inQ = !inQ
		case r == ',' && !inQ:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// find returns the value of the series with these labels (a subset match).
func find(series map[string][]sample, name string, want map[string]string) (float64, bool) {
	for _, s := range series[name] {
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return s.value, true
		}
	}
	return 0, false
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
