package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/enginetest"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/httpapi"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/metrics"
	"github.com/layerprobe/layerprobe/internal/store"
)

// testAgent is an agent on a fake engine with a real store, a fake host
// fio and every busy-host guard off (the tests turn on the one they look
// at). Cycles are run by the test, not by the scheduler, unless it runs
// loop.
type testAgent struct {
	*Agent
	eng *enginetest.Engine
}

func newTestAgent(t *testing.T, configure func(*config.Config)) *testAgent {
	t.Helper()
	eng := enginetest.New(t.TempDir())
	cfg := config.Default()
	cfg.Profile = "smoke"
	cfg.Fio.Binary = enginetest.FakeFio(t)
	cfg.Engines = []config.Engine{{Name: "default", Host: "unix:///fake.sock", ProbeImage: "layerprobe-test:fake"}}
	cfg.FreeSpace = config.FreeSpace{}
	cfg.Agent.StateDir = filepath.Join(t.TempDir(), "state")
	cfg.Agent.Budget.Rounds = 2
	cfg.Agent.Budget.MaxBytes = 0 // the fake engine's jobs "write" hundreds of MiB
	cfg.Agent.ColdInterval = 0
	cfg.Agent.ColdRounds = 2
	cfg.Agent.FirstFill.MaxBytes = 0 // the tests of the first fill turn it on
	cfg.Agent.DailyByteBudget = 0
	cfg.Agent.MaxIOPressure = 100
	cfg.Agent.MaxDiskUtil = 1
	cfg.Agent.ChurnQuietPeriod = 0
	if configure != nil {
		configure(cfg)
	}
	// The fake fio answers the helper's smallfiles verb too: the test
	// binary is no layerprobe.
	a, err := New(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), LockPath: filepath.Join(t.TempDir(), "lock"),
		HelperBinary: cfg.Fio.Binary})
	if err != nil {
		t.Fatal(err)
	}
	a.procRoot, a.sysRoot = t.TempDir(), t.TempDir()
	a.newEngine = func(config.Engine, *slog.Logger) (engine.Client, error) { return eng, nil }
	ctx := context.Background()
	if err := a.open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close(ctx) })
	return &testAgent{Agent: a, eng: eng}
}

// cycles lists the recorded cycles, oldest first.
func (a *testAgent) cycles(t *testing.T) []store.Cycle {
	t.Helper()
	cs, err := a.store.Cycles(context.Background(), store.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(cs)
	return cs
}

func (a *testAgent) last(t *testing.T) store.Cycle {
	t.Helper()
	cs := a.cycles(t)
	if len(cs) == 0 {
		t.Fatal("no cycle recorded")
	}
	return cs[len(cs)-1]
}

// TestCyclePublishedWhenStored: /metrics has a cycle as soon as the store
// lists it, not only when the scheduler's turn ends (after a suspicion's
// confirmation cycles and the pruning): the snapshot seen from the turn's
// done hook, before the turn's own publish, already counts the cycle and
// carries its overheads.
func TestCyclePublishedWhenStored(t *testing.T) {
	a := newTestAgent(t, nil)
	ctx := context.Background()
	var me metrics.Engine
	a.steadyCycles(ctx, a.engines, func(*engineState) string { return triggerSchedule }, func(*engineState, string) {
		me = a.Snapshot().Engines[0]
	})
	if c := a.last(t); c.Result != ResultOK {
		t.Fatalf("cycle %+v", c)
	}
	if me.CyclesTotal[ResultOK] != 1 || me.LastSuccess.IsZero() || len(me.Overheads) == 0 {
		t.Errorf("snapshot when the cycle was stored: cycles %v, last success %v, %d overheads; want the cycle in it",
			me.CyclesTotal, me.LastSuccess, len(me.Overheads))
	}
}

func TestSteadyCyclePublishes(t *testing.T) {
	a := newTestAgent(t, nil)
	a.eng.SetSlowdown(measure.TargetContainer, 2)
	ctx := context.Background()
	a.cycleAll(ctx, triggerSchedule)

	c := a.last(t)
	if c.Result != ResultOK || c.Mode != measure.ModeSteady || c.Trigger != triggerSchedule || c.Rounds != 2*len(a.prof.Jobs) || c.FirstRound != 1 || c.StopReason != "rounds" {
		t.Fatalf("cycle %+v", c)
	}
	if c.BytesWritten <= 0 || c.FioVersion != enginetest.FioVersion || c.Driver != "overlay2" {
		t.Errorf("cycle bytes %d, fio %q, driver %q", c.BytesWritten, c.FioVersion, c.Driver)
	}
	full, err := a.store.Cycle(ctx, c.ID)
	if err != nil || len(full.Samples) != 2*len(a.prof.Jobs)*4 || len(full.Results) != len(a.prof.Jobs)*4 {
		t.Fatalf("stored cycle: %d samples, %d results, %v", len(full.Samples), len(full.Results), err)
	}

	snap := a.Snapshot()
	if len(snap.Engines) != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	me := snap.Engines[0]
	if me.CyclesTotal[ResultOK] != 1 || me.LastSuccess.IsZero() || math.IsNaN(me.LastCycleDuration) {
		t.Errorf("published cycle state: %v, %v, %v", me.CyclesTotal, me.LastSuccess, me.LastCycleDuration)
	}
	for _, tg := range measure.Targets {
		if !(me.WrittenBytesTotal[tg] > 0) {
			t.Errorf("written bytes of %s = %v", tg, me.WrittenBytesTotal[tg])
		}
	}
	found := false
	for _, o := range me.Overheads {
		if o.Target == measure.TargetContainer && o.Workload == measure.Fsync && o.Metric == measure.MetricFsyncP99 {
			found = true
			if math.Abs(o.Ratio-1) > 1e-9 || o.Mode != measure.ModeSteady {
				t.Errorf("container fsync_p99 overhead %+v, want ratio 1 (twice the host's latency)", o)
			}
		}
	}
	if !found || len(me.Raw) == 0 {
		t.Errorf("published %d overheads without the container's fsync, %d raw figures", len(me.Overheads), len(me.Raw))
	}

	ov, err := a.Overhead(ctx)
	if err != nil || len(ov.Engines) != 1 || len(ov.Engines[0].Results) != len(a.prof.Jobs)*4 || ov.Engines[0].LastCycleID != c.ID {
		t.Errorf("Overhead = %+v, %v", ov, err)
	}
	d, err := a.Cycle(ctx, c.ID)
	if err != nil || len(d.Samples) != 2*len(a.prof.Jobs)*4 || d.CopyUp != nil || d.DurationSeconds <= 0 {
		t.Errorf("Cycle(%d) = %d samples, copy-up %v, %v", c.ID, len(d.Samples), d.CopyUp, err)
	}
	if _, err := a.Cycle(ctx, c.ID+100); !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("Cycle of an unknown id: %v, want ErrNotFound", err)
	}
	es, err := a.Engines(ctx)
	if err != nil || len(es) != 1 || !es[0].Reachable || es[0].LastCycle == nil || es[0].LastCycle.ID != c.ID {
		t.Errorf("Engines = %+v, %v", es, err)
	}

	// The next cycle numbers its rounds on. Its byte estimate is the
	// cycle's cap, or without one this cycle's bytes.
	plan := a.cyclePlan(a.prof)
	plan.MaxBytes = 512 << 20
	if got := a.engines[0].estimateBytes(a.prof, plan, 4); got != plan.MaxBytes {
		t.Errorf("estimate = %d, want the cycle's cap %d", got, plan.MaxBytes)
	}
	plan.MaxBytes = 0
	if got, want := a.engines[0].estimateBytes(a.prof, plan, 4), c.BytesWritten; got != want {
		t.Errorf("estimate without a cap = %d, want the last cycle's %d", got, want)
	}
	a.cycleAll(ctx, triggerAPI)
	if c2 := a.last(t); c2.FirstRound != 1+2*len(a.prof.Jobs) || c2.Trigger != triggerAPI || c2.Result != ResultOK {
		t.Errorf("second cycle %+v, want rounds from %d", c2, 1+2*len(a.prof.Jobs))
	}
	if n := a.eng.Started(measure.ModeSteady); n != 1 {
		t.Errorf("%d probe containers started for two cycles, want the long-lived one", n)
	}
}

// TestGuardsSkip: each guard skips the cycle before anything is started,
// and records why.
func TestGuardsSkip(t *testing.T) {
	for _, c := range []struct {
		reason    string
		configure func(*config.Config)
		arrange   func(*testing.T, *testAgent)
	}{
		{SkipBudgetExhausted, func(c *config.Config) { c.Agent.DailyByteBudget = 1 << 20 }, nil},
		{SkipLowSpace, func(c *config.Config) { c.FreeSpace.MinFreeRatio = 1 }, nil},
		{SkipContainerChurn, func(c *config.Config) { c.Agent.ChurnQuietPeriod = time.Minute },
			func(_ *testing.T, a *testAgent) { a.eng.SetChurn(3) }},
		{SkipBusyIOPressure, func(c *config.Config) { c.Agent.MaxIOPressure = 10 },
			func(t *testing.T, a *testAgent) {
				writeFile(t, filepath.Join(a.procRoot, "pressure", "io"), "some avg10=42.00 avg60=1.00 avg300=1.00 total=1\n")
			}},
		{SkipBusyDisk, func(c *config.Config) { c.Agent.MaxDiskUtil = 0.5 }, busyDisk},
		{SkipHostLocked, nil, func(t *testing.T, a *testAgent) {
			l, err := hostfs.TryLock(a.lockPath())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Unlock() })
		}},
	} {
		t.Run(c.reason, func(t *testing.T) {
			a := newTestAgent(t, c.configure)
			if c.arrange != nil {
				c.arrange(t, a)
			}
			a.cycleAll(context.Background(), triggerSchedule)
			got := a.last(t)
			if got.Result != ResultSkipped || got.Reason != c.reason || got.Message == "" {
				t.Errorf("cycle %s/%s %q, want skipped %s", got.Result, got.Reason, got.Message, c.reason)
			}
			if n := a.eng.Started(measure.ModeSteady); n != 0 {
				t.Errorf("%d probe containers started for a skipped cycle", n)
			}
			me := a.Snapshot().Engines[0]
			if me.SkipsTotal[c.reason] != 1 || me.CyclesTotal[ResultSkipped] != 1 {
				t.Errorf("skips %v, cycles %v", me.SkipsTotal, me.CyclesTotal)
			}
		})
	}
}

// busyDisk makes the data root's device look busy all the time: its
// io_ticks grow by the elapsed time.
func busyDisk(t *testing.T, a *testAgent) {
	info, _ := a.eng.Info(context.Background())
	dev, err := hostfs.DeviceOf(info.DataRoot)
	if err != nil {
		t.Skipf("the test directory's block device: %v", err)
	}
	stat := filepath.Join(a.sysRoot, "block", filepath.Base(dev), "stat")
	start := time.Now()
	tick := func() {
		ms := time.Since(start).Milliseconds()
		writeFile(t, stat, "1 0 8 1 1 0 8 1 0 "+itoa(ms)+" 0 0 0 0 0 0 0\n")
	}
	tick()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			tick()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestConfirmationRunsWhileBusy: confirmation rounds are not guarded (a
// suspicion must be settled); a scheduled cycle is.
func TestConfirmationRunsWhileBusy(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) { c.Agent.ChurnQuietPeriod = time.Minute })
	a.eng.SetChurn(1)
	e := a.engines[0]
	a.confirm(context.Background(), e, a.prof)
	c := a.last(t)
	if c.Result != ResultOK || c.Trigger != triggerConfirm || len(a.eng.Jobs()) == 0 {
		t.Errorf("confirmation cycle %s/%s with %d jobs, want it run", c.Result, c.Reason, len(a.eng.Jobs()))
	}
	for _, j := range a.eng.Jobs() {
		if j.Workload != measure.Fsync {
			t.Errorf("confirmation ran %s", j.Workload)
		}
	}
}

// TestFailedCycles: an unreachable engine, a probe that does not start and
// failed fio jobs are failed cycles with their reason; a probe container
// that went away is replaced by the next cycle.
func TestFailedCycles(t *testing.T) {
	a := newTestAgent(t, nil)
	ctx := context.Background()

	a.eng.SetInfoErr(errors.New("dial unix /fake.sock: connection refused"))
	a.cycleAll(ctx, triggerSchedule)
	if c := a.last(t); c.Result != ResultFailed || c.Reason != "unreachable" {
		t.Errorf("unreachable engine: %s/%s", c.Result, c.Reason)
	}
	if es, _ := a.Engines(ctx); es[0].Reachable || len(es[0].Warnings) == 0 {
		t.Errorf("engines while unreachable: %+v", es[0])
	}
	if up := a.Snapshot().Engines[0].Up; up == nil || *up {
		t.Errorf("layerprobe_engine_up while unreachable: %v, want 0", up)
	}
	a.eng.SetInfoErr(nil)

	a.eng.SetStartErr(errors.New("no such image"))
	a.cycleAll(ctx, triggerSchedule)
	if c := a.last(t); c.Result != ResultFailed || c.Reason != "probe" || !strings.Contains(c.Message, "no such image") {
		t.Errorf("probe did not start: %s/%s %q", c.Result, c.Reason, c.Message)
	}
	a.eng.SetStartErr(nil)

	a.eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		if j.Target == measure.TargetBind {
			return &engine.ExecResult{ExitCode: 1, Stderr: []byte("fio: pid=1, err=28/file:filesetup.c:240, func=write, error=No space left on device")}
		}
		return nil
	})
	a.cycleAll(ctx, triggerSchedule)
	c := a.last(t)
	if c.Result != ResultFailed || c.Reason != "fio_failures" || c.Message != "failed fio jobs: no_space x8" {
		t.Errorf("failed jobs: %s/%s %q", c.Result, c.Reason, c.Message)
	}
	if a.engines[0].sess == nil {
		t.Error("a healthy session was closed after failed jobs")
	}
	a.eng.SetFail(nil)

	// Someone removes the probe container: this cycle's jobs fail, the
	// session is dropped, and the next cycle starts a new probe.
	a.eng.RemoveAll()
	a.cycleAll(ctx, triggerSchedule)
	if c := a.last(t); c.Result != ResultOK {
		t.Errorf("cycle after the probe was removed: %s/%s %q", c.Result, c.Reason, c.Message)
	}
	if n := a.eng.Started(measure.ModeSteady); n != 2 {
		t.Errorf("%d probe containers started, want a second one after the first was removed", n)
	}
	if me := a.Snapshot().Engines[0]; me.CyclesTotal[ResultFailed] != 3 || me.CyclesTotal[ResultOK] != 1 {
		t.Errorf("published cycle counts %v", me.CyclesTotal)
	}
}

// TestRegressionConfirmed: a fresh slowdown of container fsync after a
// learned baseline makes the detector suspicious; the scheduled cycle is
// followed at once by fsync-only confirmation rounds, which confirm it.
func TestRegressionConfirmed(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) {
		c.Targets = []measure.Target{measure.TargetContainer}
		c.Detector.MinBaselineRound, c.Detector.BaselineRounds = 4, 8
		c.Detector.H, c.Detector.ConfirmRounds, c.Detector.ConfirmMin = 2, 3, 2
	})
	ctx := context.Background()
	for range 2 {
		a.cycleAll(ctx, triggerSchedule)
	}
	a.eng.SetSlowdown(measure.TargetContainer, 3)
	a.cycleAll(ctx, triggerSchedule)

	cs := a.cycles(t)
	if len(cs) != 4 || cs[3].Trigger != triggerConfirm || cs[3].Result != ResultOK {
		for _, c := range cs {
			t.Logf("cycle %d %s %s/%s rounds %d", c.ID, c.Trigger, c.Result, c.Reason, c.Rounds)
		}
		t.Fatalf("want three scheduled cycles and a confirmation after the slowdown")
	}
	if first := 1 + 3*2*len(a.prof.Jobs); cs[3].Rounds > 3 || cs[3].FirstRound != first || cs[3].StopReason != "decided" {
		t.Errorf("confirmation: rounds %d from %d, stop %q; want at most 3 from %d, decided", cs[3].Rounds, cs[3].FirstRound, cs[3].StopReason, first)
	}
	me := a.Snapshot().Engines[0]
	if !me.Regression[measure.TargetContainer] {
		t.Errorf("regression not published: %v", me.Regression)
	}
	st, err := a.store.DetectorState(ctx, "default", measure.ModeSteady, measure.TargetContainer)
	if err != nil || !strings.Contains(string(st), `"regressed"`) {
		t.Errorf("stored detector state %s, %v", st, err)
	}

	// A restarted agent remembers the verdict and the published results.
	a.close(ctx)
	b, err := New(a.opts)
	if err != nil {
		t.Fatal(err)
	}
	b.newEngine = a.newEngine
	if err := b.open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.close(ctx)
	b.publish()
	me = b.Snapshot().Engines[0]
	if !me.Regression[measure.TargetContainer] || len(me.Overheads) == 0 || me.LastSuccess.IsZero() {
		t.Errorf("after a restart: regression %v, %d overheads, last success %v", me.Regression, len(me.Overheads), me.LastSuccess)
	}
	a.engines = nil // closed above
}

func TestColdCycle(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) { c.Agent.ColdInterval = time.Hour })
	a.eng.SetSlowdown(measure.TargetContainer, 2)
	ctx := context.Background()
	a.coldAll(ctx, triggerAPI)

	c := a.last(t)
	if c.Mode != measure.ModeCold || c.Result != ResultOK || c.Rounds != 2 || c.Profile != "smoke" {
		t.Fatalf("cold cycle %+v", c)
	}
	if n := a.eng.Started(measure.ModeCold); n != 2 {
		t.Errorf("%d fresh containers for 2 cold rounds", n)
	}
	me := a.Snapshot().Engines[0]
	if me.ColdCyclesTotal[ResultOK] != 1 || me.CyclesTotal[ResultOK] != 0 || len(me.CopyUp) != 2*3 || me.Reflink == nil {
		t.Errorf("published cold state: cycles %v / %v, %d copy-up figures, reflink %v",
			me.ColdCyclesTotal, me.CyclesTotal, len(me.CopyUp), me.Reflink)
	}
	ov, err := a.Overhead(ctx)
	if err != nil || len(ov.Engines) != 2 || ov.Engines[1].Mode != measure.ModeCold || ov.Engines[1].CopyUp == nil ||
		len(ov.Engines[1].CopyUp.Sizes) != 3 || ov.Engines[1].LastCycleID != c.ID {
		t.Errorf("Overhead = %+v, %v; want a steady and a cold entry", ov, err)
	}
	d, err := a.Cycle(ctx, c.ID)
	if err != nil || d.CopyUp == nil || len(d.CopyUp.Samples) != 2*2*3 || d.Mode != measure.ModeCold {
		t.Errorf("cold cycle detail %+v, %v", d.CopyUp, err)
	}
	// The lookups in the cold image's tree: stored, windowed and published
	// per operation, two rounds each, on all three surfaces.
	if len(me.Lookup) != 2 || me.Lookup[0].Op != measure.LookupWalk || me.Lookup[1].Op != measure.LookupDirCreate ||
		me.Lookup[0].Rounds != 2 || me.Lookup[0].ContainerSeconds != 0.04 {
		t.Errorf("published lookups %+v; want walk and dir_create over 2 rounds, the container's walk 0.04 s (the fake's, slowed 2x)", me.Lookup)
	}
	if l := ov.Engines[1].Lookup; l == nil || len(l.Summaries) != 2 || len(l.Samples) != 0 {
		t.Errorf("cold overhead entry's lookups %+v; want 2 summaries and no samples", l)
	}
	targets := map[measure.Target]int{}
	if d.Lookup != nil {
		for _, l := range d.Lookup.Samples {
			if l.OK() {
				targets[l.Target]++
			}
		}
	}
	if d.Lookup == nil || len(d.Lookup.Summaries) != 2 || targets[measure.TargetHost] == 0 || targets[measure.TargetHost] != targets[measure.TargetContainer] {
		t.Errorf("cold cycle detail's lookups %+v; want both operations, as many good samples on host as in the container", d.Lookup)
	}
	// The first cold cycle after a restart is one cold interval after
	// this one, not at once.
	if d := a.firstColdDelay(ctx); d < 59*time.Minute {
		t.Errorf("first cold delay %s after a cold cycle just now, want about an hour", d)
	}
}

// TestColdCycleWithoutFsyncWorkload: workloads selects the steady
// cycle's jobs; a cold cycle still runs the profile's fsync job in each
// fresh container instead of failing every time.
func TestColdCycleWithoutFsyncWorkload(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) {
		c.Agent.ColdInterval = time.Hour
		c.Workloads = []measure.Workload{measure.RandWrite, measure.SmallFiles}
	})
	for _, j := range a.prof.Jobs {
		if j.Workload == measure.Fsync {
			t.Fatalf("the steady profile has fsync: %+v", a.prof.Jobs)
		}
	}
	a.coldAll(context.Background(), triggerAPI)
	c := a.last(t)
	if c.Mode != measure.ModeCold || c.Result != ResultOK || c.Rounds != 2 {
		t.Fatalf("cold cycle %+v; want an ok cold cycle of 2 rounds", c)
	}
	if n := a.eng.Started(measure.ModeCold); n != 2 {
		t.Errorf("%d fresh containers for 2 cold rounds", n)
	}
}

// TestLoop: the scheduler runs a cycle soon after start and then every
// interval, cold cycles on their own timer, API triggers between them and
// one at a time; it stops with its context.
func TestLoop(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) {
		c.Agent.Interval = 300 * time.Millisecond
		c.Agent.ColdInterval = time.Hour
		c.Agent.Budget.Rounds = 1
		c.Agent.Jitter = 0.5
	})
	a.opts.FirstCycleDelay = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	srvErr := make(chan error)
	done := make(chan error, 1)
	go func() { done <- a.loop(ctx, srvErr) }()

	deadline := time.Now().Add(time.Minute)
	count := func(mode measure.Mode, trigger string) int {
		n := 0
		for _, c := range a.cycles(t) {
			if c.Mode == mode && c.Trigger == trigger && c.Result == ResultOK {
				n++
			}
		}
		return n
	}
	for count(measure.ModeSteady, triggerSchedule) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two scheduled cycles within a minute: %+v", a.cycles(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	var triggered bool
	var id int64
	for !triggered && time.Now().Before(deadline) {
		resp, err := a.TriggerColdCycle(ctx)
		switch {
		case err == nil:
			triggered, id = true, resp.CycleID
			if !slices.Equal(resp.Engines, []string{"default"}) || id == 0 || !slices.Equal(resp.CycleIDs, []int64{id}) {
				t.Errorf("TriggerColdCycle = %+v", resp)
			}
		case errors.Is(err, httpapi.ErrBusy):
			time.Sleep(10 * time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	// The answer's cycle is the one that runs: listed as running, then
	// finished under the same id.
	for {
		c, err := a.store.Cycle(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Result != store.ResultRunning {
			if c.Mode != measure.ModeCold || c.Trigger != triggerAPI || c.Result != ResultOK {
				t.Errorf("the triggered cycle ended %+v", c)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the triggered cold cycle did not run: %+v", a.cycles(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(measure.ModeCold, triggerAPI); n != 1 {
		t.Errorf("%d cold cycles triggered over the API, want the 1 the answer named", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("loop returned %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("loop did not stop with its context")
	}
}

// TestLoopRetriesAfterBackoff: a scheduled cycle the guard skips is tried
// again after the backoff, then after twice that, each try recorded and
// counted with its reason; once the host is quiet the retry measures, long
// before the interval.
func TestLoopRetriesAfterBackoff(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) {
		c.Agent.Interval = time.Hour
		c.Agent.RetryBackoff = 200 * time.Millisecond
		c.Agent.MaxIOPressure = 10
		c.Agent.Budget.Rounds = 1
	})
	pressure := filepath.Join(a.procRoot, "pressure", "io")
	writeFile(t, pressure, "some avg10=42.00 avg60=1.00 avg300=1.00 total=1\n")
	a.opts.FirstCycleDelay = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.loop(ctx, make(chan error)) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()

	wait := func(what string, ok func([]store.Cycle) bool) []store.Cycle {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			cs := a.cycles(t)
			if ok(cs) {
				return cs
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute: %+v", what, cs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cs := wait("three skipped cycles", func(cs []store.Cycle) bool { return len(cs) >= 3 })
	writeFile(t, pressure, "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n")
	for i, c := range cs[:3] {
		want := triggerRetry
		if i == 0 {
			want = triggerSchedule
		}
		if c.Result != ResultSkipped || c.Reason != SkipBusyIOPressure || c.Trigger != want {
			t.Errorf("cycle %d: %s/%s trigger %s, want skipped %s trigger %s", i+1, c.Result, c.Reason, c.Trigger, SkipBusyIOPressure, want)
		}
	}
	// The second wait is twice the first (a scheduler that ran late
	// could only make the first longer, not the second shorter).
	if g1, g2 := cs[1].StartedAt.Sub(cs[0].FinishedAt), cs[2].StartedAt.Sub(cs[1].FinishedAt); g1 < 200*time.Millisecond || g2 < 400*time.Millisecond {
		t.Errorf("waits between the skipped cycles %s and %s, want at least 200ms then 400ms", g1, g2)
	}
	cs = wait("a measured retry", func(cs []store.Cycle) bool {
		return slices.ContainsFunc(cs, func(c store.Cycle) bool { return c.Result == ResultOK })
	})
	ok := cs[slices.IndexFunc(cs, func(c store.Cycle) bool { return c.Result == ResultOK })]
	if ok.Trigger != triggerRetry {
		t.Errorf("the measured cycle's trigger is %q, want %q", ok.Trigger, triggerRetry)
	}
	stop() // the loop publishes after the cycle is recorded
	me := a.Snapshot().Engines[0]
	skipped := 0
	for _, c := range cs {
		if c.Result == ResultSkipped {
			skipped++
		}
	}
	if me.SkipsTotal[SkipBusyIOPressure] != float64(skipped) || me.CyclesTotal[ResultSkipped] != float64(skipped) || me.CyclesTotal[ResultOK] != 1 {
		t.Errorf("skips %v, cycles %v; want %d skipped and 1 ok", me.SkipsTotal, me.CyclesTotal, skipped)
	}
	// After a measured cycle the next one is an interval away.
	if d := a.untilDue(); d < 50*time.Minute {
		t.Errorf("after a measured cycle the next is due in %s, want about the interval (1h)", d)
	}
}

func TestNextBackoff(t *testing.T) {
	const initial, limit = 2 * time.Minute, 15 * time.Minute
	var got []time.Duration
	b := time.Duration(0)
	for range 5 {
		b = nextBackoff(b, initial, limit)
		got = append(got, b)
	}
	want := []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
	if b := nextBackoff(0, time.Hour, 10*time.Minute); b != 10*time.Minute {
		t.Errorf("a backoff above the interval: %s, want the interval", b)
	}
}

func TestTriggerOneAtATime(t *testing.T) {
	a := newTestAgent(t, nil)
	if _, err := a.TriggerCycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.TriggerCycle(context.Background()); !errors.Is(err, httpapi.ErrBusy) {
		t.Errorf("second trigger while one is queued: %v, want ErrBusy", err)
	}
	if tr := <-a.triggerCh; tr.mode != measure.ModeSteady || tr.started["default"] == nil {
		t.Errorf("queued trigger %+v", tr)
	}
}

func TestJitter(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) { c.Agent.Interval, c.Agent.Jitter = time.Hour, 0.1 })
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := a.nextInterval()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 54*time.Minute || hi > 66*time.Minute || hi-lo < 6*time.Minute {
		t.Errorf("intervals from %s to %s, want spread over 54m..66m", lo, hi)
	}
}

// writeFile replaces path's content at once (write and rename), so that a
// concurrent reader never sees it half written.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Error(err)
		return
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestAdaptiveCycle: with rounds_per_cycle 0 a cycle makes its minimum
// rounds and goes on until the published window is precise or its byte
// cap is spent, and records which.
func TestAdaptiveCycle(t *testing.T) {
	t.Run("precise", func(t *testing.T) {
		// The fake engine's rounds are all alike: no interval width once
		// there are 6 pairs, the fewest for a 95% interval; the next cycle
		// finds the window precise and makes its minimum rounds only.
		a := newTestAgent(t, func(c *config.Config) {
			c.Agent.Budget.Rounds, c.Agent.Budget.MinRounds, c.Agent.Budget.Precision = 0, 2, 0.03
		})
		a.cycleAll(context.Background(), triggerSchedule)
		if c := a.last(t); c.Result != ResultOK || c.StopReason != "precision" || c.Rounds != 6*len(a.prof.Jobs) {
			t.Errorf("cycle %s, stop %q after %d rounds; want ok, precision after %d", c.Result, c.StopReason, c.Rounds, 6*len(a.prof.Jobs))
		}
		// The minimum: 2 rounds of every job, fsync the 3 that can open a
		// suspicion of the detector (CyclePlan).
		least := 0
		for _, j := range a.prof.Jobs {
			least += max(2, CyclePlan(a.cfg, a.prof).MinRoundsOf[j.Workload])
		}
		if least == 2*len(a.prof.Jobs) {
			t.Fatalf("the test profile has no fsync job, or fsync's minimum is not raised: %d rounds", least)
		}
		a.cycleAll(context.Background(), triggerSchedule)
		if c := a.last(t); c.StopReason != "precision" || c.Rounds != least {
			t.Errorf("second cycle: stop %q after %d rounds; want precision after the minimum %d", c.StopReason, c.Rounds, least)
		}
	})
	t.Run("budget", func(t *testing.T) {
		a := newTestAgent(t, func(c *config.Config) {
			c.Agent.Budget.Rounds, c.Agent.Budget.MinRounds, c.Agent.Budget.Precision = 0, 1, 0.000001
			c.Agent.Budget.MaxBytes = 1 << 30
		})
		rng := rand.New(rand.NewPCG(1, 2))
		a.eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
			return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, 1+0.5*rng.Float64())}
		})
		a.cycleAll(context.Background(), triggerSchedule)
		if c := a.last(t); c.StopReason != "bytes" || c.BytesWritten > 1<<30 {
			t.Errorf("cycle stop %q with %d bytes; want bytes, within 1 GiB", c.StopReason, c.BytesWritten)
		}
	})
}

// TestColdRetriesAfterBackoff: a scheduled cold cycle the guard skips is
// retried after retry_backoff, then twice that, with trigger retry, until
// one measures; then the next cold cycle is the regular one, a cold
// interval after the last regular start.
func TestColdRetriesAfterBackoff(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) {
		c.Agent.ColdInterval = 24 * time.Hour
		c.Agent.RetryBackoff = 2 * time.Minute
		c.Agent.Jitter = 0
		c.Agent.MaxIOPressure = 10
	})
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return clock }
	pressure := filepath.Join(a.procRoot, "pressure", "io")
	writeFile(t, pressure, "some avg10=42.00 avg60=1.00 avg300=1.00 total=1\n")
	ctx := context.Background()

	if d := a.scheduledCold(ctx, true); d != 2*time.Minute {
		t.Fatalf("after a skipped cold cycle the next is due in %s, want the backoff (2m)", d)
	}
	clock = clock.Add(2 * time.Minute)
	if d := a.scheduledCold(ctx, false); d != 4*time.Minute {
		t.Fatalf("after a skipped retry the next is due in %s, want twice the backoff (4m)", d)
	}
	writeFile(t, pressure, "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n")
	clock = clock.Add(4 * time.Minute)
	if d, want := a.scheduledCold(ctx, false), 24*time.Hour-6*time.Minute; d != want {
		t.Errorf("after a measured retry the next cold cycle is due in %s, want %s (the regular one)", d, want)
	}
	var got []string
	for _, c := range a.cycles(t) {
		if c.Mode == measure.ModeCold {
			got = append(got, c.Trigger+"/"+c.Result)
		}
	}
	want := []string{triggerSchedule + "/" + ResultSkipped, triggerRetry + "/" + ResultSkipped, triggerRetry + "/" + ResultOK}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("cold cycles %v, want %v", got, want)
	}
	if n := a.Snapshot().Engines[0].SkipsTotal[SkipBusyIOPressure]; n != 2 {
		t.Errorf("busy_io_pressure skips = %v, want 2", n)
	}
}

// TestNewRefusesACycleBudgetBelowOneRound: a cycle budget that cannot hold
// one round of the profile's costliest job is refused at start, naming the
// setting, rather than skipping that job every cycle.
func TestNewRefusesACycleBudgetBelowOneRound(t *testing.T) {
	cfg := config.Default()
	cfg.Profile = "long"
	_, err := New(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "agent.budget.max_bytes") || !strings.Contains(err.Error(), `profile "long"`) {
		t.Errorf("New with profile long and a 512 MiB cycle budget: %v", err)
	}
	cfg.Agent.Budget.MaxBytes = 0
	if _, err := New(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("New without a cycle budget: %v", err)
	}
}

// TestNewLogsDeprecatedKeys: every deprecated key of the file is logged
// once, when the agent is made, with the key that replaced it.
func TestNewLogsDeprecatedKeys(t *testing.T) {
	cfg := config.Default()
	cfg.Deprecated = []config.Deprecation{{Line: 3, Alias: config.Alias{Old: "agent.target_precision", New: "agent.budget.precision"}}}
	var buf bytes.Buffer
	if _, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&buf, nil))}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "key=agent.target_precision write=agent.budget.precision line=3"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, buf.String())
	}
}

// TestFirstCycleFillsTheWindow: a new agent's first steady cycle, whose
// regular budget holds 2-3 rounds of each job, goes on until every job
// has the 6 rounds of a 95% interval on every target, and publishes one;
// the next cycle makes its regular rounds. The first cold cycle makes 6
// rounds where cold_rounds says 2. Without the first fill, the same
// budget leaves every interval withheld.
func TestFirstCycleFillsTheWindow(t *testing.T) {
	configure := func(fill bool) func(*config.Config) {
		return func(c *config.Config) {
			c.Agent.Budget = config.Budget{MinRounds: 2, Precision: 0.03, MaxBytes: 600 * config.MiB, MaxDuration: time.Hour, SideEvery: 3}
			c.Agent.ColdInterval = time.Hour
			if fill {
				c.Agent.FirstFill = config.FirstFill{MaxBytes: 8 * config.GiB, MaxDuration: time.Hour}
			}
		}
	}
	intervals := func(a *testAgent, mode measure.Mode) (with, without int) {
		ov, err := a.Overhead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, eo := range ov.Engines {
			if eo.Mode != mode {
				continue
			}
			for _, r := range eo.Results {
				if r.Target == measure.TargetHost {
					continue
				}
				if o := r.Overhead[measure.HeadlineMetric(r.Workload)]; o.N >= 6 && !o.Withheld {
					with++
				} else {
					without++
				}
			}
		}
		return with, without
	}
	noisyFake := func(a *testAgent) {
		rng := rand.New(rand.NewPCG(3, 4))
		var mu sync.Mutex
		a.eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
			mu.Lock()
			defer mu.Unlock()
			return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, 1+0.5*rng.Float64())}
		})
	}
	t.Run("without", func(t *testing.T) {
		a := newTestAgent(t, configure(false))
		noisyFake(a)
		a.cycleAll(context.Background(), triggerSchedule)
		if with, _ := intervals(a, measure.ModeSteady); with > 0 {
			t.Errorf("%d intervals after a first cycle of the regular budget; the test needs none", with)
		}
	})
	a := newTestAgent(t, configure(true))
	noisyFake(a)
	ctx := context.Background()
	a.cycleAll(ctx, triggerSchedule)
	first := a.last(t)
	with, without := intervals(a, measure.ModeSteady)
	if first.Result != ResultOK || without > 0 || with != len(a.prof.Jobs)*3 {
		t.Errorf("first cycle %s (stop %q, %d rounds, %d MiB): %d intervals, %d without; want one for every job and target",
			first.Result, first.StopReason, first.Rounds, first.BytesWritten>>20, with, without)
	}
	a.cycleAll(ctx, triggerSchedule)
	if second := a.last(t); second.BytesWritten > 600<<20 {
		t.Errorf("second cycle wrote %d MiB; want the regular budget's 600 at most", second.BytesWritten>>20)
	}
	a.coldAll(ctx, triggerSchedule)
	if c := a.last(t); c.Mode != measure.ModeCold || c.Rounds != 6 {
		t.Errorf("first cold cycle %+v; want 6 rounds", c)
	}
	if with, without := intervals(a, measure.ModeCold); with != 1 || without > 0 {
		t.Errorf("cold intervals after the first cold cycle: %d, %d without; want the container's", with, without)
	}
	a.coldAll(ctx, triggerSchedule)
	if c := a.last(t); c.Rounds != 2 {
		t.Errorf("second cold cycle: %d rounds; want cold_rounds 2", c.Rounds)
	}
}

// TestTriggerAnswersWithTheCycle: a trigger records its cycle at once and
// answers with its id; a second trigger while it waits or runs is busy
// with that id; while the cycle measures, GET /api/v1/cycles shows where
// it stands (the job, rounds done, bytes, the estimated end); it ends
// under the same id, with no progress left.
func TestTriggerAnswersWithTheCycle(t *testing.T) {
	a := newTestAgent(t, nil)
	ctx := context.Background()
	resp, err := a.TriggerCycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.CycleID
	if d, err := a.Cycle(ctx, id); err != nil || d.Result != store.ResultRunning || d.Trigger != triggerAPI ||
		d.Running == nil || d.Running.Phase != "waiting" {
		t.Fatalf("the answered cycle %d: %+v, %v; want it running, waiting", id, d.Cycle, err)
	}
	var be *httpapi.BusyError
	if _, err := a.TriggerCycle(ctx); !errors.As(err, &be) || be.CycleID != id {
		t.Errorf("second trigger: %v; want busy with cycle %d", err, id)
	}

	// Slow executions, so that the test sees the cycle measuring.
	a.eng.SetFail(func(j enginetest.Job) *engine.ExecResult {
		time.Sleep(30 * time.Millisecond)
		return &engine.ExecResult{Stdout: enginetest.FioOutput(j.Workload, 1)}
	})
	tr := <-a.triggerCh
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.pending = tr.started
		a.cycleAll(ctx, triggerAPI)
		a.dropPending(ctx)
		a.running.Store(false)
	}()
	var seen *api.CycleProgress
	deadline := time.Now().Add(time.Minute)
	for seen == nil && time.Now().Before(deadline) {
		cs, err := a.Cycles(ctx, httpapi.CycleQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if p := c.Running; c.ID == id && p != nil && p.Phase == "measure" && p.RoundsDone >= 1 && p.BytesWritten > 0 && p.Workload != "" && p.EstimatedEnd != nil {
				seen = p
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if seen == nil {
		t.Error("GET /api/v1/cycles never showed the cycle measuring with its job, rounds, bytes and end")
	} else if _, err := a.TriggerCycle(ctx); !errors.As(err, &be) || be.CycleID != id {
		t.Errorf("trigger while the cycle measures: %v; want busy with cycle %d", err, id)
	}
	<-done
	cs := a.cycles(t)
	if len(cs) != 1 || cs[0].ID != id || cs[0].Result != ResultOK {
		t.Errorf("cycles %+v; want the one answered, ok", cs)
	}
	if d, _ := a.Cycle(ctx, id); d.Running != nil {
		t.Errorf("a finished cycle shows progress %+v", d.Running)
	}
}

// A missing socket is named as such: the engine is not on this host, or
// its socket is not mounted into the agent's container.
func TestExplainUnreachable(t *testing.T) {
	cause := errors.New("dial unix: connect: no such file or directory")
	missing := "unix://" + filepath.Join(t.TempDir(), "containerd.sock")
	if err := explainUnreachable(missing, cause); !errors.Is(err, cause) || !strings.Contains(err.Error(), "socket "+strings.TrimPrefix(missing, "unix://")+" does not exist") {
		t.Errorf("missing socket: %v", err)
	}
	for _, ep := range []string{"unix://" + t.TempDir(), "tcp://127.0.0.1:2375", "ssh://host"} {
		if err := explainUnreachable(ep, cause); err != cause {
			t.Errorf("%s: %v, want the cause as it is", ep, err)
		}
	}
}
