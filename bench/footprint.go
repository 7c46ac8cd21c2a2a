//go:build bench

package bench

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The footprint measurement: the agent's memory and CPU while idle and
// during a cycle, and the latency of its two read routes under a fixed
// request rate, next to Debian's prometheus-node-exporter under the same
// load. Every figure comes from a real process: the agent binary against a
// private dockerd, sampled through /proc, loaded from this (second) process.

// nodeExporterBin is Debian's node_exporter, the reference the agent's footprint is compared with.
const nodeExporterBin = "/usr/bin/prometheus-node-exporter"

// footprintToken is the bearer token of the measured agents' trigger route.
const footprintToken = "footprint-token-0123456789abcdef"

// The footprint budget counts what costs the host memory. The agent's
// anonymous memory (RssAnon: its heap, stacks, SQLite's caches, the
// binary's written data) is memory only this process holds. Its file
// pages (RssFile: the binary's code and read-only data) are clean copies
// of the file, shared with every process that maps it, which the kernel
// reclaims when it needs the memory without writing anything: they are
// reported beside the anonymous memory, not budgeted. The binary's size is
// budgeted as the release archives ship it, stripped.
const (
	// anonBudgetBytes bounds RssAnon 2 s after the first cycle and at the
	// end of every settling phase between cycles.
	anonBudgetBytes = 15 << 20
	// strippedBudgetBytes bounds the stripped release binary (decimal MB).
	strippedBudgetBytes = 35_000_000
	// afterCycleDelay is when "after the first cycle" is read: once the
	// agent has returned the cycle's freed memory (at the cycle's end).
	afterCycleDelay = 2 * time.Second
)

// procSample is one reading of /proc/PID/status and /proc/PID/stat.
type procSample struct {
	T        float64 `json:"t"`     // seconds since the process started
	Phase    string  `json:"phase"` // idle, cycle, settle, load
	RSS      uint64  `json:"rss_bytes"`
	HWM      uint64  `json:"hwm_bytes"` // peak RSS so far
	Anon     uint64  `json:"rss_anon_bytes"`
	File     uint64  `json:"rss_file_bytes"` // mapped file pages: the binary's, mostly
	CPUTotal float64 `json:"cpu_seconds"`    // utime+stime since start
}

// loadResult is one constant-rate attack on one route.
type loadResult struct {
	Server      string   `json:"server"` // layerprobe, node_exporter
	Path        string   `json:"path"`
	Rate        int      `json:"rate"` // requests per second
	Seconds     float64  `json:"seconds"`
	Requests    uint64   `json:"requests"`
	Success     float64  `json:"success"` // share of 2xx/3xx answers
	P50Ms       float64  `json:"p50_ms"`
	P99Ms       float64  `json:"p99_ms"`
	MaxMs       float64  `json:"max_ms"`
	Errors      int      `json:"errors"` // requests without a 2xx/3xx answer
	ErrorKinds  []string `json:"error_kinds,omitempty"`
	MeanBytes   float64  `json:"mean_bytes"`   // response body size
	CPUPercent  float64  `json:"cpu_percent"`  // server CPU during the attack (100 = one core)
	RSSAfter    uint64   `json:"rss_after"`    // server RSS right after the attack
	ServerLabel string   `json:"server_label"` // for tables: which variant served
}

// variantResult is one agent run: one binary with one environment.
type variantResult struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Env         []string `json:"env,omitempty"` // runtime settings that differ
	BinaryBytes int64    `json:"binary_bytes"`
	MappedBytes int64    `json:"mapped_bytes"` // read-only PT_LOAD segments: code and read-only data
	BuildTags   string   `json:"build_tags"`

	Idle            procSample   `json:"idle"` // end of the idle phase, before any cycle
	IdleCPUPercent  float64      `json:"idle_cpu_percent"`
	Cycles          int          `json:"cycles"`
	CycleSeconds    float64      `json:"cycle_seconds"`
	CycleCPUSeconds float64      `json:"cycle_cpu_seconds"`
	CycleCPUPercent float64      `json:"cycle_cpu_percent"`
	CyclePeakRSS    uint64       `json:"cycle_peak_rss_bytes"`
	AfterCycle      procSample   `json:"after_cycle"`        // end of the settle phase after the last cycle
	SettleCPU       float64      `json:"settle_cpu_percent"` // in the settle phase after the last cycle
	Load            []loadResult `json:"load,omitempty"`
	AfterLoad       procSample   `json:"after_load"`
	Samples         []procSample `json:"samples"`
}

// footprintResult is what measureFootprint returns.
type footprintResult struct {
	Short         bool            `json:"short"`
	Profile       string          `json:"profile"`
	IdleSeconds   float64         `json:"idle_seconds"`
	SettleSeconds float64         `json:"settle_seconds"`
	LoadSeconds   float64         `json:"load_seconds"`
	Rates         []int           `json:"rates"`
	Variants      []variantResult `json:"variants"`
	NodeExporter  []loadResult    `json:"node_exporter"`
	NodeExporterV string          `json:"node_exporter_version"`
	NodeExpIdle   procSample      `json:"node_exporter_idle"`
	// StrippedBytes is the release binary built stripped from the same
	// tree (testharness.BuildStripped); 0 in results from before it was
	// measured.
	StrippedBytes int64 `json:"stripped_binary_bytes,omitempty"`
}

// footprintPlan is how long each phase lasts.
type footprintPlan struct {
	profile string
	rounds  int
	cycles  int
	idle    time.Duration
	settle  time.Duration
	load    time.Duration
	rates   []int
}

func planFor(short bool) footprintPlan {
	if short {
		return footprintPlan{profile: "smoke", rounds: 1, cycles: 1, idle: 8 * time.Second,
			settle: 10 * time.Second, load: 3 * time.Second, rates: []int{20, 100}}
	}
	// About 15 minutes for the two variants and node_exporter. Two
	// cycles, each followed by its settling phase: what the agent holds
	// between cycles must not grow from one to the next.
	return footprintPlan{profile: "quick", rounds: 2, cycles: 2, idle: 45 * time.Second,
		settle: 30 * time.Second, load: 20 * time.Second, rates: []int{20, 100}}
}

// agentVariant is one way to run the agent.
type agentVariant struct {
	name, description string
	env               []string
	bin               string
	load              bool // run the latency attacks on this variant
}

// footprintVariants are measured in this order. "tuning off" is the same
// binary with the memory tuning off, which keeps both figures in one run on
// one daemon.
func footprintVariants(agentBin string) []agentVariant {
	return []agentVariant{{name: "tuning off",
		description: "the binary under test, memory tuning off (`LAYERPROBE_TEST_MEMORY_TUNING=off`)",
		env:         []string{"LAYERPROBE_TEST_MEMORY_TUNING=off"}, bin: agentBin, load: true},
		{name: "after", description: "the binary under test (`make build`, with the test hooks), memory tuning on",
			bin: agentBin, load: true}}
}

// measureFootprint runs the agent variants and node_exporter on this
// machine and returns their footprint. dockerHost is a private daemon's
// socket URL; workDir holds the agents' configuration and state.
func measureFootprint(ctx context.Context, t testing.TB, agentBin, dockerHost, workDir string, short bool) (*footprintResult, error) {
	plan := planFor(short)
	res := &footprintResult{Short: short, Profile: plan.profile, IdleSeconds: plan.idle.Seconds(),
		SettleSeconds: plan.settle.Seconds(), LoadSeconds: plan.load.Seconds(), Rates: plan.rates}
	stripped := filepath.Join(workDir, "layerprobe-stripped")
	t.Logf("footprint: building the stripped release binary")
	if err := testharness.BuildStripped(ctx, stripped); err != nil {
		return nil, fmt.Errorf("stripped release binary: %w", err)
	}
	fi, err := os.Stat(stripped)
	if err != nil {
		return nil, fmt.Errorf("stripped release binary: %w", err)
	}
	res.StrippedBytes = fi.Size()
	for _, v := range footprintVariants(agentBin) {
		t.Logf("footprint: agent variant %s", v.name)
		vr, err := measureAgent(ctx, t, v.bin, dockerHost, filepath.Join(workDir, "footprint-"+strings.ReplaceAll(v.name, " ", "-")), v, plan)
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.name, err)
		}
		res.Variants = append(res.Variants, *vr)
	}
	t.Logf("footprint: node_exporter")
	ne, idle, version, err := measureNodeExporter(ctx, t, workDir, plan)
	if err != nil {
		return nil, fmt.Errorf("node_exporter: %w", err)
	}
	res.NodeExporter, res.NodeExpIdle, res.NodeExporterV = ne, idle, version
	return res, nil
}

// dropPageCache writes back and evicts path's pages from the page cache.
func dropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("drop page cache: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("drop page cache of %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop page cache of %s: %w", path, err)
	}
	return nil
}

// binaryInfo is the size of a binary, what of it is mapped read-only (code
// and read-only data, the pages that count as file RSS) and its build tags.
func binaryInfo(path string) (size, mapped int64, tags string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, "", fmt.Errorf("binary: %w", err)
	}
	f, err := elf.Open(path)
	if err != nil {
		return 0, 0, "", fmt.Errorf("binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W == 0 {
			mapped += int64(p.Memsz)
		}
	}
	if bi, err := buildinfo.ReadFile(path); err == nil {
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				tags = s.Value
			}
		}
	}
	return fi.Size(), mapped, tags, nil
}

// proc is a started process whose footprint is sampled.
type proc struct {
	*testharness.Proc
	pid     int
	started time.Time

	mu       sync.Mutex
	samples  []procSample
	phase    string
	interval time.Duration
	stopSamp chan struct{}
	sampDone chan struct{}
}

func startProc(name string, args, env []string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	tp, err := testharness.Start(cmd)
	if err != nil {
		return nil, err
	}
	p := &proc{Proc: tp, pid: cmd.Process.Pid, started: time.Now(), phase: "start",
		interval: time.Second, stopSamp: make(chan struct{}), sampDone: make(chan struct{})}
	go p.sampleLoop()
	return p, nil
}

// setPhase labels the following samples and sets how often they are taken.
func (p *proc) setPhase(phase string, every time.Duration) {
	p.mu.Lock()
	p.phase, p.interval = phase, every
	p.mu.Unlock()
	p.sample()
}

func (p *proc) sampleLoop() {
	defer close(p.sampDone)
	for {
		p.mu.Lock()
		every := p.interval
		p.mu.Unlock()
		select {
		case <-p.stopSamp:
			return
		case <-p.Done():
			return
		case <-time.After(every):
			p.sample()
		}
	}
}

// sample reads the process's memory and CPU and records them.
func (p *proc) sample() procSample {
	s, err := readProc(p.pid)
	if err != nil {
		return procSample{}
	}
	s.T = time.Since(p.started).Seconds()
	p.mu.Lock()
	s.Phase = p.phase
	p.samples = append(p.samples, s)
	p.mu.Unlock()
	return s
}

func readProc(pid int) (procSample, error) {
	fs, err := procfs.NewProc(pid)
	if err != nil {
		return procSample{}, fmt.Errorf("proc %d: %w", pid, err)
	}
	st, err := fs.NewStatus()
	if err != nil {
		return procSample{}, fmt.Errorf("proc %d status: %w", pid, err)
	}
	stat, err := fs.Stat()
	if err != nil {
		return procSample{}, fmt.Errorf("proc %d stat: %w", pid, err)
	}
	return procSample{RSS: st.VmRSS, HWM: st.VmHWM, Anon: st.RssAnon, File: st.RssFile, CPUTotal: stat.CPUTime()}, nil
}

// stop ends the process with SIGTERM (SIGKILL after 30 s) and the sampler.
func (p *proc) stop() {
	p.Stop(30 * time.Second)
	close(p.stopSamp)
	<-p.sampDone
}

func (p *proc) allSamples() []procSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]procSample(nil), p.samples...)
}

// cpuPercent is the CPU used between two samples, 100 = one core.
func cpuPercent(a, b procSample) float64 {
	if b.T <= a.T {
		return 0
	}
	return 100 * (b.CPUTotal - a.CPUTotal) / (b.T - a.T)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func footprintConfig(plan footprintPlan) string {
	// Every busy-host guard off, as in the end-to-end tests: the cycles run
	// whatever else the machine does. The schedule is an hour away; the
	// cycles measured are the ones triggered over the API.
	return fmt.Sprintf(`profile: %s
agent:
  interval: 1h
  cold_interval: 0s
  jitter: 0
  rounds_per_cycle: %d
  window_rounds: 6
  daily_byte_budget: 0
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
`, plan.profile, plan.rounds)
}

// measureAgent runs one agent variant through idle, cycles, settle and load.
func measureAgent(ctx context.Context, t testing.TB, bin, host, dir string, v agentVariant, plan footprintPlan) (*variantResult, error) {
	files, err := testharness.WriteAgentFiles(dir, footprintConfig(plan), footprintToken)
	if err != nil {
		return nil, err
	}
	port, err := testharness.FreePort()
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DOCKER_HOST=" + host,
		"LAYERPROBE_LOCK_FILE=" + filepath.Join(dir, "layerprobe.lock"),
		// Hold the scheduled first cycle so the idle phase is idle.
		"LAYERPROBE_TEST_FIRST_CYCLE_DELAY=24h"}, v.env...)
	// Every variant starts from a binary that is not in the page cache: how
	// much of a mapped binary turns resident depends on how its pages got
	// into the cache (a binary just written by go build maps differently
	// from one read back from disk), which would otherwise favour one
	// variant.
	if err := dropPageCache(bin); err != nil {
		return nil, err
	}
	p, err := startProc(bin, files.Args(fmt.Sprintf("127.0.0.1:%d", port)), env)
	if err != nil {
		return nil, err
	}
	defer func() {
		p.stop()
		if err := os.WriteFile(filepath.Join(dir, "agent.log"), []byte(p.Log.String()), 0o600); err != nil {
			t.Logf("footprint: keep agent log: %v", err)
		}
	}()
	if err := testharness.WaitHTTP(ctx, base+"/readyz", time.Minute, p.Done()); err != nil {
		return nil, fmt.Errorf("agent: %w\n%s", err, testharness.Tail(p.Log.String(), 40))
	}
	vr := &variantResult{Name: v.name, Description: v.description, Env: v.env}
	if vr.BinaryBytes, vr.MappedBytes, vr.BuildTags, err = binaryInfo(bin); err != nil {
		return nil, err
	}

	p.setPhase("idle", time.Second)
	idle0 := p.sample()
	if err := sleepCtx(ctx, plan.idle); err != nil {
		return nil, err
	}
	vr.Idle = p.sample()
	vr.IdleCPUPercent = cpuPercent(idle0, vr.Idle)

	// Each cycle is followed by its settling phase, as an agent's cycles
	// are by an idle interval; memoryPoints reads the figures after the
	// first cycle and between cycles from these phases' samples.
	for i := 0; i < plan.cycles; i++ {
		p.setPhase("cycle", 100*time.Millisecond)
		c0 := p.sample()
		if err := runCycle(ctx, base, 15*time.Minute); err != nil {
			return nil, fmt.Errorf("cycle %d: %w\n%s", i+1, err, testharness.Tail(p.Log.String(), 40))
		}
		c1 := p.sample()
		vr.CycleSeconds += c1.T - c0.T
		vr.CycleCPUSeconds += c1.CPUTotal - c0.CPUTotal
		vr.CyclePeakRSS = c1.HWM

		p.setPhase("settle", time.Second)
		s0 := p.sample()
		if err := sleepCtx(ctx, plan.settle); err != nil {
			return nil, err
		}
		vr.AfterCycle = p.sample()
		vr.SettleCPU = cpuPercent(s0, vr.AfterCycle)
	}
	vr.Cycles = plan.cycles
	if vr.CycleSeconds > 0 {
		vr.CycleCPUPercent = 100 * vr.CycleCPUSeconds / vr.CycleSeconds
	}

	if v.load {
		p.setPhase("load", time.Second)
		for _, path := range []string{"/metrics", "/api/v1/overhead"} {
			for _, rate := range plan.rates {
				lr, err := attack(ctx, p, "layerprobe", base, path, rate, plan.load)
				if err != nil {
					return nil, err
				}
				lr.ServerLabel = "layerprobe (" + v.name + ")"
				vr.Load = append(vr.Load, *lr)
			}
		}
		vr.AfterLoad = p.sample()
	}
	vr.Samples = p.allSamples()
	return vr, nil
}

// runCycle starts a cycle over the API and waits until no cycle runs.
func runCycle(ctx context.Context, base string, timeout time.Duration) error {
	before, err := listCycles(base)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/cycles", nil)
	if err != nil {
		return fmt.Errorf("trigger request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+footprintToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("trigger: %s: %s", resp.Status, body)
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
		cs, err := listCycles(base)
		if err != nil {
			return err
		}
		var done *cycleRow
		running := false
		for i := range cs {
			if cs[i].Result == "running" {
				running = true
			}
			if cs[i].Trigger == "api" && cs[i].ID > maxID(before) && cs[i].Result != "running" {
				done = &cs[i]
			}
		}
		if done != nil && !running {
			if done.Result != "ok" {
				return fmt.Errorf("cycle %d ended %s (%s): %s", done.ID, done.Result, done.Reason, done.Message)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no finished cycle within %s", timeout)
		}
	}
}

type cycleRow = api.Cycle

func listCycles(base string) ([]cycleRow, error) {
	var body api.CyclesResponse
	err := testharness.GetJSON(context.Background(), http.DefaultClient, base+"/api/v1/cycles?limit=50", &body)
	return body.Cycles, err
}

func maxID(cs []cycleRow) int64 {
	var m int64
	for _, c := range cs {
		m = max(m, c.ID)
	}
	return m
}

// attack sends GET base+path at a constant rate for d with vegeta and
// returns its latency figures, with the server's CPU and RSS around it.
func attack(ctx context.Context, p *proc, server, base, path string, rate int, d time.Duration) (*loadResult, error) {
	// A short warm-up at the same rate, so the first connections and the
	// server's first answers are not part of the figures.
	if _, err := runAttack(ctx, base+path, rate, min(d, 2*time.Second)); err != nil {
		return nil, err
	}
	s0 := p.sample()
	m, err := runAttack(ctx, base+path, rate, d)
	if err != nil {
		return nil, err
	}
	s1 := p.sample()
	lr := &loadResult{Server: server, Path: path, Rate: rate, Seconds: d.Seconds(), Requests: m.Requests,
		Success: m.Success, P50Ms: ms(m.Latencies.P50), P99Ms: ms(m.Latencies.P99), MaxMs: ms(m.Latencies.Max),
		Errors: int(float64(m.Requests)*(1-m.Success) + 0.5), ErrorKinds: m.Errors, MeanBytes: m.BytesIn.Mean,
		CPUPercent: cpuPercent(s0, s1), RSSAfter: s1.RSS}
	return lr, nil
}

func runAttack(ctx context.Context, url string, rate int, d time.Duration) (*vegeta.Metrics, error) {
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: url})
	// Keep-alive connections, as a Prometheus server scrapes; a timeout
	// well above any expected answer so slow answers count as slow, not
	// as errors.
	at := vegeta.NewAttacker(vegeta.Timeout(10*time.Second), vegeta.KeepAlive(true))
	var m vegeta.Metrics
	results := at.Attack(tr, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, d, url)
	for r := range results {
		m.Add(r)
		if ctx.Err() != nil {
			at.Stop()
		}
	}
	m.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if m.Requests == 0 {
		return nil, errors.New("attack sent no request")
	}
	return &m, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measureNodeExporter starts node_exporter with its Debian defaults on a
// free port and runs the same attacks on its /metrics.
func measureNodeExporter(ctx context.Context, t testing.TB, workDir string, plan footprintPlan) ([]loadResult, procSample, string, error) {
	out, err := exec.Command(nodeExporterBin, "--version").CombinedOutput()
	if err != nil {
		return nil, procSample{}, "", fmt.Errorf("%s --version: %w: %s", nodeExporterBin, err, out)
	}
	version := strings.SplitN(string(out), "\n", 2)[0]
	port, err := testharness.FreePort()
	if err != nil {
		return nil, procSample{}, "", err
	}
	p, err := startProc(nodeExporterBin, []string{fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)},
		[]string{"PATH=" + os.Getenv("PATH")})
	if err != nil {
		return nil, procSample{}, "", err
	}
	defer func() {
		p.stop()
		if err := os.WriteFile(filepath.Join(workDir, "node_exporter.log"), []byte(p.Log.String()), 0o600); err != nil {
			t.Logf("footprint: keep node_exporter log: %v", err)
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := testharness.WaitHTTP(ctx, base+"/metrics", 30*time.Second, p.Done()); err != nil {
		return nil, procSample{}, "", fmt.Errorf("%w\n%s", err, testharness.Tail(p.Log.String(), 40))
	}
	p.setPhase("idle", time.Second)
	if err := sleepCtx(ctx, min(plan.idle, 5*time.Second)); err != nil {
		return nil, procSample{}, "", err
	}
	idle := p.sample()
	var rs []loadResult
	for _, rate := range plan.rates {
		lr, err := attack(ctx, p, "node_exporter", base, "/metrics", rate, plan.load)
		if err != nil {
			return nil, procSample{}, "", err
		}
		lr.ServerLabel = "node_exporter"
		rs = append(rs, *lr)
	}
	return rs, idle, version, nil
}

// Plot file names, relative to the plot directory (docs/bench).
const (
	plotFootprintRSS     = "footprint-rss.png"
	plotFootprintLatency = "footprint-latency.png"
)

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func mdTable(b *strings.Builder, header []string, rows [][]string) {
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	b.WriteString("\n")
}

// markdown writes the footprint plots into plotDir and returns the report
// section's body, which refers to them as bench/<name>.png.
func (r *footprintResult) markdown(plotDir string) (string, error) {
	if len(r.Variants) == 0 {
		return "", errors.New("footprint: no agent variant measured")
	}
	if err := saveFootprintRSSPlot(plotDir, r); err != nil {
		return "", fmt.Errorf("footprint RSS plot: %w", err)
	}
	if err := saveFootprintLatencyPlot(plotDir, r); err != nil {
		return "", fmt.Errorf("footprint latency plot: %w", err)
	}
	var b strings.Builder
	cycles := "one cycle"
	if n := r.Variants[0].Cycles; n > 1 {
		cycles = fmt.Sprintf("%d cycles", n)
	}
	fmt.Fprintf(&b, "Each agent variant runs against its own state directory and the same private overlay2 daemon: "+
		"%.0f s idle after start (the scheduled first cycle held back), then %s of the `%s` profile: a cycle is triggered with "+
		"`POST /api/v1/cycles` (sampled every 100 ms) and followed by %.0f s of settling (the agent idle, as between two "+
		"scheduled cycles), then the load. Memory is read from `/proc/PID/status`: `RssAnon`, the anonymous memory "+
		"(the Go heap, stacks, SQLite's caches, the binary's written data), which only this process holds and the host "+
		"pays for; `RssFile`, the file-backed pages (the binary's mapped code and read-only data), clean copies of the "+
		"file, shared with any other process that maps it, which the kernel reclaims when it needs the memory without "+
		"writing anything; and their sum, the total RSS (`VmRSS`). \"After the first cycle\" is read %.0f s after it "+
		"ended; \"between cycles\" at the end of each settling phase (the one with the most anonymous memory). "+
		"CPU is `utime+stime` of `/proc/PID/stat` (100%% = one core). The budget counts anonymous memory: "+
		"`RssAnon` ≤ %d MiB after the first cycle and between cycles; the total RSS is shown beside it.\n\n",
		r.IdleSeconds, cycles, r.Profile, r.SettleSeconds, afterCycleDelay.Seconds(), anonBudgetBytes>>20)
	b.WriteString(strippedVerdict(r))
	var rows [][]string
	for _, v := range r.Variants {
		m := memoryPointsOf(v.Samples)
		rows = append(rows, []string{
			"**" + v.Name + "**: " + v.Description,
			fmt.Sprintf("%.1f (%.1f), tags: %s", float64(v.BinaryBytes)/(1<<20), float64(v.MappedBytes)/(1<<20), orNone(v.BuildTags)),
			memSplit(v.Idle),
			fmt.Sprintf("%.1f%%", v.IdleCPUPercent),
			mib(v.CyclePeakRSS),
			fmt.Sprintf("%.2f s in %.0f s (%.1f%%)", v.CycleCPUSeconds, v.CycleSeconds, v.CycleCPUPercent),
			m.afterFirstText(),
			m.betweenText(),
			fmt.Sprintf("%.1f%%", v.SettleCPU),
			afterLoad(v),
			m.verdict(),
		})
	}
	mdTable(&b, []string{"agent", "binary under test, MiB (read-only mapped)", "idle, MiB: anon + file = total", "idle CPU",
		"peak RSS (VmHWM), MiB", "cycle CPU", "after the first cycle, MiB: anon + file = total",
		"between cycles, MiB: anon + file = total", "CPU after cycle", "RSS after load, MiB",
		fmt.Sprintf("anon ≤ %d MiB", anonBudgetBytes>>20)}, rows)
	if r.NodeExpIdle.RSS > 0 {
		fmt.Fprintf(&b, "%s idle, for comparison (Debian's defaults, same machine): %s MiB (anon + file = total).\n\n",
			orNone(r.NodeExporterV), memSplit(r.NodeExpIdle))
	}
	fmt.Fprintf(&b, "![agent RSS over time](bench/%s)\n\n", plotFootprintRSS)

	fmt.Fprintf(&b, "Latency at a constant request rate from a second process ([vegeta](https://github.com/tsenart/vegeta) "+
		"as a library, keep-alive connections, %.0f s per row after a 2 s warm-up at the same rate), next to %s "+
		"(`%s`, Debian's defaults, its own `/metrics`) under the same load on the same machine (2 vCPUs shared "+
		"with the load generator). The agent routes are loaded after the cycles, so `/api/v1/overhead` answers "+
		"with real results. Errors are answers other than 2xx (node_exporter answers 503 when more than its "+
		"`--web.max-requests` scrapes are in flight).\n\n", r.LoadSeconds, r.NodeExporterV, nodeExporterBin)
	rows = nil
	var all []loadResult
	for _, v := range r.Variants {
		all = append(all, v.Load...)
	}
	all = append(all, r.NodeExporter...)
	for _, l := range all {
		rows = append(rows, []string{l.ServerLabel, "`" + l.Path + "`", fmt.Sprint(l.Rate), fmt.Sprint(l.Requests),
			fmt.Sprintf("%.1f", l.P50Ms), fmt.Sprintf("%.1f", l.P99Ms), fmt.Sprintf("%.1f", l.MaxMs),
			fmt.Sprint(l.Errors), fmt.Sprintf("%.0f", l.MeanBytes/1024), fmt.Sprintf("%.0f%%", l.CPUPercent), mib(l.RSSAfter)})
	}
	mdTable(&b, []string{"server", "route", "req/s", "requests", "p50 ms", "p99 ms", "max ms", "errors",
		"body KiB", "server CPU", "server RSS after, MiB"}, rows)
	b.WriteString(metricsVerdict(r))
	fmt.Fprintf(&b, "![p99 latency under load](bench/%s)\n", plotFootprintLatency)
	return b.String(), nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return "`" + s + "`"
}

// memSplit is a sample's memory as anon + file = total, MiB.
func memSplit(s procSample) string {
	return fmt.Sprintf("%s + %s = %s", mib(s.Anon), mib(s.File), mib(s.RSS))
}

// memoryPoints are a variant's memory figures, read from its samples:
// afterCycleDelay after its first cycle ended, and at the end of every
// settling phase (the agent idle between cycles). Reading them from the
// samples keeps results from before they were reported (one cycle, one
// settling phase) readable.
type memoryPoints struct {
	afterFirst procSample
	between    procSample // the settling phase's end with the most RssAnon
	settles    int        // settling phases seen
}

func memoryPointsOf(samples []procSample) memoryPoints {
	var m memoryPoints
	var seg []procSample
	flush := func() {
		if len(seg) == 0 {
			return
		}
		if m.settles == 0 {
			m.afterFirst = seg[len(seg)-1]
			for _, s := range seg {
				if s.T >= seg[0].T+afterCycleDelay.Seconds() {
					m.afterFirst = s
					break
				}
			}
		}
		if end := seg[len(seg)-1]; m.settles == 0 || end.Anon > m.between.Anon {
			m.between = end
		}
		m.settles++
		seg = nil
	}
	for _, s := range samples {
		if s.Phase != "settle" {
			flush()
			continue
		}
		seg = append(seg, s)
	}
	flush()
	return m
}

func (m memoryPoints) afterFirstText() string {
	if m.settles == 0 {
		return "not measured"
	}
	return memSplit(m.afterFirst)
}

func (m memoryPoints) betweenText() string {
	if m.settles == 0 {
		return "not measured"
	}
	if m.settles == 1 {
		return memSplit(m.between)
	}
	return fmt.Sprintf("%s (highest of %d)", memSplit(m.between), m.settles)
}

// anonMet says whether RssAnon kept to the budget after the first cycle
// and between cycles.
func (m memoryPoints) anonMet() bool {
	return m.settles > 0 && m.afterFirst.Anon <= anonBudgetBytes && m.between.Anon <= anonBudgetBytes
}

func (m memoryPoints) verdict() string {
	switch {
	case m.settles == 0:
		return "not measured"
	case m.anonMet():
		return "met"
	}
	return "**missed**"
}

// strippedVerdict is the sentence on the stripped release binary's size.
func strippedVerdict(r *footprintResult) string {
	if r.StrippedBytes == 0 {
		// Results from before the budget counted anonymous memory: the
		// agent then paged its binary out after start-up and every cycle.
		return fmt.Sprintf("These figures are from results recorded before this budget (the stripped release binary, "+
			"budget ≤ %.0f MB, was not measured): the agent then paged its own binary out after start-up and after "+
			"every cycle, so its file-backed pages read lower than an agent's do now; its anonymous memory was not "+
			"affected.\n\n", float64(strippedBudgetBytes)/1e6)
	}
	verdict := "met"
	if r.StrippedBytes > strippedBudgetBytes {
		verdict = "**missed**"
	}
	return fmt.Sprintf("The release binary, built from the same tree as the release archives ship it "+
		"(`CGO_ENABLED=0 go build -trimpath -tags %s -ldflags '-s -w'`): %.1f MB; budget ≤ %.0f MB: %s.\n\n",
		testharness.ReleaseTags, float64(r.StrippedBytes)/1e6, float64(strippedBudgetBytes)/1e6, verdict)
}

func afterLoad(v variantResult) string {
	if len(v.Load) == 0 {
		return "not loaded"
	}
	return mib(v.AfterLoad.RSS)
}

// metricsVerdict compares the last variant's /metrics p99 with
// node_exporter's at each rate.
func metricsVerdict(r *footprintResult) string {
	last := r.Variants[len(r.Variants)-1]
	var parts []string
	for _, ne := range r.NodeExporter {
		for _, l := range last.Load {
			if l.Path != "/metrics" || l.Rate != ne.Rate {
				continue
			}
			verdict := "met"
			if l.P99Ms > ne.P99Ms {
				verdict = "**missed**"
			}
			parts = append(parts, fmt.Sprintf("at %d req/s layerprobe %.1f ms vs node_exporter %.1f ms: %s",
				ne.Rate, l.P99Ms, ne.P99Ms, verdict))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "Target `/metrics` p99 no worse than node_exporter's (" + last.Name + "): " + strings.Join(parts, "; ") + ".\n\n"
}

func saveFootprintRSSPlot(dir string, r *footprintResult) error {
	p := plot.New()
	p.Title.Text = "Agent memory: idle, cycles, settling, load"
	p.X.Label.Text = "seconds since the agent started"
	p.Y.Label.Text = "MiB: total RSS (solid), RssAnon (dashed)"
	p.Add(plotter.NewGrid())
	top := 0.0
	for i, v := range r.Variants {
		var total, anon plotter.XYs
		for _, s := range v.Samples {
			total = append(total, plotter.XY{X: s.T, Y: float64(s.RSS) / (1 << 20)})
			anon = append(anon, plotter.XY{X: s.T, Y: float64(s.Anon) / (1 << 20)})
			top = max(top, s.T)
		}
		l, err := addLine(p, v.Name+" total", i, total)
		if err != nil {
			return err
		}
		if l != nil {
			l.Width = vg.Points(1.5)
		}
		if l, err = addLine(p, v.Name+" anon", i, anon); err != nil {
			return err
		}
		if l != nil {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
	}
	budget, err := plotter.NewLine(plotter.XYs{{X: 0, Y: anonBudgetBytes / (1 << 20)}, {X: top, Y: anonBudgetBytes / (1 << 20)}})
	if err != nil {
		return err
	}
	budget.Color = color.Black
	budget.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	p.Add(budget)
	p.Legend.Add(fmt.Sprintf("RssAnon budget %d MiB", anonBudgetBytes>>20), budget)
	// The legend top left, above the lines: the agent starts low and the
	// headroom keeps the lines clear of it.
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	p.Y.Max = 1.6 * p.Y.Max
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotFootprintRSS))
}

func saveFootprintLatencyPlot(dir string, r *footprintResult) error {
	p := plot.New()
	p.Title.Text = "Latency at a constant request rate: p99 (solid), p50 (dashed)"
	p.Y.Label.Text = "ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	type series struct {
		name string
		rows []loadResult
	}
	var ss []series
	last := r.Variants[len(r.Variants)-1]
	for _, path := range []string{"/metrics", "/api/v1/overhead"} {
		var rows []loadResult
		for _, l := range last.Load {
			if l.Path == path {
				rows = append(rows, l)
			}
		}
		ss = append(ss, series{"layerprobe " + path, rows})
	}
	ss = append(ss, series{"node_exporter /metrics", r.NodeExporter})
	var labels []string
	for _, rate := range r.Rates {
		labels = append(labels, fmt.Sprintf("%d req/s", rate))
	}
	p.NominalX(labels...)
	for i, s := range ss {
		var p99, p50 plotter.XYs
		for j, rate := range r.Rates {
			for _, l := range s.rows {
				// The log scale cannot show zero; no real answer takes
				// less than a microsecond.
				if l.Rate == rate {
					p99 = append(p99, plotter.XY{X: float64(j), Y: max(l.P99Ms, 1e-3)})
					p50 = append(p50, plotter.XY{X: float64(j), Y: max(l.P50Ms, 1e-3)})
				}
			}
		}
		if len(p99) == 0 {
			continue
		}
		l99, pts, err := plotter.NewLinePoints(p99)
		if err != nil {
			return err
		}
		l99.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l99.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(i)
		l50, err := plotter.NewLine(p50)
		if err != nil {
			return err
		}
		l50.Color = plotutil.Color(i)
		l50.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l99, pts, l50)
		p.Legend.Add(s.name, l99, pts)
	}
	p.X.Min, p.X.Max = -0.3, float64(len(r.Rates))-0.7
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotFootprintLatency))
}
