//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testharness"
)

// settings come from the environment (see the Makefile's bench targets).
type settings struct {
	short  bool
	outDir string // benchmarks.md goes here, plots and results.json into outDir/bench
	bin    string // the layerprobe binary under test
	before string // an earlier results.json to compare the targets with
	only   map[string]bool
}

func loadSettings() (settings, error) {
	s := settings{short: os.Getenv("BENCH_SHORT") != "" && os.Getenv("BENCH_SHORT") != "0",
		outDir: os.Getenv("BENCH_OUT"), before: os.Getenv("BENCH_BEFORE")}
	bin := os.Getenv("LAYERPROBE_BIN")
	if bin == "" {
		bin = "../bin/layerprobe"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return s, fmt.Errorf("LAYERPROBE_BIN: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return s, fmt.Errorf("layerprobe binary %s: %w (build it: make build)", abs, err)
	}
	s.bin = abs
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		s.only = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			s.only[strings.TrimSpace(f)] = true
		}
	}
	return s, nil
}

// runs reports whether a section is selected (BENCH_ONLY, default all).
func (s settings) runs(section string) bool { return s.only == nil || s.only[section] }

func (s settings) plotDir() string     { return filepath.Join(s.outDir, "bench") }
func (s settings) resultsPath() string { return filepath.Join(s.plotDir(), "results.json") }
func (s settings) reportPath() string  { return filepath.Join(s.outDir, "benchmarks.md") }

// progress prints timestamped lines as the run goes; `go test -v` shows
// them as they come.
type progress struct {
	mu    sync.Mutex
	start time.Time
}

func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start).Round(time.Second)
	fmt.Printf("bench %s +%s  %s\n", time.Now().Format("15:04:05"), el, fmt.Sprintf(format, args...))
}

// ticker logs "still running" every interval until the returned stop is
// called: the seed profile's runs are silent for twenty minutes.
func (p *progress) ticker(what string, expect time.Duration, every time.Duration) (stop func()) {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.logf("  %s: %s elapsed (expected about %s)", what, time.Since(start).Round(time.Second), expect.Round(time.Minute))
			}
		}
	}()
	return func() { close(done) }
}

// lpRun is one `layerprobe run --output json`.
type lpRun struct {
	bin, host, lockFile, workDir string
	config                       string // YAML
	profile                      string
	rounds                       int
	env                          []string
	timeout                      time.Duration
}

// run executes it and decodes the document. A run whose engine could not
// be measured exits 1 and still prints its document: that is an error
// here, with the document's message.
func (r lpRun) run(ctx context.Context) (*report.Run, error) {
	if err := os.MkdirAll(r.workDir, 0o700); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	cfg := filepath.Join(r.workDir, "run-config.yml")
	if err := os.WriteFile(cfg, []byte(r.config), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	args := []string{"run", "--config", cfg, "--profile", r.profile, "--rounds", fmt.Sprint(r.rounds),
		"--output", "json", "--log.level", "warn"}
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = append(lpBaseEnv(r.host, r.lockFile), r.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 30 * time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("layerprobe run --profile %s: no result within %s: %w; stderr: %s", r.profile, r.timeout, ctx.Err(), testharness.Tail(errb.String(), 10))
	}
	var doc report.Run
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		return nil, fmt.Errorf("layerprobe run --profile %s: %v; output not JSON: %w; stderr: %s", r.profile, runErr, err, testharness.Tail(errb.String(), 10))
	}
	if len(doc.Engines) != 1 {
		return nil, fmt.Errorf("layerprobe run: %d engines in the document, want 1", len(doc.Engines))
	}
	if e := doc.Engines[0].Error; e != nil {
		return nil, fmt.Errorf("layerprobe run: engine error %s: %s", e.Code, e.Message)
	}
	if runErr != nil {
		return &doc, fmt.Errorf("layerprobe run --profile %s: %w; stderr: %s", r.profile, runErr, testharness.Tail(errb.String(), 10))
	}
	return &doc, nil
}

// lpBaseEnv points layerprobe at one private daemon with the benchmark's
// own lock file (another suite on this machine must not make it skip) and
// no configuration but the one it is given.
func lpBaseEnv(host, lockFile string) []string {
	return []string{"PATH=" + os.Getenv("PATH") + ":/usr/local/sbin:/usr/sbin:/sbin", "HOME=" + os.Getenv("HOME"),
		"DOCKER_HOST=" + host, "LAYERPROBE_LOCK_FILE=" + lockFile}
}

// describeMachine collects the facts the report starts with.
func describeMachine(bin string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "MemTotal:")), "%d", &kb)
				m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	m.Kernel = strings.TrimSpace(readFirst("/proc/sys/kernel/osrelease"))
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	m.RootFS = cmdLine("findmnt", "-no", "SOURCE,FSTYPE", "/")
	if src := strings.Fields(m.RootFS); len(src) > 0 {
		disk := cmdLine("lsblk", "-ndo", "PKNAME", src[0])
		if disk == "" {
			disk = filepath.Base(src[0])
		}
		m.Disk = diskFacts(disk)
	}
	m.Fio = cmdLine("fio", "--version")
	m.Dockerd = cmdLine("dockerd", "--version")
	m.Layerprobe = cmdLine(bin, "version")
	m.LoadAvg = strings.TrimSpace(readFirst("/proc/loadavg"))
	m.IOPressure = strings.TrimSpace(strings.SplitN(readFirst("/proc/pressure/io"), "\n", 2)[0])
	return m
}

// diskFacts describes a block device from sysfs: size, rotational, model,
// scheduler, and whether it is a virtio disk.
func diskFacts(name string) string {
	sys := filepath.Join("/sys/block", name)
	var parts []string
	parts = append(parts, name)
	var sectors int64
	fmt.Sscanf(readFirst(filepath.Join(sys, "size")), "%d", &sectors)
	if sectors > 0 {
		parts = append(parts, fmt.Sprintf("%.0f GiB", float64(sectors)*512/(1<<30)))
	}
	if strings.HasPrefix(name, "vd") {
		parts = append(parts, "virtio")
	}
	if model := strings.TrimSpace(readFirst(filepath.Join(sys, "device", "model"))); model != "" {
		parts = append(parts, model)
	}
	switch strings.TrimSpace(readFirst(filepath.Join(sys, "queue", "rotational"))) {
	case "0":
		parts = append(parts, "non-rotational")
	case "1":
		parts = append(parts, "rotational")
	}
	if sched := strings.TrimSpace(readFirst(filepath.Join(sys, "queue", "scheduler"))); sched != "" {
		parts = append(parts, "scheduler "+sched)
	}
	return strings.Join(parts, ", ")
}

func readFirst(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// cmdLine runs a command and returns the first line of its output, or ""
// when it fails.
func cmdLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}
