package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	fake := enginetest.FakeFio(t)
	// The fake fio answers the helper's smallfiles verb too (it prints
	// the output of the workload --name names): the test binary is no
	// layerprobe.
	return Options{EngineName: "fake", FioBinary: fake, HelperBinary: fake, ProbeImage: "layerprobe-test:fake",
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
	// host and bind have directories of their own under this process's
	// directory in the scratch root.
	for _, d := range []string{s.hostDir, s.bindDir} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || filepath.Dir(filepath.Dir(d)) != filepath.Join(s.Info.DataRoot, "layerprobe-scratch") {
			t.Errorf("directory %s: %v", d, err)
		}
	}
	if s.hostDir == s.bindDir {
		t.Errorf("host and bind share %s", s.hostDir)
	}
	if job := (fio.Job{Workload: measure.Fsync, Timeout: time.Minute}); s.jobTimeout(job) != time.Minute {
		t.Errorf("job timeout on the engine's host: %s, want the profile's %s", s.jobTimeout(job), job.Timeout)
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
	// slowFio answers --version only after the bound: a host too loaded
	// to start fio in time is a timeout, not a missing fio.
	slowFio := func(t *testing.T, o *Options, _ *enginetest.Engine) {
		bin := filepath.Join(t.TempDir(), "fio")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		o.FioBinary = bin
		old := fioVersionTimeout
		fioVersionTimeout = 300 * time.Millisecond
		t.Cleanup(func() { fioVersionTimeout = old })
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
		{"host fio too slow to answer", slowFio, "timeout", true},
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
	t.Run("zfs: scratch outside the pool", func(t *testing.T) {
		// The zfs driver's answer (recorded in internal/engine/testdata,
		// from moby's zfs driver): the layers are datasets of zpool rpool.
		// This machine has no zfs, so the scratch directory on the test's
		// temporary file system is outside the pool even though it shares
		// the data root's st_dev (the zfs.fsname option can put the parent
		// dataset anywhere): refused.
		dataRoot := t.TempDir()
		eng := enginetest.New(dataRoot)
		eng.UpdateInfo(func(i *engine.Info) {
			i.Driver, i.BackingFS, i.Zpool, i.ZFSDataset = "zfs", "zfs", "rpool", "rpool/var/lib/docker"
		})
		_, err := Prepare(context.Background(), eng, testOptions(t), discard())
		var perr *Error
		if !errors.As(err, &perr) || perr.Code != "different_filesystem" || !strings.Contains(err.Error(), "zpool rpool") {
			t.Errorf("Prepare = %v; want different_filesystem naming zpool rpool", err)
		}
		if eng.Live() != 0 {
			t.Errorf("%d probe containers left running", eng.Live())
		}
	})
	t.Run("data root not visible", func(t *testing.T) {
		// The engine answers from this host's kernel and host name (an
		// agent in a container without the data root's mount), so it is
		// no engine in a VM: refused.
		eng := enginetest.New("/nonexistent/docker")
		eng.UpdateInfo(func(i *engine.Info) { i.KernelVersion, i.Hostname = localKernel(), localHostname() })
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

// rounds runs a fixed number of rounds of every job, as `--rounds n` does.
func rounds(s *Session, ctx context.Context, prof fio.Profile, first, n int, seed uint64) []measure.Sample {
	return s.Measure(ctx, prof, Plan{Rounds: n}, first, rand.New(rand.NewPCG(seed, seed+1)), nil).Samples
}

// fresh is the smoke profile run the way the seed profile runs: a fresh
// file per execution, removed afterwards.
func fresh(t *testing.T) fio.Profile {
	p := smoke(t)
	p.Steady = false
	return p
}

// TestMeasureFixedRounds: every round runs one job on every target exactly
// once; a job's second round reverses its first one's order; rounds are
// numbered from first; the job files are laid out once per target, bind
// included (no two targets share a file), and removed at the end; progress
// counts every execution.
func TestMeasureFixedRounds(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	prof := smoke(t)
	var progress []Progress
	out := s.Measure(context.Background(), prof, Plan{Rounds: 4}, 5, rand.New(rand.NewPCG(1, 2)), func(p Progress) { progress = append(progress, p) })
	samples := out.Samples
	nRounds := 4 * len(prof.Jobs)
	if want := nRounds * 4; len(samples) != want || out.Rounds != nRounds || out.Stop != measure.StopRounds {
		t.Fatalf("%d samples, %d rounds, stop %q; want %d, %d, rounds", len(samples), out.Rounds, out.Stop, want, nRounds)
	}
	byRound := map[int][]measure.Sample{}
	for _, sm := range samples {
		if !sm.OK() {
			t.Errorf("round %d %s/%s failed: %v", sm.Round, sm.Target, sm.Workload, sm.Failure)
		}
		byRound[sm.Round] = append(byRound[sm.Round], sm)
	}
	var jobOrders = map[measure.Workload][][]measure.Target{}
	for r := 5; r < 5+nRounds; r++ {
		rs := byRound[r]
		var order []measure.Target
		for i, sm := range rs {
			if sm.Workload != rs[0].Workload || sm.Order != i+1 {
				t.Errorf("round %d: %s/%s order %d: one job per round, in order", r, sm.Target, sm.Workload, sm.Order)
			}
			order = append(order, sm.Target)
		}
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		if want := []measure.Target{"bind", "container", "host", "volume"}; !slices.Equal(sorted, want) {
			t.Errorf("round %d ran %v, want every target once", r, order)
		}
		if len(rs) > 0 {
			jobOrders[rs[0].Workload] = append(jobOrders[rs[0].Workload], order)
		}
	}
	distinct := map[string]bool{}
	for w, orders := range jobOrders {
		if len(orders) != 4 {
			t.Errorf("%s: %d rounds, want 4", w, len(orders))
			continue
		}
		for i := 0; i+1 < len(orders); i += 2 {
			rev := slices.Clone(orders[i])
			slices.Reverse(rev)
			if !slices.Equal(rev, orders[i+1]) {
				t.Errorf("%s: round order %v then %v, want the reverse (ABBA)", w, orders[i], orders[i+1])
			}
		}
		distinct[strings.Join(strs(orders[0]), ",")] = true
		distinct[strings.Join(strs(orders[2]), ",")] = true
	}
	if len(distinct) < 2 {
		t.Errorf("the target order never changed: %v", distinct)
	}
	// Each file is laid out once on its target before it is measured: one
	// file per job, one per round for a job with FilePerRound, or its
	// RotateFiles files for one whose files rotate (fio.Job.LayoutFiles).
	var layouts, measured, wantLayouts int
	laidOut := map[string]bool{}
	files := map[measure.Workload]map[string]bool{}
	for _, j := range prof.Jobs {
		files[j.Workload] = map[string]bool{}
		if j.Helper() {
			continue // nothing to lay out
		}
		wantLayouts += 3 * j.LayoutFiles(4) // container, volume and bind
	}
	for _, j := range eng.Jobs() {
		key := string(j.Target) + "/" + j.File
		if j.Layout {
			layouts++
			if laidOut[key] {
				t.Errorf("%s laid out twice", key)
			}
			laidOut[key] = true
			continue
		}
		measured++
		files[j.Workload][j.File] = true
		if !laidOut[key] && j.Workload != measure.SmallFiles {
			t.Errorf("%s measured before it was laid out", key)
		}
	}
	if layouts != wantLayouts || measured != nRounds*3 {
		t.Errorf("%d layouts and %d jobs in the probe container, want %d and %d", layouts, measured, wantLayouts, nRounds*3)
	}
	for _, j := range prof.Jobs {
		want := 1
		if !j.Helper() {
			want = j.LayoutFiles(4)
		}
		if len(files[j.Workload]) != want {
			t.Errorf("%s measured the files %v, want %d", j.Workload, files[j.Workload], want)
		}
	}
	// The targets lay out each file in a random order, so that no target
	// is always laid out after another (layoutJob).
	layoutOrders := map[string][]string{}
	for _, j := range eng.Jobs() {
		if j.Layout {
			k := string(j.Workload) + "/" + j.File
			layoutOrders[k] = append(layoutOrders[k], string(j.Target))
		}
	}
	firsts := map[string]bool{}
	for k, order := range layoutOrders {
		if len(order) != 3 {
			t.Errorf("%s laid out on %v, want container, volume and bind", k, order)
			continue
		}
		firsts[order[0]] = true
	}
	if len(firsts) < 2 {
		t.Errorf("over %d layouts the same target was always laid out first: %v", len(layoutOrders), firsts)
	}
	if out.LayoutBytes[measure.TargetHost] <= 0 || out.LayoutBytes[measure.TargetBind] != out.LayoutBytes[measure.TargetContainer] {
		t.Errorf("layout bytes %v: want the host's, and bind's as much as the container's", out.LayoutBytes)
	}
	var sum int64
	for _, sm := range samples {
		sum += sm.BytesWritten
	}
	for _, n := range out.LayoutBytes {
		sum += n
	}
	if out.BytesWritten != sum {
		t.Errorf("BytesWritten %d, want samples plus layout %d", out.BytesWritten, sum)
	}
	for _, dir := range []string{engine.ContainerLayer, engine.ContainerVolume} {
		if n := count(eng.Calls(), "Exec clean "+dir); n != 1 {
			t.Errorf("%s cleaned %d times, want once at the end; calls %v", dir, n, eng.Calls())
		}
	}
	if ents, _ := os.ReadDir(s.hostDir); len(ents) != 0 {
		t.Errorf("host job files left: %v", ents)
	}
	last := progress[len(progress)-1]
	if last.Phase != "done" || last.Done != len(samples) || last.Total != len(samples) || last.Round != nRounds {
		t.Errorf("%d progress reports, last %+v", len(progress), last)
	}
}

// noisy makes the fake engine's container jobs vary from round to round,
// so that intervals have a width.
func noisy(eng *enginetest.Engine, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	var mu sync.Mutex
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		mu.Lock()
		slow := 1 + 0.3*rng.Float64()
		mu.Unlock()
		return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, slow)}
	})
}

// TestMeasureAdaptive: an adaptive measurement makes MinRounds rounds of
// every job, then stops at the precision, at the byte budget, at its
// maximum rounds or when After says so, whichever comes first, and says
// which.
func TestMeasureAdaptive(t *testing.T) {
	prof := smoke(t)
	t.Run("precision", func(t *testing.T) {
		// Every round alike: the intervals have no width at once.
		s, _ := prepare(t, testOptions(t))
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 6, Precision: 0.03}, 1, rand.New(rand.NewPCG(1, 1)), nil)
		if out.Stop != measure.StopPrecision || out.Rounds != 6*len(prof.Jobs) {
			t.Errorf("stop %q after %d rounds, want precision after %d", out.Stop, out.Rounds, 6*len(prof.Jobs))
		}
		for w, hw := range out.HalfWidth {
			if hw != 0 {
				t.Errorf("%s: half-width %v, want 0", w, hw)
			}
		}
	})
	t.Run("bytes", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 2)
		const budget = 800 << 20 // the fake jobs write 150 MiB of layout, about 200 MiB a round of each job
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 2, Precision: 1e-6, MaxBytes: budget}, 1, rand.New(rand.NewPCG(2, 2)), nil)
		if out.Stop != measure.StopBytes || out.BytesWritten > budget || out.Rounds <= 2*len(prof.Jobs) {
			t.Errorf("stop %q after %d rounds and %d bytes; want bytes, within %d, after more than the minimum", out.Stop, out.Rounds, out.BytesWritten, budget)
		}
	})
	t.Run("time", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		rng := rand.New(rand.NewPCG(7, 7))
		var mu sync.Mutex
		eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, 1+0.3*rng.Float64())}
		})
		start := time.Now()
		// The budget leaves room beyond the minimum rounds even when a
		// busy machine makes each fake execution slow (the host arm runs
		// a real process).
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 2, Precision: 1e-6, MaxDuration: 4 * time.Second}, 1, rand.New(rand.NewPCG(8, 8)), nil)
		if out.Stop != measure.StopTime || out.Rounds <= 2*len(prof.Jobs) || time.Since(start) > 30*time.Second {
			t.Errorf("stop %q after %d rounds and %s; want time, after more than the minimum, within seconds of the budget", out.Stop, out.Rounds, time.Since(start))
		}
	})
	t.Run("max rounds", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 3)
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 2, MaxRounds: 5, Precision: 1e-6}, 1, rand.New(rand.NewPCG(3, 3)), nil)
		if out.Stop != measure.StopRounds || out.Rounds != 5*len(prof.Jobs) {
			t.Errorf("stop %q after %d rounds, want rounds after %d", out.Stop, out.Rounds, 5*len(prof.Jobs))
		}
	})
	t.Run("after", func(t *testing.T) {
		s, _ := prepare(t, testOptions(t))
		seen := 0
		out := s.Measure(context.Background(), prof, Plan{Rounds: 10, After: func(round []measure.Sample) bool {
			seen++
			if len(round) != 4 {
				t.Errorf("After saw %d samples, want a whole round of 4", len(round))
			}
			return seen == 3
		}}, 1, rand.New(rand.NewPCG(4, 4)), nil)
		if out.Stop != measure.StopDecided || out.Rounds != 3 {
			t.Errorf("stop %q after %d rounds, want decided after 3", out.Stop, out.Rounds)
		}
	})
	t.Run("side targets", func(t *testing.T) {
		// After 6 rounds of a job, bind and volume run in one of every 3:
		// in its rounds 1-6, 9 and 12; host and container in all 12, in
		// an order whose every second round reverses the one before.
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 9)
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 6, MaxRounds: 12, Precision: 1e-6, SideEvery: 3}, 1, rand.New(rand.NewPCG(9, 9)), nil)
		if out.Stop != measure.StopRounds || out.Rounds != 12*len(prof.Jobs) {
			t.Fatalf("stop %q after %d rounds, want rounds after %d", out.Stop, out.Rounds, 12*len(prof.Jobs))
		}
		for _, j := range prof.Jobs {
			rounds := map[int][]measure.Target{} // the job's round number (1-based) -> its targets in order
			var nums []int
			for _, sm := range out.Samples {
				if sm.Workload != j.Workload {
					continue
				}
				if _, ok := rounds[sm.Round]; !ok {
					nums = append(nums, sm.Round)
				}
				rounds[sm.Round] = append(rounds[sm.Round], sm.Target)
			}
			slices.Sort(nums)
			for i, n := range nums {
				got := rounds[n]
				withSide := i < 6 || (i+1)%3 == 0
				if want := map[bool]int{true: 4, false: 2}[withSide]; len(got) != want || slices.Contains(got, measure.TargetBind) != withSide {
					t.Errorf("%s round %d of the job: targets %v, want %d", j.Workload, i+1, got, want)
				}
				if i%2 == 1 {
					prev := rounds[nums[i-1]]
					before := func(o []measure.Target) bool {
						return slices.Index(o, measure.TargetHost) < slices.Index(o, measure.TargetContainer)
					}
					if before(got) == before(prev) {
						t.Errorf("%s rounds %d and %d of the job: host and container in the same order (%v, %v)", j.Workload, i, i+1, prev, got)
					}
				}
			}
		}
	})
	t.Run("prior rounds count", func(t *testing.T) {
		// An agent's window already precise: only the minimum rounds.
		s, _ := prepare(t, testOptions(t))
		prior := s.Measure(context.Background(), prof, Plan{Rounds: 6}, 1, rand.New(rand.NewPCG(5, 5)), nil).Samples
		s2, eng := prepare(t, testOptions(t))
		noisy(eng, 6)
		out := s2.Measure(context.Background(), prof, Plan{MinRounds: 1, Precision: 0.5, Prior: prior}, 100, rand.New(rand.NewPCG(6, 6)), nil)
		if out.Stop != measure.StopPrecision || out.Rounds != len(prof.Jobs) {
			t.Errorf("stop %q after %d rounds, want precision after the minimum %d", out.Stop, out.Rounds, len(prof.Jobs))
		}
		// The overheads rest on the prior rounds and this measurement's,
		// without a window on all of them, with one on its last rounds.
		for _, c := range []struct {
			window, want int
		}{{0, 7}, {3, 3}} {
			plan := Plan{Rounds: 1, Prior: prior, Window: c.window}
			out := s2.Measure(context.Background(), prof, plan, 200, rand.New(rand.NewPCG(7, 7)), nil)
			for _, r := range out.Results {
				if n := r.RoundsOK + r.RoundsFailed; n != c.want {
					t.Errorf("window %d: %s/%s rests on %d rounds, want %d", c.window, r.Target, r.Workload, n, c.want)
				}
			}
			if len(out.Results) == 0 {
				t.Errorf("window %d: no results", c.window)
			}
		}
	})
}

// TestMeasureByteBudgetIsAHardCap: executions that write little in one
// round and up to their byte cap in the next still keep the budget: a round
// whose worst case would cross it runs with its executions' caps lowered to
// what is left (fio's --io_size, which the fake engine honours here). With
// the caps as they are, rounds started on the estimate from the job's last
// round cross it.
func TestMeasureByteBudgetIsAHardCap(t *testing.T) {
	job := fio.Job{Workload: measure.Fsync, Options: []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1"},
		FileBytes: 2 << 20, Runtime: 100 * time.Millisecond, IOBytes: 8 << 20, Timeout: time.Minute}
	prof := fio.Profile{Name: "capped", Steady: true, MinRounds: 2, Jobs: []fio.Job{job}}
	const budget = 200 << 20
	for seed := uint64(1); seed <= 20; seed++ {
		s, eng := prepare(t, testOptions(t))
		rng := rand.New(rand.NewPCG(seed, 7))
		var mu sync.Mutex
		// The host's fake fio writes 800 KiB an execution; the container
		// targets write that or, in a third of the executions, their whole
		// cap, fio's --io_size (a device briefly fast enough to reach it).
		eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
			if j.Layout {
				return nil
			}
			mu.Lock()
			full, slow := rng.IntN(3) == 0, 1+0.3*rng.Float64()
			mu.Unlock()
			out := enginetest.FioOutput(j.Workload, slow)
			if full {
				out = withWriteBytes(t, out, j.IOSize)
			}
			return &engine.ExecResult{Stdout: out}
		})
		out := s.Measure(context.Background(), prof, Plan{MinRounds: 2, Precision: 1e-9, MaxBytes: budget}, 1, rand.New(rand.NewPCG(seed, 8)), nil)
		if out.Stop != measure.StopBytes || out.Rounds <= 2 {
			t.Errorf("seed %d: stop %q after %d rounds; want bytes after more than the minimum", seed, out.Stop, out.Rounds)
		}
		if out.BytesWritten > budget {
			t.Errorf("seed %d: %d bytes written, budget %d", seed, out.BytesWritten, budget)
		}
		// Rounds go on while their estimate fits: what is left is less
		// than a round of full executions.
		if atCaps := int64(len(s.Targets())) * job.IOBytes; budget-out.BytesWritten > atCaps {
			t.Errorf("seed %d: stopped %d bytes short of the budget, more than a round at the caps (%d)", seed, budget-out.BytesWritten, atCaps)
		}
	}
}

// withWriteBytes rewrites a fake fio output so that its write direction
// moved n bytes.
func withWriteBytes(t *testing.T, out []byte, n int64) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	w := doc["jobs"].([]any)[0].(map[string]any)["write"].(map[string]any)
	w["io_bytes"], w["io_kbytes"], w["total_ios"] = n, n/1024, n/4096
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMeasureRecordsFailures: a failed job is a sample with its reason and
// the measurement goes on; a steady file stays until the end (other jobs'
// files share the directory).
func TestMeasureRecordsFailures(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Target == measure.TargetVolume && j.Workload == measure.Fsync && !j.Layout {
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=12, err=28/file:io_u.c:1889, func=io_u error, error=No space left on device")}
		}
		return nil
	})
	prof := smoke(t)
	samples := rounds(s, context.Background(), prof, 1, 2, 3)
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
	if failed != 2 || len(samples) != 2*len(prof.Jobs)*4 {
		t.Errorf("%d samples, %d failed; want %d and 2", len(samples), failed, 2*len(prof.Jobs)*4)
	}
	if n := count(eng.Calls(), "Exec clean "+engine.ContainerVolume); n != 1 {
		t.Errorf("volume directory cleaned %d times, want once, at the end; calls %v", n, eng.Calls())
	}

	// The probe container vanishes: every container job fails with
	// exec_error, the host's still run.
	eng.RemoveAll()
	for _, sm := range rounds(s, context.Background(), smoke(t), 10, 1, 3) {
		if (sm.Target == measure.TargetHost) != sm.OK() || !sm.OK() && sm.Failure.Reason != measure.ReasonExec {
			t.Errorf("%s/%s without a probe container: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
}

// TestMeasureLayoutFailure: a target whose file cannot be laid out cannot
// run that job: its rounds record the layout's failure, without fio.
func TestMeasureLayoutFailure(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Layout && j.Target == measure.TargetContainer && j.Workload == measure.SeqWrite {
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=3, err=28/file:filesetup.c:240, func=write, error=No space left on device")}
		}
		return nil
	})
	samples := rounds(s, context.Background(), smoke(t), 1, 2, 4)
	for _, sm := range samples {
		broken := sm.Target == measure.TargetContainer && sm.Workload == measure.SeqWrite
		if broken != !sm.OK() || broken && sm.Failure.Reason != measure.ReasonNoSpace {
			t.Errorf("%s/%s: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
	for _, j := range eng.Jobs() {
		if !j.Layout && j.Target == measure.TargetContainer && j.Workload == measure.SeqWrite {
			t.Error("fio ran a job whose file was never laid out")
		}
	}
}

// TestMeasureRoundLayoutFailure: when the file of one round of a job with
// a file per round cannot be laid out on a target, that target misses that
// round (the layout's failure is its sample, fio does not run) and every
// other round and target is measured.
func TestMeasureRoundLayoutFailure(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	failing := fio.RoundFileName(measure.SeqWrite, 2)
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Layout && j.Target == measure.TargetVolume && j.File == failing {
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=3, err=28/file:filesetup.c:240, func=write, error=No space left on device")}
		}
		return nil
	})
	prof := smoke(t)
	if !slices.ContainsFunc(prof.Jobs, func(j fio.Job) bool { return j.Workload == measure.SeqWrite && j.FilePerRound }) {
		t.Fatal("smoke's seqwrite has no file per round: nothing to test")
	}
	out := s.Measure(context.Background(), prof, Plan{Rounds: 4}, 1, rand.New(rand.NewPCG(3, 4)), nil)
	var seqRounds []int
	for _, sm := range out.Samples {
		if sm.Workload == measure.SeqWrite && !slices.Contains(seqRounds, sm.Round) {
			seqRounds = append(seqRounds, sm.Round)
		}
	}
	if len(seqRounds) != 4 {
		t.Fatalf("seqwrite rounds %v, want 4", seqRounds)
	}
	slices.Sort(seqRounds)
	missed := seqRounds[2] // the job's third round measures its file 2
	for _, sm := range out.Samples {
		want := !(sm.Workload == measure.SeqWrite && sm.Round == missed && sm.Target == measure.TargetVolume)
		if sm.OK() != want || !want && sm.Failure.Reason != measure.ReasonNoSpace {
			t.Errorf("round %d %s/%s: ok %v, failure %+v", sm.Round, sm.Target, sm.Workload, sm.OK(), sm.Failure)
		}
	}
	for _, j := range eng.Jobs() {
		if !j.Layout && j.Target == measure.TargetVolume && j.File == failing {
			t.Error("fio measured a file that was never laid out")
		}
	}
}

// TestMeasureHostLayoutFailure: when the host's file of a job cannot be
// laid out, the host misses the job's rounds and nothing else does: bind
// lays out and measures a file of its own, as every other target.
func TestMeasureHostLayoutFailure(t *testing.T) {
	opts := testOptions(t)
	fake := opts.FioBinary
	opts.FioBinary = filepath.Join(t.TempDir(), "fio")
	script := "#!/bin/sh\nfor a; do case \"$a\" in --name=fsync-layout) " +
		"echo 'fio: pid=3, err=28/file:filesetup.c:240, func=write, error=No space left on device' >&2; exit 1;; esac; done\n" +
		"exec " + fake + " \"$@\"\n"
	if err := os.WriteFile(opts.FioBinary, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, eng := prepare(t, opts)
	out := s.Measure(context.Background(), smoke(t), Plan{Rounds: 2}, 1, rand.New(rand.NewPCG(5, 6)), nil)
	var fsyncs int
	for _, sm := range out.Samples {
		if sm.Workload != measure.Fsync {
			continue
		}
		fsyncs++
		host := sm.Target == measure.TargetHost
		if sm.OK() == host || host && sm.Failure.Reason != measure.ReasonNoSpace {
			t.Errorf("round %d %s/fsync: ok %v, failure %+v; want only host failed, out of space", sm.Round, sm.Target, sm.OK(), sm.Failure)
		}
	}
	if fsyncs == 0 {
		t.Fatal("no fsync samples: nothing to test")
	}
	var bindLayout bool
	for _, j := range eng.Jobs() {
		if j.Target == measure.TargetBind && j.Workload == measure.Fsync && j.Layout {
			bindLayout = true
		}
	}
	if !bindLayout {
		t.Error("bind measured fsync without laying out a file of its own")
	}
}

// TestHostJobFailureClearsItsDirectory: a failed fresh host job's files
// are removed; the host directory itself stays.
func TestHostJobFailureClearsItsDirectory(t *testing.T) {
	s, prof := hostJob(t, "echo half > \"$d/seqwrite.0.0\"\necho 'fio: io_u error on file: Input/output error' >&2\nexit 1\n")
	for _, sm := range rounds(s, context.Background(), prof, 1, 1, 5) {
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
	for _, sm := range rounds(s, context.Background(), prof, 1, 1, 17) {
		if sm.Target == measure.TargetHost && (sm.OK() || sm.Failure.Reason != measure.ReasonTimeout) {
			t.Errorf("hung host fio: %+v, want a timeout", sm.Failure)
		}
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the hung fio held the round for %s", el)
	}
}

func TestMeasureRefusesJobsWithoutSpace(t *testing.T) {
	opts := testOptions(t)
	opts.MinFreeRatio = 1 // no file system has everything free
	s, eng := prepare(t, opts)
	samples := rounds(s, context.Background(), smoke(t), 1, 1, 7)
	for _, sm := range samples {
		if sm.OK() || sm.Failure.Reason != measure.ReasonNoSpace || !strings.Contains(sm.Failure.Message, "free-space check") {
			t.Errorf("%s/%s: %+v, want the free-space check to refuse it", sm.Target, sm.Workload, sm.Failure)
		}
	}
	if n := len(eng.Jobs()); n != 0 {
		t.Errorf("%d jobs ran although the space check refused them", n)
	}
}

func TestMeasureWithoutHostFio(t *testing.T) {
	opts := testOptions(t)
	opts.FioBinary = filepath.Join(t.TempDir(), "no-fio")
	s, _ := prepare(t, opts)
	// The helper's smallfiles job needs no fio: it still runs on the host.
	for _, sm := range rounds(s, context.Background(), smoke(t), 1, 1, 9) {
		fioJob := sm.Workload != measure.SmallFiles
		if sm.Target == measure.TargetHost && fioJob && (sm.OK() || sm.Failure.Reason != measure.ReasonFioMissing) ||
			(sm.Target != measure.TargetHost || !fioJob) && !sm.OK() {
			t.Errorf("%s/%s: %+v", sm.Target, sm.Workload, sm.Failure)
		}
	}
}

func TestMeasureStopsWhenCanceled(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	ctx, cancel := context.WithCancel(context.Background())
	jobs := 0
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Layout {
			return nil
		}
		if jobs++; jobs == 2 {
			cancel()
		}
		return nil
	})
	out := s.Measure(ctx, smoke(t), Plan{Rounds: 10}, 1, rand.New(rand.NewPCG(11, 12)), nil)
	samples := out.Samples
	if len(samples) == 0 || len(samples) >= 4 || out.Stop != measure.StopCanceled || out.Rounds != 0 {
		t.Fatalf("%d samples, %d rounds, stop %q after a cancel during round 1", len(samples), out.Rounds, out.Stop)
	}
	last := samples[len(samples)-1]
	if last.OK() || last.Failure.Reason != measure.ReasonCanceled {
		t.Errorf("the job running at the cancel: %+v, want canceled", last.Failure)
	}
	if n := count(eng.Calls(), "Exec clean "+engine.ContainerLayer); n != 1 {
		t.Errorf("the job files were not removed after the cancel; calls %v", eng.Calls())
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
	prof := fresh(t)
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

func TestHostArgvJoinsTheProbesCgroups(t *testing.T) {
	s := &Session{}
	argv := []string{"/usr/bin/fio", "--output-format=json", "job.fio"}
	if got := s.hostArgv(argv); !slices.Equal(got, argv) {
		t.Errorf("no cgroups: %q, want fio as is", got)
	}
	s.hostCgroups.Dirs, s.self = []string{"/sys/fs/cgroup/cpu/docker/abc", "/sys/fs/cgroup/cpuset/docker/abc"}, "/usr/bin/layerprobe"
	want := []string{"/usr/bin/layerprobe", "probe-helper", "cgexec", "/sys/fs/cgroup/cpu/docker/abc", "/sys/fs/cgroup/cpuset/docker/abc",
		"--", "/usr/bin/fio", "--output-format=json", "job.fio"}
	if got := s.hostArgv(argv); !slices.Equal(got, want) {
		t.Errorf("hostArgv = %q, want %q", got, want)
	}
	// From a private cgroup namespace: the namespace to enter first.
	s.hostCgroups.Namespace = "/proc/42/ns/cgroup"
	want = slices.Insert(want, 3, "--cgroupns=/proc/42/ns/cgroup")
	if got := s.hostArgv(argv); !slices.Equal(got, want) {
		t.Errorf("hostArgv = %q, want %q", got, want)
	}
}

func TestAppArmorProfile(t *testing.T) {
	for label, want := range map[string]string{
		"docker-default (enforce)\n":             "docker-default",
		"cri-containerd.apparmor.d (complain)\n": "cri-containerd.apparmor.d",
		"unconfined\n":                           "",
		"":                                       "",
	} {
		if got := appArmorProfile(label); got != want {
			t.Errorf("appArmorProfile(%q) = %q, want %q", label, got, want)
		}
	}
}

// TestNextStopsOnTimeOnceTheTimeIsSpent: after the minimum rounds, with
// the time budget spent, the stop reason is time even when a job's next
// round would not fit the bytes left either; in time, that job stops the
// run on bytes.
func TestNextStopsOnTimeOnceTheTimeIsSpent(t *testing.T) {
	s := &Session{targets: []measure.Target{measure.TargetHost, measure.TargetContainer}}
	jobs := func(lastBytes ...int64) []*jobState {
		var out []*jobState
		for _, b := range lastBytes {
			out = append(out, &jobState{rounds: 6, lastBytes: b, lastTargets: 2, lastTime: time.Second, halfWidth: 0.5})
		}
		return out
	}
	const budget, spent = 1 << 30, 1<<30 - 100<<20 // 100 MiB left
	rng := rand.New(rand.NewPCG(1, 1))
	late := Plan{MinRounds: 6, Precision: 0.03, MaxBytes: budget, MaxDuration: time.Second}
	if js, why := s.next(jobs(10<<20, 200<<20), late, 100, spent, time.Minute, rng); js != nil || why != measure.StopTime {
		t.Errorf("time spent, one job over the bytes left: next %v, stop %q; want none, time", js, why)
	}
	inTime := late
	inTime.MaxDuration = time.Hour
	if js, why := s.next(jobs(200<<20, 300<<20), inTime, 100, spent, time.Minute, rng); js != nil || why != measure.StopBytes {
		t.Errorf("in time, every job over the bytes left: next %v, stop %q; want none, bytes", js, why)
	}
}

// TestMeasureRotatesFiles: a job whose files rotate (fio.Job.RotateFiles)
// measures each target's k-th execution on its file k mod RotateFiles and
// lays out each file once per target, just before its first use; bind and
// the volume, which run in a share of the rounds (Plan.SideEvery), rotate
// over their own executions. A file whose layout failed costs its target
// that round only, and is laid out again when its turn comes back.
func TestMeasureRotatesFiles(t *testing.T) {
	prof, err := smoke(t).Only([]measure.Workload{measure.Fsync})
	if err != nil {
		t.Fatal(err)
	}
	const files = 4
	if prof.Jobs[0].RotateFiles != files {
		t.Fatalf("smoke's fsync rotates %d files, the test expects %d", prof.Jobs[0].RotateFiles, files)
	}
	s, eng := prepare(t, testOptions(t))
	failing := fio.RoundFileName(measure.Fsync, 2)
	rng := rand.New(rand.NewPCG(7, 7))
	var mu sync.Mutex
	failed := false
	eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		mu.Lock()
		defer mu.Unlock()
		if j.Layout && j.Target == measure.TargetVolume && j.File == failing && !failed {
			failed = true
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=3, err=28/file:filesetup.c:240, func=write, error=No space left on device")}
		}
		// Noisy, so that the precision is never reached.
		return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, 1+0.3*rng.Float64())}
	})
	var hostLayouts []int // the rounds before which the host laid out a file (0: at the start)
	out := s.Measure(context.Background(), prof, Plan{MinRounds: 6, MaxRounds: 14, Precision: 1e-6, SideEvery: 3}, 1,
		rand.New(rand.NewPCG(8, 8)), func(p Progress) {
			if p.Phase == "layout" && p.Target == measure.TargetHost {
				hostLayouts = append(hostLayouts, p.Round)
			}
		})
	if out.Stop != measure.StopRounds || out.Rounds != 14 {
		t.Fatalf("stop %q after %d rounds, want rounds after 14", out.Stop, out.Rounds)
	}
	// The host runs every round, as the container does: its files are
	// new in the rounds the container's are (rounds 2-4; round 1
	// measures the file laid out at the start).
	if want := []int{0, 2, 3, 4}; !slices.Equal(hostLayouts, want) {
		t.Errorf("the host laid out files before rounds %v, want %v", hostLayouts, want)
	}
	// Per target in the probe container: what fio did, in order.
	type event struct {
		layout bool
		file   string
	}
	events := map[measure.Target][]event{}
	for _, j := range eng.Jobs() {
		events[j.Target] = append(events[j.Target], event{j.Layout, j.File})
	}
	name := func(k int) string { return fio.RoundFileName(measure.Fsync, k) }
	// The volume's third execution had no file: its layout failed.
	wantRuns := map[measure.Target][]int{
		measure.TargetContainer: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
		measure.TargetBind:      {0, 1, 2, 3, 4, 5, 6, 7}, // rounds 1-6, 9 and 12
		measure.TargetVolume:    {0, 1, 3, 4, 5, 6, 7},
	}
	for tg, runs := range wantRuns {
		var measured []string
		laid := map[string]int{}
		for _, e := range events[tg] {
			if e.layout {
				laid[e.file]++
				continue
			}
			if laid[e.file] == 0 {
				t.Errorf("%s measured %s before laying it out", tg, e.file)
			}
			measured = append(measured, e.file)
		}
		var want []string
		for _, k := range runs {
			want = append(want, name(k%files))
		}
		if !slices.Equal(measured, want) {
			t.Errorf("%s measured %v, want %v", tg, measured, want)
		}
		for k := range files {
			n := 1
			if tg == measure.TargetVolume && k == 2 {
				n = 2 // failed, then laid out again at its next turn
			}
			if laid[name(k)] != n {
				t.Errorf("%s laid out %s %d times, want %d (all: %v)", tg, name(k), laid[name(k)], n, laid)
			}
		}
		if len(laid) != files {
			t.Errorf("%s laid out %v, want %d files", tg, laid, files)
		}
	}
	var fails []string
	for _, sm := range out.Samples {
		if !sm.OK() {
			fails = append(fails, fmt.Sprintf("round %d %s: %s", sm.Round, sm.Target, sm.Failure.Reason))
		}
	}
	if want := []string{"round 3 volume: no_space"}; !slices.Equal(fails, want) {
		t.Errorf("failed executions %v, want %v", fails, want)
	}
	// The container and bind laid out as many files, the host too.
	if c := out.LayoutBytes[measure.TargetContainer]; c <= 0 || out.LayoutBytes[measure.TargetBind] != c || out.LayoutBytes[measure.TargetHost] <= 0 {
		t.Errorf("layout bytes %v: want bind's as much as the container's", out.LayoutBytes)
	}
}

// TestRoundCostCountsTheRoundsNewFiles: the planner prices a round of a
// job whose files rotate with the layout of the files the round is the
// first to measure, and with none once every target has its files; a
// round cut to the budget's rest (roundJob) leaves those layouts their
// bytes.
func TestRoundCostCountsTheRoundsNewFiles(t *testing.T) {
	const mb = 1 << 20
	host, ctr := measure.TargetHost, measure.TargetContainer
	s := &Session{targets: []measure.Target{host, ctr}}
	job := fio.Job{Workload: measure.Fsync, RotateFiles: 3, FileBytes: 8 * mb, IOBytes: 32 * mb, Runtime: time.Second}
	js := &jobState{job: job, how: fio.Steady, broken: map[measure.Target]*measure.Failure{},
		runs: map[measure.Target]int{}, laid: map[measure.Target]map[int]bool{host: {0: true}, ctr: {0: true}},
		lastBytes: 20 * mb, lastTargets: 2, layoutBytes: 16 * mb, layoutTargets: 2}
	for _, c := range []struct {
		name       string
		runs       int
		laidCtr    []int
		wantCost   int64
		wantUnlaid int
	}{
		{"first round: the start's files", 0, nil, 20 * mb, 0},
		{"second round: a new file on each", 1, nil, 36 * mb, 2},
		{"the container has it already", 1, []int{1}, 28 * mb, 1},
		{"back to file 0", 3, nil, 20 * mb, 0},
	} {
		js.runs[host], js.runs[ctr] = c.runs, c.runs
		js.laid[ctr] = map[int]bool{0: true}
		for _, k := range c.laidCtr {
			js.laid[ctr][k] = true
		}
		if got := s.roundCost(js); got != c.wantCost {
			t.Errorf("%s: cost %d MiB, want %d", c.name, got/mb, c.wantCost/mb)
		}
		if got := len(js.unlaid(s.targets)); got != c.wantUnlaid {
			t.Errorf("%s: %d targets to lay out, want %d", c.name, got, c.wantUnlaid)
		}
	}
	// 40 MiB left for a round with two new files: 16 MiB of layout, and
	// the executions share the rest.
	js.runs[host], js.runs[ctr] = 1, 1
	js.laid[ctr] = map[int]bool{0: true}
	got, ok := s.roundJob(js, 40*mb)
	if !ok || got.IOBytes != 12*mb {
		t.Errorf("roundJob with 40 MiB left: cap %d, ok %v; want 12 MiB a target", got.IOBytes, ok)
	}
	// A target whose first layout failed cannot run the job: nothing to
	// lay out for it.
	js.broken[ctr] = &measure.Failure{Reason: measure.ReasonNoSpace}
	if got := js.unlaid(s.targets); !slices.Equal(got, []measure.Target{host}) {
		t.Errorf("unlaid with a broken container: %v, want host alone", got)
	}
}

// TestMeasureFillsAnEmptyWindow: with Plan.Fill, every job runs rounds, on
// every target, until its interval rests on Fill.Pairs of them, beyond a
// byte budget that stops the same plan without it short; the fill ceiling
// stops it in turn; a prior window's rounds count.
func TestMeasureFillsAnEmptyWindow(t *testing.T) {
	prof := smoke(t)
	// The fake jobs write 150 MiB of layout and about 200 MiB a round of
	// each job: the budget holds the minimum rounds and no more.
	base := Plan{MinRounds: 2, Precision: 1e-6, MaxBytes: 600 << 20, SideEvery: 3}
	jobRounds := func(out Outcome) map[measure.Workload]map[int][]measure.Target {
		m := map[measure.Workload]map[int][]measure.Target{}
		for _, sm := range out.Samples {
			if m[sm.Workload] == nil {
				m[sm.Workload] = map[int][]measure.Target{}
			}
			m[sm.Workload][sm.Round] = append(m[sm.Workload][sm.Round], sm.Target)
		}
		return m
	}
	t.Run("without fill", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 11)
		out := s.Measure(context.Background(), prof, base, 1, rand.New(rand.NewPCG(11, 11)), nil)
		for w, rs := range jobRounds(out) {
			if len(rs) >= 6 {
				t.Errorf("%s: %d rounds under the regular budget; the test needs it to stop short of 6", w, len(rs))
			}
		}
	})
	t.Run("fills", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 12)
		plan := base
		plan.Fill = Fill{Pairs: 6, MaxBytes: 8 << 30, MaxDuration: time.Hour}
		out := s.Measure(context.Background(), prof, plan, 1, rand.New(rand.NewPCG(12, 12)), nil)
		for _, j := range prof.Jobs {
			rs := jobRounds(out)[j.Workload]
			full := 0
			for _, ts := range rs {
				if len(ts) == 4 {
					full++
				}
			}
			if full < 6 {
				t.Errorf("%s: %d rounds on every target, want 6 (%d rounds in all)", j.Workload, full, len(rs))
			}
		}
		if out.Stop != measure.StopRounds {
			t.Errorf("stop %q after the fill; want rounds (a fill ends its measurement)", out.Stop)
		}
	})
	t.Run("stops when filled", func(t *testing.T) {
		// A regular budget with room for more: the fill still ends the
		// measurement, so that its intervals are published at once.
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 16)
		plan := base
		plan.MaxBytes = 8 << 30
		plan.Fill = Fill{Pairs: 6, MaxBytes: 8 << 30, MaxDuration: time.Hour}
		out := s.Measure(context.Background(), prof, plan, 1, rand.New(rand.NewPCG(16, 16)), nil)
		for _, j := range prof.Jobs {
			if n := len(jobRounds(out)[j.Workload]); n != 6 {
				t.Errorf("%s: %d rounds; want the 6 of the fill and no more", j.Workload, n)
			}
		}
		if out.Stop != measure.StopRounds {
			t.Errorf("stop %q; want rounds", out.Stop)
		}
	})
	t.Run("ceiling", func(t *testing.T) {
		s, eng := prepare(t, testOptions(t))
		noisy(eng, 13)
		plan := base
		const ceiling = 1200 << 20
		plan.Fill = Fill{Pairs: 6, MaxBytes: ceiling, MaxDuration: time.Hour}
		out := s.Measure(context.Background(), prof, plan, 1, rand.New(rand.NewPCG(13, 13)), nil)
		short := false
		for _, rs := range jobRounds(out) {
			short = short || len(rs) < 6
		}
		if out.Stop != measure.StopBytes || out.BytesWritten > ceiling || !short {
			t.Errorf("stop %q after %d bytes, a job short of 6 rounds %v; want bytes, within %d, short", out.Stop, out.BytesWritten, short, ceiling)
		}
	})
	t.Run("prior rounds count", func(t *testing.T) {
		s, _ := prepare(t, testOptions(t))
		prior := s.Measure(context.Background(), prof, Plan{Rounds: 4}, 1, rand.New(rand.NewPCG(14, 14)), nil).Samples
		s2, _ := prepare(t, testOptions(t))
		out := s2.Measure(context.Background(), prof, Plan{MinRounds: 1, Prior: prior, Fill: Fill{Pairs: 6, MaxBytes: 8 << 30}}, 100, rand.New(rand.NewPCG(15, 15)), nil)
		if out.Rounds != 2*len(prof.Jobs) {
			t.Errorf("%d rounds after a window of 4; want the 2 a job that 6 need", out.Rounds)
		}
	})
}

// TestEtaOfAFill: a filling measurement past the regular byte budget
// still has an end in sight: its rounds run under the fill's ceiling.
func TestEtaOfAFill(t *testing.T) {
	js := &jobState{rounds: 3, lastTime: time.Second, halfWidth: math.Inf(1)}
	plan := Plan{MinRounds: 2, Precision: 0.03, MaxBytes: 512 << 20, Fill: Fill{Pairs: 6, MaxBytes: 1536 << 20}}
	if d := eta([]*jobState{js}, plan, 600<<20, 0, 10, 30*time.Second); d < 3*time.Second {
		t.Errorf("eta %s with 3 fill rounds of 1 s to go; want at least 3 s", d)
	}
	plan.Fill = Fill{}
	if d := eta([]*jobState{js}, plan, 600<<20, 0, 10, 30*time.Second); d != 0 {
		t.Errorf("eta %s past the byte budget without a fill; want 0", d)
	}
}
