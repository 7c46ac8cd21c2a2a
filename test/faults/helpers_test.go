package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// baseConfig: the smoke profile, one round per cycle, every busy-host
// guard off (so cycles run whatever the CI machine is doing), no free-space
// reserve and a long interval: the tests start cycles with POST.
const baseConfig = `profile: smoke
free_space:
  min_free_bytes: 0
  min_free_ratio: 0
agent:
  interval: 1h
  cold_interval: 0s
  jitter: 0
  rounds_per_cycle: 1
  window_rounds: 6
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
`

// testToken is the bearer token of every agent the tests start.
const testToken = "faults-token-0123456789abcdef"

// lpEnv points layerprobe at one private daemon, with the package's own
// host lock file (so parallel test packages do not wait on each other).
func lpEnv(host string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DOCKER_HOST=" + host, "LAYERPROBE_LOCK_FILE=" + filepath.Join(workDir, "layerprobe.lock")}
}

// agentSetup is what several agent processes of one test share: config,
// state directory, token file, port.
type agentSetup struct {
	testharness.AgentFiles
	host     string
	port     int
	logLevel string
	flags    []string // extra flags of `layerprobe agent`
}

func newAgentSetup(t *testing.T, host, configYAML string) *agentSetup {
	t.Helper()
	return &agentSetup{AgentFiles: testharness.MustWriteAgentFiles(t, configYAML, testToken), host: host,
		port: testharness.MustFreePort(t), logLevel: "debug"}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// agentProc is a running `layerprobe agent`.
type agentProc struct {
	*testharness.Proc
	base string // http://127.0.0.1:PORT
}

// start runs the agent with extra environment and waits until /healthz
// answers.
func (s *agentSetup) start(t *testing.T, env ...string) *agentProc {
	t.Helper()
	a := s.spawn(t, s.port, env...)
	a.waitHealthy(t)
	return a
}

// spawn starts the agent on port without waiting. Its cleanup kills it if
// the test has not stopped it, and shows its log when the test failed.
func (s *agentSetup) spawn(t *testing.T, port int, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(binary, s.Args(fmt.Sprintf("127.0.0.1:%d", port), append([]string{"--log.level", s.logLevel}, s.flags...)...)...)
	// Cycles start with POST only, unless the caller asks for the
	// scheduled first cycle with its own LAYERPROBE_TEST_FIRST_CYCLE_DELAY
	// (the last value of a duplicate variable wins).
	cmd.Env = append(append(lpEnv(s.host), "LAYERPROBE_TEST_FIRST_CYCLE_DELAY=1h"), env...)
	p, err := testharness.Start(cmd)
	must(t, err)
	a := &agentProc{Proc: p, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	t.Cleanup(func() {
		a.Kill()
		if t.Failed() || os.Getenv("LP_FAULTS_AGENT_LOG") != "" {
			t.Logf("agent (pid %d) log:\n%s", cmd.Process.Pid, testharness.Tail(a.Log.String(), 150))
		}
	})
	return a
}

func (a *agentProc) waitHealthy(t *testing.T) {
	t.Helper()
	if err := testharness.WaitHTTP(context.Background(), a.base+"/healthz", 30*time.Second, a.Done()); err != nil {
		t.Fatalf("agent at start: %v\n%s", err, a.Log.String())
	}
}

// stop sends SIGTERM and returns the exit code.
func (a *agentProc) stop(t *testing.T) int {
	t.Helper()
	code, inTime := a.Stop(30 * time.Second)
	if !inTime {
		t.Fatalf("agent did not exit within 30s of SIGTERM")
	}
	return code
}

// kill sends SIGKILL and waits for the process to be gone.
func (a *agentProc) kill(*testing.T) { a.Kill() }

// apiCycle is a listed cycle.
type apiCycle = api.Cycle

// apiSample is one fio execution of a cycle.
type apiSample struct {
	Round    int    `json:"round"`
	Target   string `json:"target"`
	Workload string `json:"workload"`
	Error    *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"error"`
}

func (a *agentProc) api() testharness.API { return testharness.API{Base: a.base} }

func (a *agentProc) cycles(t *testing.T) []apiCycle { return a.api().Cycles(t) }

func (a *agentProc) samples(t *testing.T, id int64) []apiSample {
	t.Helper()
	var body struct {
		Samples []apiSample `json:"samples"`
	}
	a.getJSON(t, fmt.Sprintf("/api/v1/cycles/%d", id), &body)
	return body.Samples
}

func (a *agentProc) getJSON(t *testing.T, path string, v any) { a.api().GetJSON(t, path, v) }

func (a *agentProc) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(a.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// metrics scrapes the agent's /metrics.
func (a *agentProc) metrics(t *testing.T) testharness.Metrics {
	_, ms := a.api().Scrape(t)
	return ms
}

// newCycle waits until the first cycle with an id above after has finished
// (any result but running) and returns it.
func (a *agentProc) newCycle(t *testing.T, after int64, timeout time.Duration) apiCycle {
	t.Helper()
	var got apiCycle
	testharness.WaitFor(t, timeout, fmt.Sprintf("the cycle after #%d finishes", after), func() bool {
		if !a.Running() {
			t.Fatalf("agent exited:\n%s", testharness.Tail(a.Log.String(), 40))
		}
		got = apiCycle{}
		for _, c := range a.cycles(t) {
			if c.ID > after && (got.ID == 0 || c.ID < got.ID) {
				got = c
			}
		}
		return got.ID != 0 && got.Result != "running"
	})
	return got
}

// runningCycle waits until a cycle runs and returns it.
func (a *agentProc) runningCycle(t *testing.T, timeout time.Duration) apiCycle {
	t.Helper()
	var got apiCycle
	testharness.WaitFor(t, timeout, "a cycle runs", func() bool {
		for _, c := range a.cycles(t) {
			if c.Result == "running" {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

// request sends one request and returns status, headers and body.
func (a *agentProc) request(t *testing.T, method, path string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	must(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// trigger starts a cycle with POST /api/v1/cycles. A 409 (the previous
// cycle is still finishing) is retried, a 429 (rate limit: 3 in a row, then
// one per 10 s) after its Retry-After, until timeout.
func (a *agentProc) trigger(t *testing.T, timeout time.Duration) {
	t.Helper()
	testharness.WaitFor(t, timeout, "POST /api/v1/cycles is accepted", func() bool {
		code, h, body := a.request(t, "POST", "/api/v1/cycles", bearer(testToken), "")
		switch code {
		case http.StatusAccepted:
			return true
		case http.StatusConflict:
			return false
		case http.StatusTooManyRequests:
			s, _ := strconv.Atoi(h.Get("Retry-After"))
			time.Sleep(time.Duration(max(s, 1)) * time.Second)
			return false
		}
		t.Fatalf("POST /api/v1/cycles: %d %s", code, body)
		return false
	})
}

// --- the daemon, seen without layerprobe's own code -------------------------

// dockerAPI talks to a daemon's socket directly.
type dockerAPI struct{ *testharness.Docker }

func newDockerAPI(host string) dockerAPI { return dockerAPI{testharness.NewDocker(host)} }

func (d dockerAPI) do(t *testing.T, method, path string, v any) { d.Do(t, method, path, v) }

func (d dockerAPI) labelled(t *testing.T) testharness.Labelled { return d.Labelled(t) }

// jobFileRE matches the job files the probe names (fio.RoundFileName:
// "<job>.dat", then "<job>.<k>.dat" for a file per round) and the fake
// fio's file ("<job>.<jobnum>.<filenum>", fio's own naming).
var jobFileRE = regexp.MustCompile(`^((seqwrite|randwrite|fsync)(\.\d+)?\.dat|fakefio\.\d+\.\d+)$`)

// jobFiles lists fio job files anywhere under root: the scratch directory,
// probe containers' writable layers and volumes.
func jobFiles(root string) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && jobFileRE.MatchString(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// fioProc is a running process whose comm is "fio".
type fioProc struct {
	pid  int
	args []string
}

// fioProcs lists the fio processes (host fio and fio in containers alike:
// the test runs in the host's pid namespace) whose command line mentions
// one of the substrings.
func fioProcs(subs ...string) []fioProc {
	ents, _ := os.ReadDir("/proc")
	var out []fioProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "fio" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		line := strings.Join(args, " ")
		for _, s := range subs {
			if strings.Contains(line, s) {
				out = append(out, fioProc{pid, args})
				break
			}
		}
	}
	return out
}

// fioJobsRunning lists fio processes running a job (not --version) on the
// daemon whose data root is dataRoot: on the host under the data root, or
// in one of the daemon's containers (other tests on the machine run probe
// containers of their own).
func fioJobsRunning(dataRoot string) []fioProc {
	var ids []string
	ents, _ := os.ReadDir(filepath.Join(dataRoot, "containers"))
	for _, e := range ents {
		if len(e.Name()) == 64 {
			ids = append(ids, e.Name())
		}
	}
	var out []fioProc
	for _, p := range fioProcs("--directory=") {
		line := strings.Join(p.args, " ")
		if strings.Contains(line, "--directory="+dataRoot) {
			out = append(out, p)
			continue
		}
		if !strings.Contains(line, "--directory=/lp/") {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.pid))
		for _, id := range ids {
			if strings.Contains(string(cg), id) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// checkClean asserts what every fault must leave behind: nothing of a
// dead layerprobe on the engine, at most the live agent's own probe
// container and volume (keep), no fio job file on the data root and no fio
// still running there.
func checkClean(t *testing.T, d dockerAPI, dataRoot string, keep int) {
	t.Helper()
	l := d.labelled(t)
	if len(l.Containers) > keep || len(l.Volumes) > keep {
		t.Errorf("left on the engine: %s; want at most %d probe container(s) and volume(s)", l, keep)
	}
	if f := jobFiles(dataRoot); len(f) > 0 {
		t.Errorf("fio job files left on the data root: %v", f)
	}
	if p := fioJobsRunning(dataRoot); len(p) > 0 {
		t.Errorf("fio still running: %+v", p)
	}
}

// scratchOwners lists the per-process directories in the scratch directory.
func scratchOwners(dataRoot string) []string {
	ents, _ := os.ReadDir(filepath.Join(dataRoot, "layerprobe-scratch"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// fakeFio builds the fake fio (testdata/fakefio) for mode, printing the
// host fio's version, into its own directory as "fio" (so that the
// probe's kill-fio, which goes by process name, finds it too).
func fakeFio(t *testing.T, mode string) string {
	t.Helper()
	out, err := exec.Command("fio", "--version").Output()
	if err != nil {
		t.Fatalf("host fio --version: %v", err)
	}
	dir := filepath.Join(workDir, "fakefio-"+mode)
	bin := filepath.Join(dir, "fio")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X main.mode="+mode+" -X main.version="+strings.TrimSpace(string(out)), "./testdata/fakefio")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fake fio: %v\n%s", err, out)
	}
	return bin
}
