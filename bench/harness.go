//go:build bench

package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// settings come from the environment (see the Makefile's bench targets).
type settings struct {
	short  bool
	outDir string // benchmarks.md goes here, plots and results.json into outDir/bench
	bin    string // the layerprobe binary under test
	only   map[string]bool
	// oldRev is the revision whose binary measures the earlier method.
	oldRev string
	// v2BeforeRev is the revision whose deployments the cgroupv2-before
	// section runs (BENCH_CGROUPV2_BEFORE).
	v2BeforeRev string
	// oldDefaultRuns is how many runs of the earlier method at its
	// default settings each driver gets.
	oldDefaultRuns int
	// defaultRuns is how many runs of the new method at its default
	// settings each driver gets (the coverage runs).
	defaultRuns map[string]int
	// unperturbedCycles is how many agent cycles the false-alarm count is
	// over, after the detector's learning.
	unperturbedCycles int
	// referenceRuns is how many runs of the long profile each driver's
	// reference combines.
	referenceRuns int
	// resume (BENCH_RESUME) keeps the selected sections' reference and
	// default runs and goes on to their full counts: a long section
	// measured over several sittings (its deadline set by BENCH_RUN's
	// -timeout).
	resume bool
}

// btrfsLoopMiB sizes the loop files of btrfs (and of the engines section's
// xfs): the seed profile lays out 8 GiB files, and the free-space guard
// keeps 5% (at least 1 GiB) free. Sparse: only what is written takes space
// on the root file system.
const btrfsLoopMiB = 24 << 10

// drivers are the storage drivers the per-driver sections measure.
// overlay2-ram is overlay2 on the quiet device: ext4 on a loop file in
// RAM (testdaemon.BackingRAM), with no disk's noise, so that what limits
// the precision there is the method.
var drivers = []string{"overlay2", "btrfs", "overlay2-ram"}

// ramLoopMiB sizes overlay2-ram's device: a default run's 2.5 GiB with
// room for the image and the layouts.
const ramLoopMiB = 6 << 10

// sectionNames lists every section in the order they run, and the pair
// that runs as one section when both are selected.
func sectionNames() []string {
	var out []string
	for _, d := range drivers {
		for _, kind := range sectionKinds {
			out = append(out, kind+"-"+d)
		}
		// The two run as one when both are selected (interleave).
		out = append(out, "reference-"+d+"+defaults-"+d)
	}
	return append(out, "detection", "footprint", "engines", "install", "cgroupv2", "cgroupv2-before", "fleet")
}

// sectionKinds are the per-driver sections.
var sectionKinds = []string{"old", "unbounded", "reference", "defaults"}

// selects reports whether BENCH_ONLY (default: everything) selects a
// section: by its name, its kind ("defaults" selects both drivers') or
// its driver ("btrfs" selects every btrfs section).
func (s settings) selects(name string) bool {
	if s.only == nil || s.only[name] {
		return true
	}
	// Only the per-driver sections answer to their kind or driver:
	// "cgroupv2" names the cgroup v2 guest's own pass, not the
	// hour-long cgroupv2-before beside it.
	kind, driver, ok := strings.Cut(name, "-")
	return ok && slices.Contains(sectionKinds, kind) && (s.only[kind] || s.only[driver])
}

func loadSettings() (settings, error) {
	s := settings{short: os.Getenv("BENCH_SHORT") != "" && os.Getenv("BENCH_SHORT") != "0",
		outDir: os.Getenv("BENCH_OUT"), oldRev: os.Getenv("BENCH_OLD_REV"),
		resume: os.Getenv("BENCH_RESUME") != "" && os.Getenv("BENCH_RESUME") != "0"}
	bin := os.Getenv("LAYERPROBE_BIN")
	if bin == "" {
		bin = "../bin/layerprobe-testhooks"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return s, fmt.Errorf("LAYERPROBE_BIN: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return s, fmt.Errorf("layerprobe binary %s: %w (build it: make build-testhooks)", abs, err)
	}
	s.bin = abs
	if s.resume && os.Getenv("BENCH_ONLY") == "" {
		return s, fmt.Errorf("BENCH_RESUME goes on with sections that BENCH_ONLY names")
	}
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		s.only = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			s.only[strings.TrimSpace(f)] = true
		}
	}
	if s.oldRev == "" {
		s.oldRev = defaultOldRev
	}
	s.v2BeforeRev = cmp.Or(os.Getenv("BENCH_CGROUPV2_BEFORE"), defaultV2BeforeRev)
	full := fullSizes()
	s.oldDefaultRuns, s.unperturbedCycles, s.defaultRuns, s.referenceRuns = full.OldDefaultRuns, full.UnperturbedCycles, full.CoverageRuns, full.ReferenceRuns
	if s.short {
		s.oldDefaultRuns, s.unperturbedCycles, s.referenceRuns = 1, 3, 2
		s.defaultRuns = map[string]int{"overlay2": 2, "btrfs": 2, "overlay2-ram": 2}
	}
	if s.oldDefaultRuns, err = envInt("BENCH_OLD_DEFAULT_RUNS", s.oldDefaultRuns, 0); err != nil {
		return s, err
	}
	if s.unperturbedCycles, err = envInt("BENCH_UNPERTURBED_CYCLES", s.unperturbedCycles, 1); err != nil {
		return s, err
	}
	if s.referenceRuns, err = envInt("BENCH_REFERENCE_RUNS", s.referenceRuns, 1); err != nil {
		return s, err
	}
	if err := parseRuns(os.Getenv("BENCH_COVERAGE_RUNS"), s.defaultRuns); err != nil {
		return s, err
	}
	return s, nil
}

// fullSizes are a full run's sizes: BENCH_COVERAGE_RUNS and so on unset.
func fullSizes() runSizes {
	return runSizes{CoverageRuns: map[string]int{"overlay2": 40, "btrfs": 20, "overlay2-ram": 20}, OldDefaultRuns: 5, UnperturbedCycles: 100, ReferenceRuns: 6}
}

// sizes records the settings' sizes for the results.
func (s settings) sizes() *runSizes {
	z := &runSizes{CoverageRuns: s.defaultRuns, OldDefaultRuns: s.oldDefaultRuns, UnperturbedCycles: s.unperturbedCycles,
		ReferenceRuns: s.referenceRuns}
	for k := range s.only {
		z.Only = append(z.Only, k)
	}
	slices.Sort(z.Only)
	for _, k := range recordedSettings {
		if v := os.Getenv(k); v != "" {
			if z.Settings == nil {
				z.Settings = map[string]string{}
			}
			z.Settings[k] = v
		}
	}
	return z
}

// recordedSettings are the variables besides the sizes that choose what a
// run measures: the report's command for a rerun repeats them.
var recordedSettings = []string{"BENCH_FLEET_SIZES", "BENCH_CGROUPV2_RERUN", "BENCH_CGROUPV2_BEFORE", "BENCH_OLD_REV"}

// defaultOldRev is the last commit before the adaptive method.
const defaultOldRev = "0b17484"

// envInt reads a whole number of at least lo from the environment, def
// when unset.
func envInt(name string, def, lo int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo {
		return 0, fmt.Errorf("%s=%q: want a whole number of at least %d", name, v, lo)
	}
	return n, nil
}

// parseRuns reads BENCH_COVERAGE_RUNS into runs: one number for every
// driver ("40") or one per driver ("overlay2=40,btrfs=12").
func parseRuns(v string, runs map[string]int) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	bad := fmt.Errorf("BENCH_COVERAGE_RUNS=%q: want a number of runs of at least 1 (\"40\") or one per driver (\"overlay2=40,btrfs=12\"; drivers %s)",
		v, strings.Join(drivers, ", "))
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if n < 1 {
			return bad
		}
		for _, d := range drivers {
			runs[d] = n
		}
		return nil
	}
	for _, f := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if !ok || err != nil || n < 1 || !slices.Contains(drivers, strings.TrimSpace(k)) {
			return bad
		}
		runs[strings.TrimSpace(k)] = n
	}
	return nil
}

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
	binary                       string // "new" or "old", as recorded
	bin, host, lockFile, workDir string
	config                       string   // YAML; "" is the built-in defaults
	args                         []string // after `run`: profile, rounds, budgets
	env                          []string
	timeout                      time.Duration
}

// lpOutput is what one run printed: its document, and how it ended.
type lpOutput struct {
	doc      *report.Run
	recorded []string // the arguments as results.json records them
	stderr   string   // its last lines
	// exitErr is the process's error (its exit status) when it still
	// printed a document.
	exitErr error
}

// run executes it and keeps its document. A run whose engine could not be
// measured exits 1 and still prints its document: that is an error here,
// with the document's message.
func (r lpRun) run(ctx context.Context) (*runDoc, error) {
	o, err := r.execute(ctx)
	if err != nil {
		return nil, err
	}
	what := "layerprobe " + strings.Join(r.args, " ")
	if e := o.doc.Engines[0].Error; e != nil {
		return nil, fmt.Errorf("%s: engine error %s: %s", what, e.Code, e.Message)
	}
	d := docOf(r.binary, o.recorded, r.config, r.env, o.doc)
	if o.exitErr != nil {
		return d, fmt.Errorf("%s: %w; stderr: %s", what, o.exitErr, o.stderr)
	}
	return d, nil
}

// execute runs it and reads its document of one engine; an error means
// there is none.
func (r lpRun) execute(ctx context.Context) (lpOutput, error) {
	if err := os.MkdirAll(r.workDir, 0o700); err != nil {
		return lpOutput{}, fmt.Errorf("work dir: %w", err)
	}
	const cfgName = "run-config.yml"
	cfg := filepath.Join(r.workDir, cfgName)
	if err := os.WriteFile(cfg, []byte(r.config), 0o600); err != nil {
		return lpOutput{}, fmt.Errorf("write config: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	args := append([]string{"run", "--config", cfg}, r.args...)
	args = append(args, "--output", "json", "--log.level", "warn")
	what := "layerprobe " + strings.Join(r.args, " ")
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Env = append(lpBaseEnv(r.host, r.lockFile), r.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 30 * time.Second
	runErr := cmd.Run()
	stderr := testharness.Tail(errb.String(), 10)
	if ctx.Err() != nil {
		return lpOutput{}, fmt.Errorf("%s: no result within %s: %w; stderr: %s", what, r.timeout, ctx.Err(), stderr)
	}
	var doc report.Run
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		return lpOutput{}, fmt.Errorf("%s: %v; output not JSON: %w; stderr: %s", what, runErr, err, stderr)
	}
	if len(doc.Engines) != 1 {
		return lpOutput{}, fmt.Errorf("%s: %d engines in the document, want 1", what, len(doc.Engines))
	}
	return lpOutput{doc: &doc, recorded: append([]string{"run", "--config", cfgName}, args[3:]...),
		stderr: stderr, exitErr: runErr}, nil
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
