package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/prometheus/procfs"
)

const e2eRounds = 6 // the fewest rounds with a finite 95% interval

var (
	wantTargets = []string{"host", "container", "bind", "volume"}
	wantJobs    = []string{"seqwrite", "randwrite", "fsync", "smallfiles"}
)

func TestRunOnPrivateEngines(t *testing.T) {
	t.Parallel() // only starts its drivers' subtests, which queue (a place held here would idle while they wait)
	cases := []struct {
		name            string
		opts            testdaemon.Options
		driver, backing string
	}{
		{"overlay2", testdaemon.Options{Driver: "overlay2"}, "overlay2", "extfs"},
		{"btrfs", testdaemon.Options{Driver: "btrfs", Backing: "btrfs", SizeMiB: 4096}, "btrfs", "btrfs"},
		{"vfs", testdaemon.Options{Driver: "vfs"}, "vfs", "extfs"},
	}
	hostFio := hostFioVersion(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			queue.Parallel(t) // one private engine each, as TestMoreEngines's drivers
			d := testdaemon.Start(t, c.opts)
			run := runChecked(t, d, c.driver, c.backing, hostFio)
			t.Logf("%s: %.0f s, %d MiB written", c.name, run.DurationSeconds, run.BytesWritten>>20)
			checkNothingLeft(t, d)
		})
	}
}

// TestAdaptiveRunKeepsItsBudget: without --rounds the default profile goes
// on until the precision or a budget; with an unreachable precision and a
// time budget shorter than a round, the minimum rounds of every workload
// run (the byte budget holds them: at most 1262 MiB with the default
// profile's caps on four targets, fio.Profile.MaxBytes, 80 MiB of them
// smallfiles' trees and 128 MiB fsync's four files) and the time budget
// ends it.
func TestAdaptiveRunKeepsItsBudget(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	const budget = 1664 << 20
	res := layerprobe(t, d.Host, 10*time.Minute, "run", "--output", "json", "--precision", "0.0001",
		"--max-bytes", "1664MiB", "--max-duration", "1s", "--log.level", "warn")
	if res.code != 0 {
		t.Fatalf("layerprobe run exited %d\nstderr:\n%s", res.code, res.stderr)
	}
	var run report.Run
	if err := json.Unmarshal([]byte(res.stdout), &run); err != nil {
		t.Fatalf("decode output: %v", err)
	}
	e := run.Engines[0]
	if run.Rounds != 0 || run.Precision != 0.0001 || run.MaxBytes != budget {
		t.Errorf("header: rounds %d precision %v max_bytes %d", run.Rounds, run.Precision, run.MaxBytes)
	}
	if e.StopReason != "time" || e.BytesWritten > budget || e.Rounds != 6*len(wantJobs) {
		t.Errorf("stop %q after %d rounds and %d bytes; want time after %d, within %d bytes", e.StopReason, e.Rounds, e.BytesWritten, 6*len(wantJobs), budget)
	}
	for _, r := range e.Results {
		if r.RoundsOK+r.RoundsFailed != 6 {
			t.Errorf("%s/%s: %d rounds, want the profile's minimum 6", r.Target, r.Workload, r.RoundsOK+r.RoundsFailed)
		}
	}
	t.Logf("adaptive run: %d rounds, %d MiB, %.0f s", e.Rounds, e.BytesWritten>>20, e.DurationSeconds)
}

// checkNothingLeft: after a run, nothing labelled is left on the engine and
// the scratch directory is gone.
func checkNothingLeft(t *testing.T, d *testdaemon.Daemon) {
	t.Helper()
	if l := newAPI(d.Host).labelled(t); !l.Empty() {
		t.Errorf("left behind on the engine: %+v", l)
	}
	scratch := filepath.Join(d.DataRoot, "layerprobe-scratch")
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(scratch)
		t.Errorf("scratch directory %s left behind (%d entries, err %v)", scratch, len(entries), err)
	}
}

// runChecked runs `layerprobe run` for e2eRounds rounds against the daemon
// and checks its output with checkRun.
func runChecked(t *testing.T, d *testdaemon.Daemon, driver, backing, fioVersion string) report.Run {
	t.Helper()
	res := layerprobe(t, d.Host, 10*time.Minute, "run", "--output", "json",
		"--rounds", strconv.Itoa(e2eRounds), "--log.level", "warn")
	if res.code != 0 {
		t.Fatalf("layerprobe run exited %d\nstderr:\n%s", res.code, res.stderr)
	}
	var run report.Run
	if err := json.Unmarshal([]byte(res.stdout), &run); err != nil {
		t.Fatalf("decode output: %v\n%s", err, res.stdout)
	}
	checkRun(t, run, driver, backing, fioVersion)
	return run
}

func checkRun(t *testing.T, run report.Run, driver, backing, fioVersion string) {
	t.Helper()
	checkRunTargets(t, run, "quick", driver, backing, fioVersion, wantTargets)
}

// checkRunTargets checks a run of e2eRounds rounds of profile on the given
// targets.
func checkRunTargets(t *testing.T, run report.Run, profile, driver, backing, fioVersion string, wantTargets []string) {
	t.Helper()
	if run.SchemaVersion != report.SchemaVersion || run.Profile != profile || run.Rounds != e2eRounds {
		t.Errorf("header: schema %d profile %q rounds %d", run.SchemaVersion, run.Profile, run.Rounds)
	}
	if len(run.Engines) != 1 {
		t.Fatalf("engines: %d, want 1", len(run.Engines))
	}
	e := run.Engines[0]
	if e.Error != nil {
		t.Fatalf("engine error: %+v", e.Error)
	}
	if e.Driver != driver || e.BackingFS != backing {
		t.Errorf("driver %q on %q; want %q on %q", e.Driver, e.BackingFS, driver, backing)
	}
	if e.FioVersion != fioVersion {
		t.Errorf("fio version in the probe %q; host fio is %q", e.FioVersion, fioVersion)
	}
	if e.BytesWritten <= 0 || run.BytesWritten != e.BytesWritten || e.LayoutBytes <= 0 || e.LayoutBytes >= e.BytesWritten {
		t.Errorf("bytes written: run %d, engine %d, layout %d", run.BytesWritten, e.BytesWritten, e.LayoutBytes)
	}
	if e.Rounds != e2eRounds*len(wantJobs) || e.StopReason != "rounds" {
		t.Errorf("%d rounds, stop %q; want %d, rounds", e.Rounds, e.StopReason, e2eRounds*len(wantJobs))
	}
	if want := e2eRounds * len(wantTargets) * len(wantJobs); len(e.Samples) != want {
		t.Errorf("samples: %d, want %d", len(e.Samples), want)
	}
	// Every round holds each target exactly once per job, in some order.
	// A random-write execution may end within its ramp on a fast moment of
	// the disk (README, limitations): the run records it as failed with
	// reason no_io, and that record is what is checked. Any other failure
	// fails the test.
	// No execution writes more than its job's bound, by which the probe
	// keeps its byte budgets (fio.Job.MaxWriteBytes), on real fio in
	// every target.
	prof, err := fio.LookupProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	bound := map[measure.Workload]int64{}
	for _, j := range prof.Jobs {
		bound[j.Workload] = j.MaxWriteBytes(fio.Steady)
	}
	seen, noIO := map[string]int{}, map[string]int{}
	secs := map[measure.Workload]float64{}
	defer func() {
		t.Logf("%s: seconds of executions per workload (rounds × targets): %v", driver, secs)
	}()
	for _, s := range e.Samples {
		secs[s.Workload] += math.Round(s.DurationSeconds*10) / 10
		key := string(s.Target) + "/" + string(s.Workload)
		seen[key]++
		if s.BytesWritten > bound[s.Workload] {
			t.Errorf("round %d %s wrote %d bytes, more than its bound %d", s.Round, key, s.BytesWritten, bound[s.Workload])
		}
		switch {
		case s.OK():
		case s.Workload == "randwrite" && s.Failure != nil && s.Failure.Reason == measure.ReasonNoIO && s.Failure.Message != "":
			noIO[key]++
			t.Logf("round %d %s recorded as failed, as documented: %s", s.Round, key, s.Failure.Message)
		default:
			t.Errorf("round %d %s failed: %+v", s.Round, key, s.Failure)
		}
	}
	for _, j := range wantJobs {
		for _, tg := range wantTargets {
			if seen[tg+"/"+j] != e2eRounds {
				t.Errorf("%s/%s ran %d times, want %d", tg, j, seen[tg+"/"+j], e2eRounds)
			}
		}
	}
	byKey := map[string]measure.Result{}
	for _, r := range e.Results {
		byKey[string(r.Target)+"/"+string(r.Workload)] = r
		if o, ok := r.Overhead[measure.MetricIOPS]; ok && r.Workload == measure.SmallFiles {
			p99 := r.Overhead[measure.MetricLatencyP99]
			t.Logf("%s %s smallfiles: %.1f%% of host's operations per second [%.1f, %.1f], p99 %.1f%% [%.1f, %.1f]", driver, r.Target,
				o.PercentOfHost, o.PercentLow, o.PercentHigh, p99.PercentOfHost, p99.PercentLow, p99.PercentHigh)
		}
	}
	checkSmallFiles(t, driver, byKey, wantTargets)
	for _, tg := range wantTargets {
		for _, j := range wantJobs {
			r, ok := byKey[tg+"/"+j]
			if !ok {
				t.Errorf("no result for %s/%s", tg, j)
				continue
			}
			if r.RoundsOK+r.RoundsFailed != e2eRounds || r.RoundsFailed != noIO[tg+"/"+j] || r.RoundsOK == 0 {
				t.Errorf("%s/%s: %d ok, %d failed", tg, j, r.RoundsOK, r.RoundsFailed)
			}
			for name, v := range map[string]float64{"iops": r.Raw.IOPS, "bandwidth": r.Raw.BandwidthBytes,
				"latency_p50": r.Raw.LatencyP50, "latency_p99": r.Raw.LatencyP99} {
				if !(v > 0) || math.IsInf(v, 0) {
					t.Errorf("%s/%s raw %s = %v; want finite > 0", tg, j, name, v)
				}
			}
			if j == "fsync" && (!(r.Raw.FsyncP99 > 0) || math.IsInf(r.Raw.FsyncP99, 0)) {
				t.Errorf("%s/fsync raw fsync_p99 = %v", tg, r.Raw.FsyncP99)
			}
			if tg == "host" {
				if len(r.Overhead) != 0 {
					t.Errorf("host has overheads: %v", r.Overhead)
				}
				continue
			}
			metrics := []string{"iops", "bandwidth", "latency_p50", "latency_p99"}
			if j == "fsync" {
				metrics = append(metrics, "fsync_p99")
			}
			for _, m := range metrics {
				o, ok := r.Overhead[m]
				if !ok {
					t.Errorf("%s/%s: no %s overhead", tg, j, m)
					continue
				}
				for _, v := range []float64{o.Ratio, o.CILow, o.CIHigh, o.PercentOfHost} {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Errorf("%s/%s %s: non-finite figure in %+v", tg, j, m, o)
					}
				}
				if !(o.CILow <= o.Ratio && o.Ratio <= o.CIHigh) {
					t.Errorf("%s/%s %s: CI [%v, %v] does not contain the median %v", tg, j, m, o.CILow, o.CIHigh, o.Ratio)
				}
				// On a busy disk a 100 ms sequential execution may end
				// before its first 1 MiB write, and a short one has no
				// latency percentile: such a round is recorded without
				// that figure. Most rounds must pair, and with all of them
				// paired the interval must keep its 95%.
				minPairs := e2eRounds / 2
				if strings.HasPrefix(m, "latency_") {
					minPairs = 2 // a percentile needs completed I/Os in both arms
				}
				if o.N < minPairs || o.N > e2eRounds || (o.N == e2eRounds && o.Coverage < 0.95) {
					t.Errorf("%s/%s %s: %d rounds, coverage %v", tg, j, m, o.N, o.Coverage)
				}
			}
		}
	}
}

// minIntervalPairs is the fewest round pairs with a 95% interval; below it
// the run withholds the bounds (measure.Overhead.Withheld).
const minIntervalPairs = 6

// checkSmallFiles checks that smallfiles ran on every target of the driver
// and that every container target has an operations-per-second estimate
// whose interval agrees with its rounds: bounds around the estimate from
// minIntervalPairs round pairs on, withheld (null bounds) below.
func checkSmallFiles(t *testing.T, driver string, byKey map[string]measure.Result, targets []string) {
	t.Helper()
	for _, tg := range targets {
		r, ok := byKey[tg+"/"+string(measure.SmallFiles)]
		if !ok {
			t.Errorf("%s: no smallfiles result for %s", driver, tg)
			continue
		}
		if r.RoundsOK == 0 || !(r.Raw.IOPS > 0) {
			t.Errorf("%s %s smallfiles: %d ok rounds, %v operations per second", driver, tg, r.RoundsOK, r.Raw.IOPS)
		}
		if tg == "host" {
			continue
		}
		for _, m := range []string{measure.MetricIOPS, measure.MetricLatencyP99} {
			o, ok := r.Overhead[m]
			if !ok {
				t.Errorf("%s %s smallfiles: no %s estimate", driver, tg, m)
				continue
			}
			if math.IsNaN(o.Ratio) || math.IsInf(o.Ratio, 0) || math.IsNaN(o.PercentOfHost) || o.N <= 0 || o.N > e2eRounds {
				t.Errorf("%s %s smallfiles %s: estimate %+v", driver, tg, m, o)
				continue
			}
			bounded := !math.IsNaN(o.CILow) && !math.IsNaN(o.CIHigh)
			switch {
			case o.N >= minIntervalPairs && (o.Withheld || !bounded || o.CILow > o.Ratio || o.Ratio > o.CIHigh):
				t.Errorf("%s %s smallfiles %s: %d round pairs but interval %+v", driver, tg, m, o.N, o)
			case o.N < minIntervalPairs && (!o.Withheld || bounded):
				t.Errorf("%s %s smallfiles %s: %d round pairs, interval not withheld: %+v", driver, tg, m, o.N, o)
			}
		}
	}
}

func hostFioVersion(t *testing.T) string {
	out, err := exec.Command("fio", "--version").Output()
	if err != nil {
		t.Fatalf("fio --version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// A run killed with SIGKILL half way leaves its probe container, volume and
// scratch files; `layerprobe cleanup` removes all of them.
func TestKilledRunThenCleanupLeavesNothing(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	checkKilledRunThenCleanup(t, testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"}))
}

// checkKilledRunThenCleanup kills a run with SIGKILL while fio is busy and
// checks that `layerprobe cleanup` removes what it left.
func checkKilledRunThenCleanup(t *testing.T, d *testdaemon.Daemon) {
	t.Helper()
	api := newAPI(d.Host)
	run := startLayerprobe(t, d.Host, "run", "--profile", "smoke", "--rounds", "100", "--log.level", "warn")
	// Wait until the probe container runs and fio is busy in it.
	deadline := time.Now().Add(3 * time.Minute)
	for len(api.labelled(t).Containers) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no probe container appeared")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	run.Kill()

	left := api.labelled(t)
	if len(left.Containers) == 0 || len(left.Volumes) == 0 {
		t.Fatalf("after SIGKILL expected a leftover container and volume, got %+v", left)
	}
	scratch := filepath.Join(d.DataRoot, "layerprobe-scratch")
	if entries, err := os.ReadDir(scratch); err != nil || len(entries) == 0 {
		t.Fatalf("after SIGKILL expected a leftover scratch directory in %s: %v", scratch, err)
	}

	res := layerprobe(t, d.Host, 3*time.Minute, "cleanup")
	if res.code != 0 {
		t.Fatalf("cleanup exited %d: %s", res.code, res.stderr)
	}
	for _, c := range left.Containers {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		if !strings.Contains(res.stdout, name) {
			t.Errorf("cleanup output does not name container %s:\n%s", name, res.stdout)
		}
	}
	if l := api.labelled(t); !l.Empty() {
		t.Errorf("left after cleanup: %+v", l)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("scratch directory %s still there after cleanup (err %v)", scratch, err)
	}
	// No fio of the killed run may still write to the data root.
	noFioUnder(t, d.DataRoot)
}

// fioGoneWithin bounds how long a killed run's fio may outlive its
// cleanup. A SIGKILLed fio leaves /proc only when its write or fsync in
// flight completes: on a shared disk under the whole suite's load that
// took longer than the second these tests used to allow (a CI run saw
// one still there at once), never many seconds.
const fioGoneWithin = 15 * time.Second

// noFioUnder fails the test if fio processes naming a path under dir are
// still there after fioGoneWithin, and logs how long any took to go.
func noFioUnder(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	first := procStates(fioUnder(dir))
	if len(first) == 0 {
		return
	}
	testharness.Eventually(t, fioGoneWithin, 100*time.Millisecond, "no fio runs under "+dir, func() (bool, string) {
		left := fioUnder(dir)
		return len(left) == 0, fmt.Sprintf("%v (states at first: %v)", procStates(left), first)
	})
	t.Logf("fio under %s (states %v) gone after %v", dir, first, time.Since(start).Round(time.Millisecond))
}

// procStates names each pid with its state from /proc/PID/stat (D:
// waiting for I/O), for the messages.
func procStates(pids []string) []string {
	out := make([]string, 0, len(pids))
	for _, pid := range pids {
		state := "?"
		if n, err := strconv.Atoi(pid); err == nil {
			if p, err := procfs.NewProc(n); err == nil {
				if st, err := p.Stat(); err == nil {
					state = st.State
				}
			}
		}
		out = append(out, pid+":"+state)
	}
	return out
}

// fioUnder lists fio processes whose command line names a path under dir.
func fioUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "fio" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmdline), dir) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestUnreachableEngineNamesTheSocket(t *testing.T) {
	sock := "unix:///tmp/lp-no-such-engine.sock"
	res := layerprobe(t, sock, time.Minute, "run")
	if res.code != 1 {
		t.Fatalf("exit code %d, want 1; stderr: %s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "/tmp/lp-no-such-engine.sock") {
		t.Errorf("stderr should be one line naming the socket, got:\n%s", res.stderr)
	}
	if res.stdout != "" {
		t.Errorf("no table expected when the only engine is unreachable, got:\n%s", res.stdout)
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(good, []byte("profile: quick\nrounds: 8\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("profile: fastest\nrounds: 1\nengines:\n  - name: Bad Name\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// rounds is the deprecated name of budget.rounds: still valid, named.
	if res := layerprobe(t, "", time.Minute, "config", "check", good); res.code != 0 {
		t.Errorf("config check good: exit %d: %s", res.code, res.stderr)
	} else if !strings.Contains(res.stderr, "line 2: rounds is deprecated, write budget.rounds") {
		t.Errorf("config check good: stderr lacks the deprecated key:\n%s", res.stderr)
	}
	res := layerprobe(t, "", time.Minute, "config", "check", bad)
	if res.code != 2 {
		t.Errorf("config check bad: exit %d, want 2", res.code)
	}
	for _, want := range []string{"profile", "fastest", "rounds", "engines[0].name"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("config check bad: stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if res := layerprobe(t, "", time.Minute, "config", "check", filepath.Join(dir, "missing.yml")); res.code != 2 {
		t.Errorf("config check missing file: exit %d, want 2", res.code)
	}
}
