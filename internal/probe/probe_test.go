package probe

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/enginetest"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

var allTargets = []measure.Target{measure.TargetContainer, measure.TargetBind, measure.TargetVolume}

// testOptions measure every target with the fake fio on the host and a
// user-named probe image (so no image is assembled from the host's fio).
func testOptions(t *testing.T) Options {
	return Options{EngineName: "fake", FioBinary: enginetest.FakeFio(t), ProbeImage: "layerprobe-test:fake",
		Targets: allTargets, KeepImage: true}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// prepare starts a session on a fake engine whose data root is a fresh
// directory.
func prepare(t *testing.T, opts Options) (*Session, *enginetest.Engine) {
	t.Helper()
	eng := enginetest.New(t.TempDir())
	s, err := Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, eng
}

func smoke(t *testing.T) fio.Profile {
	t.Helper()
	p, err := fio.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrepare(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	if got, want := s.Targets(), append([]measure.Target{measure.TargetHost}, allTargets...); !slices.Equal(got, want) {
		t.Errorf("Targets = %v, want %v", got, want)
	}
	if s.FioVersion != enginetest.FioVersion || s.Info.Driver != "overlay2" {
		t.Errorf("session: fio %q, driver %q", s.FioVersion, s.Info.Driver)
	}
	if fi, err := os.Stat(s.hostDir); err != nil || !fi.IsDir() || filepath.Dir(s.hostDir) != filepath.Join(s.Info.DataRoot, "layerprobe-scratch") {
		t.Errorf("host directory %s: %v", s.hostDir, err)
	}
	// Leftovers of killed processes go before anything is created.
	calls := eng.Calls()
	if i, j := slices.Index(calls, "SweepStale"), slices.Index(calls, "StartProbe steady"); i < 0 || j < 0 || i > j {
		t.Errorf("calls %v: want SweepStale before StartProbe", calls)
	}
	if !s.Healthy(context.Background()) {
		t.Error("Healthy = false with the probe running")
	}
	eng.RemoveAll()
	if s.Healthy(context.Background()) {
		t.Error("Healthy = true after the probe container was removed")
	}
}

func TestPrepareRefusesAndLeavesNothing(t *testing.T) {
	shmScratch := func(t *testing.T, o *Options, _ *enginetest.Engine) {
		d, err := os.MkdirTemp("/dev/shm", "lpprobe")
		if err != nil {
			t.Skipf("no /dev/shm: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		o.ScratchDir = d
	}
	wrongFio := func(t *testing.T, o *Options, _ *enginetest.Engine) {
		bin := filepath.Join(t.TempDir(), "fio")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho fio-2.0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		o.FioBinary = bin
	}
	for _, c := range []struct {
		name  string
		setup func(*testing.T, *Options, *enginetest.Engine)
		code  string
		// started: a probe container was started (and must be gone).
		started bool
	}{
		{"engine unreachable", func(_ *testing.T, _ *Options, e *enginetest.Engine) { e.SetInfoErr(errors.New("dial: refused")) }, "unreachable", false},
		{"scratch on another file system", shmScratch, "different_filesystem", false},
		{"probe does not start", func(_ *testing.T, _ *Options, e *enginetest.Engine) { e.SetStartErr(errors.New("no space")) }, "probe", false},
		{"fio versions differ", wrongFio, "fio_version_mismatch", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dataRoot := t.TempDir()
			eng := enginetest.New(dataRoot)
			opts := testOptions(t)
			c.setup(t, &opts, eng)
			s, err := Prepare(context.Background(), eng, opts, discard())
			var perr *Error
			if s != nil || !errors.As(err, &perr) || perr.Code != c.code {
				t.Fatalf("Prepare = %v, %v; want a probe.Error with code %s", s, err, c.code)
			}
			if eng.Live() != 0 {
				t.Errorf("%d probe containers left running", eng.Live())
			}
			if c.started != slices.Contains(eng.Calls(), "RemoveProbe steady") {
				t.Errorf("calls %v: started %v, want the probe removed exactly when it was started", eng.Calls(), c.started)
			}
			if ents, _ := os.ReadDir(filepath.Join(dataRoot, "layerprobe-scratch")); len(ents) > 0 {
				t.Errorf("scratch directory left: %v", ents)
			}
		})
	}
	t.Run("data root not visible", func(t *testing.T) {
		eng := enginetest.New("/nonexistent/docker")
		_, err := Prepare(context.Background(), eng, testOptions(t), discard())
		var perr *Error
		if !errors.As(err, &perr) || perr.Code != "data_root_not_visible" {
			t.Errorf("Prepare = %v; want data_root_not_visible", err)
		}
	})
}

func TestCheckTargetsKeepsTheDataRootsFileSystem(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "lpvol")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	eng := enginetest.New(t.TempDir())
	eng.SetProbePaths("", shm) // the volume lives elsewhere
	opts := testOptions(t)
	opts.Targets = []measure.Target{measure.TargetVolume, measure.TargetContainer}
	s, err := Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if got := s.Targets(); !slices.Equal(got, []measure.Target{measure.TargetHost, measure.TargetContainer}) {
		t.Errorf("Targets = %v, want host and container (bind not asked for, volume elsewhere)", got)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "target volume skipped") {
		t.Errorf("Warnings = %q", s.Warnings)
	}
}

// TestRunRoundsPlan: every round runs every job on every target exactly
// once, targets in a fresh random order per job, rounds numbered from
// first; progress counts every job.
func TestRunRoundsPlan(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	prof := smoke(t)
	var progress []Progress
	samples := s.RunRounds(context.Background(), prof, 5, 3, rand.New(rand.NewPCG(1, 2)), func(p Progress) { progress = append(progress, p) })
	if want := 3 * len(prof.Jobs) * 4; len(samples) != want {
		t.Fatalf("%d samples, want %d", len(samples), want)
	}
	type key struct {
		round int
		w     measure.Workload
	}
	orders := map[key][]measure.Target{}
	for _, sm := range samples {
		if !sm.OK() {
			t.Errorf("round %d %s/%s failed: %v", sm.Round, sm.Target, sm.Workload, sm.Failure)
		}
		k := key{sm.Round, sm.Workload}
		orders[k] = append(orders[k], sm.Target)
		if sm.Order != len(orders[k]) {
			t.Errorf("round %d %s: %s has order %d, want %d", sm.Round, sm.Workload, sm.Target, sm.Order, len(orders[k]))
		}
	}
	distinct := map[string]bool{}
	for k, o := range orders {
		if k.round < 5 || k.round > 7 {
			t.Errorf("round %d outside 5..7", k.round)
		}
		sorted := slices.Clone(o)
		slices.Sort(sorted)
		if want := []measure.Target{"bind", "container", "host", "volume"}; !slices.Equal(sorted, want) {
			t.Errorf("round %d %s ran %v, want every target once", k.round, k.w, o)
		}
		distinct[strings.Join(strs(o), ",")] = true
	}
	if len(distinct) < 2 {
		t.Errorf("the target order never changed: %v", distinct)
	}
	if n := len(eng.Jobs()); n != 3*len(prof.Jobs)*3 {
		t.Errorf("%d jobs in the probe container, want %d", n, 3*len(prof.Jobs)*3)
	}
	last := progress[len(progress)-1]
	if len(progress) != len(samples)+1 || last.Done != last.Total || last.Total != len(samples) || last.Round != 7 || last.Rounds != 7 {
		t.Errorf("%d progress reports, last %+v", len(progress), last)
	}
}

// TestRunRoundsRecordsFailures: a failed job is a sample with its reason,
// the run goes on, and what the job may have left is removed.
func TestRunRoundsRecordsFailures(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Target == measure.TargetVolume && j.Workload == measure.Fsync {
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=12, err=28/file:io_u.c:1889, func=io_u error, error=No space left on device")}
		}
		return nil
	})
	samples := s.RunRounds(context.Background(), smoke(t), 1, 2, rand.New(rand.NewPCG(3, 4)), nil)
	failed := 0
	for _, sm := range samples {
		if sm.OK() {
			continue
		}
		failed++
		if sm.Target != measure.TargetVolume || sm.Workload != measure.Fsync || sm.Failure.Reason != measure.ReasonNoSpace {
			t.Errorf("unexpected failure %s/%s: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
	if failed != 2 || len(samples) != 2*3*4 {
		t.Errorf("%d samples, %d failed; want 24 and 2", len(samples), failed)
	}
	if n := count(eng.Calls(), "Exec clean "+engine.ContainerVolume); n != 2 {
		t.Errorf("job directory cleaned %d times after failed volume jobs, want 2; calls %v", n, eng.Calls())
	}
	if n := count(eng.Calls(), "Exec clean "+engine.ContainerLayer); n != 0 {
		t.Errorf("the writable layer's directory cleaned %d times after successful jobs", n)
	}

	// The probe container vanishes: every container job fails with
	// exec_error, the host's still run.
	eng.RemoveAll()
	samples = s.RunRounds(context.Background(), smoke(t), 3, 1, rand.New(rand.NewPCG(3, 4)), nil)
	for _, sm := range samples {
		if (sm.Target == measure.TargetHost) != sm.OK() || !sm.OK() && sm.Failure.Reason != measure.ReasonExec {
			t.Errorf("%s/%s without a probe container: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
}

// TestHostJobFailureClearsItsDirectory: a failed host job's files are
// removed; the host directory itself stays.
func TestHostJobFailureClearsItsDirectory(t *testing.T) {
	s, prof := hostJob(t, "echo half > \"$d/seqwrite.0.0\"\necho 'fio: io_u error on file: Input/output error' >&2\nexit 1\n")
	samples := s.RunRounds(context.Background(), prof, 1, 1, rand.New(rand.NewPCG(5, 6)), nil)
	for _, sm := range samples {
		if (sm.Target == measure.TargetHost) == sm.OK() {
			t.Errorf("%s: ok %v, want only the host job failed", sm.Target, sm.OK())
		}
	}
	if ents, err := os.ReadDir(s.hostDir); err != nil || len(ents) != 0 {
		t.Errorf("host directory after the failed job: %v, %v; want it empty", ents, err)
	}
}

// TestHostJobTimeout: a host fio that hangs is stopped at its job's
// timeout (its whole process group) and recorded as a timeout.
func TestHostJobTimeout(t *testing.T) {
	s, prof := hostJob(t, "sleep 60 &\nwait\n")
	prof.Jobs[0].Timeout = 300 * time.Millisecond
	start := time.Now()
	for _, sm := range s.RunRounds(context.Background(), prof, 1, 1, rand.New(rand.NewPCG(17, 18)), nil) {
		if sm.Target == measure.TargetHost && (sm.OK() || sm.Failure.Reason != measure.ReasonTimeout) {
			t.Errorf("hung host fio: %+v, want a timeout", sm.Failure)
		}
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the hung fio held the round for %s", el)
	}
}

func TestRunRoundsRefusesJobsWithoutSpace(t *testing.T) {
	opts := testOptions(t)
	opts.MinFreeRatio = 1 // no file system has everything free
	s, eng := prepare(t, opts)
	samples := s.RunRounds(context.Background(), smoke(t), 1, 1, rand.New(rand.NewPCG(7, 8)), nil)
	for _, sm := range samples {
		if sm.OK() || sm.Failure.Reason != measure.ReasonNoSpace || !strings.Contains(sm.Failure.Message, "free-space check") {
			t.Errorf("%s/%s: %+v, want the free-space check to refuse it", sm.Target, sm.Workload, sm.Failure)
		}
	}
	if n := len(eng.Jobs()); n != 0 {
		t.Errorf("%d jobs ran although the space check refused them", n)
	}
}

func TestRunRoundsWithoutHostFio(t *testing.T) {
	opts := testOptions(t)
	opts.FioBinary = filepath.Join(t.TempDir(), "no-fio")
	s, _ := prepare(t, opts)
	for _, sm := range s.RunRounds(context.Background(), smoke(t), 1, 1, rand.New(rand.NewPCG(9, 10)), nil) {
		if sm.Target == measure.TargetHost && (sm.OK() || sm.Failure.Reason != measure.ReasonFioMissing) ||
			sm.Target != measure.TargetHost && !sm.OK() {
			t.Errorf("%s/%s: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
}

func TestRunRoundsStopsWhenCanceled(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	ctx, cancel := context.WithCancel(context.Background())
	jobs := 0
	eng.SetFail(func(enginetest.Job) *engine.ExecResult {
		if jobs++; jobs == 2 {
			cancel()
		}
		return nil
	})
	samples := s.RunRounds(ctx, smoke(t), 1, 10, rand.New(rand.NewPCG(11, 12)), nil)
	if len(samples) == 0 || len(samples) >= 10*3*4 {
		t.Fatalf("%d samples after a cancel during round 1", len(samples))
	}
	last := samples[len(samples)-1]
	if last.OK() || last.Failure.Reason != measure.ReasonCanceled {
		t.Errorf("the job running at the cancel: %+v, want canceled", last.Failure)
	}
}

func TestCloseRemovesWhatPrepareCreated(t *testing.T) {
	eng := enginetest.New(t.TempDir())
	opts := testOptions(t)
	s, err := Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatal(err)
	}
	hostDir, scratch := s.hostDir, s.scratch
	s.Close(context.Background())
	if eng.Live() != 0 {
		t.Errorf("%d probe containers left", eng.Live())
	}
	if _, err := os.Stat(hostDir); !os.IsNotExist(err) {
		t.Errorf("host directory %s left: %v", hostDir, err)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("empty scratch root %s left: %v", scratch, err)
	}
	if slices.Contains(eng.Calls(), "Sweep images") {
		t.Error("a user-named probe image was swept")
	}

	// A one-shot session with an image of its own removes the image too.
	s, err = Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatal(err)
	}
	s.opts.ProbeImage, s.opts.KeepImage = "", false
	s.Close(context.Background())
	if !slices.Contains(eng.Calls(), "Sweep images") {
		t.Errorf("calls %v: the session's own image was not swept", eng.Calls())
	}
}

// TestRunColdPairsEachRound: every cold round starts and removes a fresh
// container, measures fsync on host and container (the host before or
// after the container, at random) and times the first write to every
// copy-up size on both sides.
func TestRunColdPairsEachRound(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetSlowdown(measure.TargetContainer, 3)
	const rounds = 4
	run, err := s.RunCold(context.Background(), smoke(t), 10, rounds, rand.New(rand.NewPCG(13, 14)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if eng.Started(measure.ModeCold) != rounds || eng.Live() != 1 {
		t.Errorf("%d cold containers started, %d live; want %d started and only the steady probe left",
			eng.Started(measure.ModeCold), eng.Live(), rounds)
	}
	hostFirst := map[bool]bool{}
	for r := 10; r < 10+rounds; r++ {
		var order []measure.Target
		for _, sm := range run.Samples {
			if sm.Round == r {
				if !sm.OK() || sm.Workload != measure.Fsync || sm.Order != len(order)+1 {
					t.Errorf("round %d: sample %s %+v order %d", r, sm.Target, sm.Failure, sm.Order)
				}
				order = append(order, sm.Target)
			}
		}
		if len(order) != 2 || order[0] == order[1] {
			t.Fatalf("round %d ran %v, want host and container", r, order)
		}
		hostFirst[order[0] == measure.TargetHost] = true
	}
	if len(hostFirst) != 2 {
		t.Errorf("the host arm always ran on the same side of the container: %v", hostFirst)
	}
	if want := rounds * 2 * 3; len(run.CopyUp) != want {
		t.Errorf("%d copy-up samples, want %d", len(run.CopyUp), want)
	}
	for _, u := range run.CopyUp {
		if !u.OK() {
			t.Errorf("copy-up %+v failed", u)
		}
	}
	if run.CopyUpBytes <= 0 || run.Reflink == nil {
		t.Errorf("copy-up bytes %d, reflink %v", run.CopyUpBytes, run.Reflink)
	}
	results := measure.Summarize(run.Samples, 0.95)
	for _, r := range results {
		if o := r.Overhead[measure.MetricFsyncP99]; r.Target == measure.TargetContainer && !(o.Ratio > 1) {
			t.Errorf("cold container fsync overhead %+v, want about 2 (3x slower)", o)
		}
	}
	if _, err := os.Stat(filepath.Join(s.hostDir, coldHostDir)); !os.IsNotExist(err) {
		t.Errorf("host copy-up files left: %v", err)
	}

	// A fresh container that does not start is a failed round, with
	// failed copy-up samples: recorded, not fatal.
	eng.SetStartErr(errors.New("no space left on device"))
	run, err = s.RunCold(context.Background(), smoke(t), 20, 1, rand.New(rand.NewPCG(15, 16)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range run.Samples {
		if (sm.Target == measure.TargetContainer) == sm.OK() {
			t.Errorf("%s: ok %v after the container failed to start", sm.Target, sm.OK())
		}
	}
	for _, u := range run.CopyUp {
		if u.Target == measure.TargetContainer && u.OK() {
			t.Errorf("container copy-up %+v without a container", u)
		}
	}
}

func TestRunColdNeedsAnFsyncJob(t *testing.T) {
	s, _ := prepare(t, testOptions(t))
	prof := smoke(t)
	prof.Jobs = prof.Jobs[:1]
	var perr *Error
	if _, err := s.RunCold(context.Background(), prof, 1, 1, rand.New(rand.NewPCG(1, 1)), nil); !errors.As(err, &perr) || perr.Code != "profile" {
		t.Errorf("RunCold without fsync job = %v", err)
	}
}

// hostJob prepares a session of the host and container targets whose host
// fio answers --version like the fake and runs the shell code job for a
// job ($d is the job's directory); the profile is the smoke profile's
// first job.
func hostJob(t *testing.T, job string) (*Session, fio.Profile) {
	t.Helper()
	opts := testOptions(t)
	opts.FioBinary = filepath.Join(t.TempDir(), "fio")
	script := "#!/bin/sh\nfor a; do case \"$a\" in --version) echo " + enginetest.FioVersion + "; exit 0;; " +
		"--directory=*) d=${a#--directory=};; esac; done\n" + job
	if err := os.WriteFile(opts.FioBinary, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts.Targets = []measure.Target{measure.TargetContainer}
	s, _ := prepare(t, opts)
	prof := smoke(t)
	prof.Jobs = prof.Jobs[:1]
	return s, prof
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
