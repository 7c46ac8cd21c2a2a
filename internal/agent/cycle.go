package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/advisor"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
	"github.com/layerprobe/layerprobe/internal/store"
)

// Cycle results: a fixed set, because they become metric label values.
const (
	ResultOK          = "ok"
	ResultFailed      = "failed"
	ResultSkipped     = "skipped"
	ResultInterrupted = "interrupted"
)

// Results lists every cycle result, for pre-initialised counters.
var Results = []string{ResultOK, ResultFailed, ResultSkipped, ResultInterrupted}

// engineState is one engine's live state. Fields below mu are published
// (API, metrics) and guarded by Agent.mu; the rest belongs to the scheduler
// goroutine.
type engineState struct {
	cfg  config.Engine
	cli  engine.Client
	sess *probe.Session
	adv  *advisor.Advisor
	det  map[measure.Target]detector.State
	// lastCycleBytes estimates the next cycle's writes for the budget
	// when cycles have no byte cap.
	lastCycleBytes int64
	// due is when the next scheduled steady cycle runs (zero: at the
	// first scheduled run); backoff is the wait after the last scheduled
	// cycle when it was skipped or failed, 0 after one that measured.
	due     time.Time
	backoff time.Duration

	// published
	info engine.Info
	// looked: the engine was asked at least once; reachable: it answered
	// the last time (infoErr says why not).
	looked     bool
	reachable  bool
	infoErr    string
	fioVersion string
	warnings   []string
	// hostArm and hostArmErr: the session's HostArmCgroup and why not
	// joined (probe.Session).
	hostArm      string
	hostArmErr   string
	topology     measure.TopologyFacts // the session's (probe.Session.Facts)
	targets      []measure.Target
	results      []measure.Result // windowed overheads
	raw          []measure.Sample // samples of the last cycle that has any
	cold         coldState
	lastCycle    *store.Cycle // of any mode
	lastSteadyID int64        // id of the last steady cycle, 0 before one
	lastSuccess  time.Time
	lastDuration float64
	cycles       map[string]float64
	skips        map[string]float64
	written      map[measure.Target]float64
	containers   *api.EngineContainers // the last advisor pass; nil before one
	// progress is where the engine's running cycle stands (progressID),
	// nil when none runs.
	progress   *api.CycleProgress
	progressID int64
	// nextSteady and nextCold are when the next cycle of each mode is due
	// (zero: none scheduled), published by the scheduler (publishNext).
	nextSteady, nextCold time.Time
}

func newEngineState(ec config.Engine, cli engine.Client) *engineState {
	e := &engineState{cfg: ec, cli: cli, det: map[measure.Target]detector.State{},
		cycles: map[string]float64{}, skips: map[string]float64{}, written: map[measure.Target]float64{},
		lastDuration: math.NaN(), cold: newColdState()}
	for _, r := range Results {
		e.cycles[r] = 0
	}
	for _, r := range SkipReasons {
		e.skips[r] = 0
	}
	return e
}

func (e *engineState) closeSession(ctx context.Context) {
	if e.sess != nil {
		e.sess.Close(ctx)
		e.sess = nil
	}
}

// estimateBytes is what a cycle is expected to write, for the daily
// budget: its byte cap when it has one (a filling cycle's, its fill
// ceiling); otherwise the last cycle's bytes,
// or before the first what each job's least rounds can write on every
// target (fio.Profile.MaxBytes): the fsync job's are more than the others'
// where the detector needs them (Plan.MinRoundsOf).
func (e *engineState) estimateBytes(prof fio.Profile, plan probe.Plan, targets int) int64 {
	if plan.Fill.Pairs > 0 && plan.Fill.MaxBytes > 0 {
		return max(plan.Fill.MaxBytes, plan.MaxBytes)
	}
	if plan.MaxBytes > 0 {
		return plan.MaxBytes
	}
	if e.lastCycleBytes > 0 {
		return e.lastCycleBytes
	}
	var n int64
	for _, j := range prof.Jobs {
		one := prof
		one.Jobs = []fio.Job{j}
		n += one.MaxBytes(max(plan.LeastRounds(j.Workload), 1), targets)
	}
	return n
}

// restore loads what the store remembers, so metrics and the detector
// survive a restart.
func (a *Agent) restore(ctx context.Context, e *engineState) {
	for _, t := range measure.Targets[1:] {
		b, err := a.store.DetectorState(ctx, e.cfg.Name, measure.ModeSteady, t)
		if err != nil {
			continue
		}
		var st detector.State
		if json.Unmarshal(b, &st) == nil {
			e.det[t] = st
		}
	}
	if c, err := a.store.LatestCycle(ctx, e.cfg.Name, ""); err == nil {
		e.lastCycle = &c
		e.fioVersion = c.FioVersion
	}
	a.restoreCold(ctx, e)
	if c, err := a.store.LatestCycleOf(ctx, e.cfg.Name, measure.ModeSteady, ""); err == nil {
		e.lastSteadyID = c.ID
	}
	if c, err := a.store.LatestCycleOf(ctx, e.cfg.Name, measure.ModeSteady, ResultOK); err == nil {
		e.lastSuccess = c.FinishedAt
		e.results = c.Results
		if full, err := a.store.Cycle(ctx, c.ID); err == nil {
			e.raw = full.Samples
			e.lastCycleBytes = c.BytesWritten
		}
	}
}

// cycleSpec is what sets one cycle apart before it measures.
type cycleSpec struct {
	mode    measure.Mode
	trigger string
	// profile is the recorded profile name; jobs are the jobs the cycle
	// runs (a cold or confirmation cycle runs the fsync job only).
	profile string
	jobs    fio.Profile
	rounds  int
	// estimate is what the cycle is expected to write, for the daily
	// budget.
	estimate int64
	// unguarded skips the busy-host guard: confirmation rounds must run
	// while a suspicion is open.
	unguarded bool
}

// cycleRun is a started cycle: recorded as running, holding the host lock,
// its rounds numbered from first.
type cycleRun struct {
	a     *Agent
	e     *engineState
	c     *store.Cycle
	log   *slog.Logger
	first int
	lock  *hostfs.Lock
	// layout is what laying out the job files wrote, per target.
	layout map[measure.Target]int64
}

// begin does what every cycle does before it measures: take the host lock,
// look at the engine, ask the guard, make sure the probe session runs,
// claim the round numbers and record the cycle as started. A cycle that
// ends there (skipped, or failed before measuring) is recorded whole and
// begin returns nil and how it ended; otherwise the caller measures and
// calls end.
func (a *Agent) begin(ctx context.Context, e *engineState, sp cycleSpec) (r *cycleRun, ended string) {
	c := &store.Cycle{Engine: e.cfg.Name, Mode: sp.mode, Profile: sp.profile, Trigger: sp.trigger, StartedAt: a.now().UTC()}
	if pre := a.pending[e.cfg.Name]; pre != nil && sp.trigger == triggerAPI && pre.Mode == sp.mode {
		// An API trigger recorded this cycle already, to answer with its
		// id: it goes on as that one.
		delete(a.pending, e.cfg.Name)
		c = pre
		a.setProgress(e, c.ID, "preparing")
	}
	r = &cycleRun{a: a, e: e, c: c, log: a.logger.With("engine", e.cfg.Name, "trigger", sp.trigger)}

	lock, err := hostfs.TryLock(a.lockPath())
	if err != nil {
		r.finish(ctx, ResultSkipped, SkipHostLocked, "another layerprobe is measuring on this host: "+err.Error())
		return nil, c.Result
	}
	r.lock = lock
	info, err := a.refreshInfo(ctx, e)
	if err != nil {
		e.closeSession(ctx)
		r.abort(ctx, ResultFailed, "unreachable", err.Error())
		return nil, c.Result
	}
	c.Driver, c.BackingFS, c.EngineVersion = info.Driver, info.BackingFS, info.ServerVersion
	if !sp.unguarded {
		if s := a.guard(ctx, e, info, sp.jobs, sp.estimate); s != nil {
			r.abort(ctx, ResultSkipped, s.reason, s.message)
			return nil, c.Result
		}
	}
	if err := a.ensureSession(ctx, e); err != nil {
		r.abort(ctx, ResultFailed, failReason(err), err.Error())
		return nil, c.Result
	}
	c.FioVersion = e.sess.FioVersion
	// The round numbers are claimed with the cycle's start, so a kill
	// before FinishCycle can never make the next cycle reuse numbers the
	// detector has already seen.
	first, err := a.store.NextRound(ctx, e.cfg.Name, sp.mode)
	if err != nil {
		r.abort(ctx, ResultFailed, "store", err.Error())
		return nil, c.Result
	}
	c.FirstRound, c.Rounds = first, sp.rounds
	if c.ID != 0 {
		if err := a.store.ClaimRounds(ctx, c); err != nil {
			r.abort(ctx, ResultFailed, "store", err.Error())
			return nil, c.Result
		}
	} else if err := a.store.StartCycle(ctx, c); err != nil {
		r.log.Error("record cycle start", "mode", sp.mode, "err", err)
		_ = lock.Unlock()
		return nil, ResultFailed
	}
	a.setProgress(e, c.ID, "preparing")
	r.first = first
	return r, ""
}

// setProgress publishes that the engine's cycle id is in phase, with no
// figures yet.
func (a *Agent) setProgress(e *engineState, id int64, phase string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e.progressID = id
	e.progress = &api.CycleProgress{Phase: phase, UpdatedAt: a.now().UTC()}
}

// clearProgress ends the published progress of cycle id.
func (a *Agent) clearProgress(e *engineState, id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.progressID == id {
		e.progressID, e.progress = 0, nil
	}
}

// progress publishes where the cycle's measurement stands, from the
// probe's reports (probe.Progress): the job it is on, the rounds done,
// the bytes written and the estimated end.
func (r *cycleRun) progress(p probe.Progress) {
	now := r.a.now().UTC()
	done := max(p.Round-1, 0)
	if p.Phase == "done" {
		done = p.Round
	}
	cp := &api.CycleProgress{Phase: p.Phase, Workload: p.Workload, RoundsDone: done, BytesWritten: p.BytesWritten, UpdatedAt: now}
	if p.ETA > 0 {
		end := now.Add(p.ETA)
		cp.EstimatedEnd = &end
	}
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	if r.e.progressID == r.c.ID {
		r.e.progress = cp
	}
}

// dropPending records the cycles an API trigger recorded that no cycle
// took (the agent stopped first) as interrupted.
func (a *Agent) dropPending(ctx context.Context) {
	for _, e := range a.engines {
		c := a.pending[e.cfg.Name]
		if c == nil {
			continue
		}
		c.Result, c.Reason, c.Message, c.FinishedAt = ResultInterrupted, "interrupted", "the agent stopped before the cycle began", a.now().UTC()
		if err := a.store.FinishCycle(context.WithoutCancel(ctx), c); err != nil {
			a.logger.Error("record cycle", "engine", e.cfg.Name, "err", err)
		}
		a.clearProgress(e, c.ID)
	}
	a.pending = nil
}

// failReason is the recorded reason of an error that stopped a cycle: the
// probe's code (fio_missing, image, ...) or "prepare".
func failReason(err error) string { return probe.AsError(err, "prepare").Code }

// abort records a cycle that ends without a measurement and releases the
// host lock.
func (r *cycleRun) abort(ctx context.Context, result, reason, msg string) {
	r.finish(ctx, result, reason, msg)
	_ = r.lock.Unlock()
}

// end records how a measuring cycle ended: interrupted when ctx ended,
// failed when any measurement failed (failures lists them, "reason xN"),
// ok otherwise; it releases the host lock. A session whose probe container
// no longer answers (removed by someone else, engine restarted) is closed,
// so the next cycle builds a fresh one.
func (r *cycleRun) end(ctx context.Context, what string, failures []string) (result string) {
	defer r.lock.Unlock()
	result, reason, msg := ResultOK, "", ""
	if ctx.Err() != nil {
		result, reason, msg = ResultInterrupted, "interrupted", "the agent stopped during the cycle"
	} else if len(failures) > 0 {
		result, reason, msg = ResultFailed, "fio_failures", what+": "+strings.Join(failures, ", ")
		if !r.e.sess.Healthy(ctx) {
			r.e.closeSession(ctx)
		}
	}
	r.finish(ctx, result, reason, msg)
	return result
}

// cycle runs one steady measurement cycle on one engine and records it,
// whatever happens: a failed cycle is data. It returns the cycle's result
// and whether the detector became suspicious, so the caller runs
// confirmation rounds (after this cycle has released the host lock).
func (a *Agent) cycle(ctx context.Context, e *engineState, trigger string, prof fio.Profile) (result string, confirm bool) {
	plan := a.cyclePlan(prof)
	// The window's rounds count towards the precision: a cycle stops as
	// soon as the published interval is narrow enough. A window short of
	// an interval's rounds is filled first (FillPlan).
	plan.Prior, plan.Window = a.window(ctx, e)
	plan = FillPlan(plan, a.cfg.Agent.FirstFill, prof, a.dayLeft(ctx, e))
	r, ended := a.begin(ctx, e, cycleSpec{mode: measure.ModeSteady, trigger: trigger, profile: prof.Name, jobs: prof,
		rounds: plannedRounds(plan, prof), estimate: e.estimateBytes(prof, plan, len(a.cfg.Targets)+1)})
	if r == nil {
		return ended, false
	}
	c := r.c
	if plan.Fill.Pairs > 0 {
		r.log.Info("first fill: the window lacks rounds for an interval; this cycle goes on until every job has them",
			"rounds", plan.Fill.Pairs, "max_bytes", plan.Fill.MaxBytes, "max_duration", plan.Fill.MaxDuration.String())
	}
	r.took(e.sess.Measure(ctx, prof, plan, r.first, a.rng, r.progress))
	var suspects []measure.Target
	if ctx.Err() == nil {
		suspects = a.observe(ctx, e, c.Samples)
	}
	result = r.end(ctx, "failed fio jobs", failureReasons(c.Samples))
	if result != ResultInterrupted && len(suspects) > 0 {
		r.log.Warn("fsync regression suspected, running confirmation rounds", "targets", suspects)
		return result, true
	}
	return result, false
}

// confirm runs the confirmation rounds of an open suspicion: fsync rounds
// only, fed to the detector one by one, until it has its verdict or the
// detector's confirm_rounds are done. Confirmation is not guarded: it must
// run while the suspicion is open.
func (a *Agent) confirm(ctx context.Context, e *engineState, prof fio.Profile) {
	prof = fsyncOnly(prof)
	plan := probe.Plan{Rounds: a.det.ConfirmRounds}
	r, _ := a.begin(ctx, e, cycleSpec{mode: measure.ModeSteady, trigger: triggerConfirm, profile: prof.Name, jobs: prof,
		rounds: plan.Rounds, unguarded: true})
	if r == nil {
		return
	}
	plan.Prior, plan.Window = a.window(ctx, e)
	plan.After = func(round []measure.Sample) bool {
		a.observe(ctx, e, round)
		return !a.confirming(e)
	}
	r.took(e.sess.Measure(ctx, prof, plan, r.first, a.rng, r.progress))
	r.end(ctx, "failed fio jobs", failureReasons(r.c.Samples))
}

// cyclePlan is the plan of a steady cycle (CyclePlan).
func (a *Agent) cyclePlan(prof fio.Profile) probe.Plan {
	return CyclePlan(a.cfg, prof)
}

// window is the steady rounds stored in the agent's window
// (agent.window_rounds) and its size: what a steady cycle's precision and
// published overheads rest on beside its own rounds (probe.Plan.Prior,
// Window). A store that cannot answer leaves the cycle its own rounds.
func (a *Agent) window(ctx context.Context, e *engineState) ([]measure.Sample, int) {
	n := a.cfg.Agent.WindowRounds
	prior, err := a.store.RecentSamples(ctx, e.cfg.Name, measure.ModeSteady, n)
	if err != nil {
		a.logger.Warn("read recent rounds", "engine", e.cfg.Name, "err", err)
	}
	return prior, n
}

// dayLeft is what the daily byte budget leaves the engine now; -1 when
// there is none, or the store cannot say (the guard decides then).
func (a *Agent) dayLeft(ctx context.Context, e *engineState) int64 {
	b := int64(a.cfg.Agent.DailyByteBudget)
	if b <= 0 {
		return -1
	}
	used, err := a.store.BytesWrittenSince(ctx, e.cfg.Name, a.now().Add(-24*time.Hour))
	if err != nil {
		return -1
	}
	return max(b-used, 0)
}

// plannedRounds is the most rounds a plan can run: the round numbers a
// cycle claims when it starts.
func plannedRounds(plan probe.Plan, prof fio.Profile) int {
	per := plan.Rounds
	if per <= 0 {
		per = max(plan.MaxRounds, probe.DefaultMaxRounds)
	}
	return per * len(prof.Jobs)
}

// took records what a measurement did in the cycle.
func (r *cycleRun) took(out probe.Outcome) {
	r.c.Samples = out.Samples
	r.c.Rounds = out.Rounds
	r.c.BytesWritten = out.BytesWritten
	r.c.StopReason = out.Stop
	r.c.Results = out.Results
	r.layout = out.LayoutBytes
}

// finish records a cycle's outcome (inserted whole if it never started,
// updated otherwise), publishes it to the engine's state and the metrics
// snapshot and logs it. A store error is logged: the published counters
// still count the cycle. The snapshot is rebuilt here, not only when the
// scheduler's turn ends: a suspicion's confirmation cycles and the pruning
// come first there, and until then /metrics would lack a cycle that
// /api/v1/cycles already lists.
func (r *cycleRun) finish(ctx context.Context, result, reason, msg string) {
	a, c, log := r.a, r.c, r.log
	c.Result, c.Reason, c.Message = result, reason, msg
	c.FinishedAt = a.now().UTC()
	var err error
	if c.ID == 0 {
		err = a.store.RecordSkip(context.WithoutCancel(ctx), c)
	} else {
		err = a.store.FinishCycle(context.WithoutCancel(ctx), c)
	}
	if err != nil {
		log.Error("record cycle", "mode", c.Mode, "err", err)
	}
	a.account(r.e, c, r.layout)
	a.clearProgress(r.e, c.ID)
	a.publish()
	lv := log.Info
	if result == ResultFailed {
		lv = log.Warn
	}
	lv("cycle done", "mode", c.Mode, "result", result, "reason", reason, "msg", msg, "rounds", c.Rounds,
		"stop", c.StopReason, "bytes_written", c.BytesWritten, "duration_seconds", c.FinishedAt.Sub(c.StartedAt).Seconds())
}

// Cycle triggers.
const (
	triggerSchedule = "schedule"
	triggerRetry    = "retry" // a scheduled cycle after a skipped or failed one
	triggerAPI      = "api"
	triggerConfirm  = "confirm"
)

// confirming reports whether a suspicion is open on any target.
func (a *Agent) confirming(e *engineState) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range e.det {
		if a.det.ConfirmRemaining(st) > 0 {
			return true
		}
	}
	return false
}

// ensureSession keeps one long-lived probe session per engine and builds a
// new one when it is missing or broken.
func (a *Agent) ensureSession(ctx context.Context, e *engineState) error {
	if e.sess != nil && e.sess.Healthy(ctx) {
		return nil
	}
	e.closeSession(ctx)
	s, err := probe.Prepare(ctx, e.cli, a.probeOptions(e.cfg), a.logger)
	if err != nil {
		return err
	}
	e.sess = s
	a.mu.Lock()
	e.fioVersion, e.warnings, e.targets = s.FioVersion, s.Warnings, s.Targets()
	e.hostArm, e.hostArmErr = s.HostArmCgroup, s.HostArmCgroupError
	e.topology = s.Facts().TopologyFacts
	a.mu.Unlock()
	return nil
}

// observe feeds this cycle's fsync rounds to the detector of every non-host
// target, persists the states and returns the targets that became suspect.
func (a *Agent) observe(ctx context.Context, e *engineState, samples []measure.Sample) []measure.Target {
	metric := a.cfg.Detector.Metric
	type key struct {
		round  int
		target measure.Target
	}
	vals := map[key]float64{}
	roundSet := map[int]bool{}
	for _, s := range samples {
		if s.Workload != measure.Fsync || !s.OK() {
			continue
		}
		vals[key{s.Round, s.Target}] = measure.MetricValue(metric, s.JobResult)
		roundSet[s.Round] = true
	}
	rounds := make([]int, 0, len(roundSet))
	for r := range roundSet {
		rounds = append(rounds, r)
	}
	sort.Ints(rounds)
	var suspects []measure.Target
	for _, t := range measure.Targets[1:] {
		st, seen := e.det[t]
		changed := false
		for _, r := range rounds {
			h, okH := vals[key{r, measure.TargetHost}]
			v, okT := vals[key{r, t}]
			if !okT {
				continue
			}
			x := math.NaN()
			if okH && h > 0 && v > 0 {
				x = math.Log(v / h)
			}
			var ev detector.Event
			st, ev = a.det.Observe(st, detector.Observation{Round: r, At: a.now(), X: x})
			changed = true
			switch ev {
			case detector.EventSuspect:
				suspects = append(suspects, t)
			case detector.EventConfirmed:
				a.logger.Warn("fsync regression confirmed", "engine", e.cfg.Name, "target", t,
					"baseline_ratio", math.Exp(st.Baseline.Median))
			case detector.EventRecovered:
				a.logger.Info("fsync regression over", "engine", e.cfg.Name, "target", t)
			}
		}
		if !changed && !seen {
			continue
		}
		a.mu.Lock()
		e.det[t] = st
		a.mu.Unlock()
		if b, err := json.Marshal(st); err == nil {
			if err := a.store.SaveDetectorState(ctx, e.cfg.Name, measure.ModeSteady, t, b); err != nil {
				a.logger.Error("save detector state", "engine", e.cfg.Name, "target", t, "err", err)
			}
		}
	}
	return suspects
}

// account updates the published counters and state after a cycle.
func (a *Agent) account(e *engineState, c *store.Cycle, layout map[measure.Target]int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.Mode == measure.ModeCold {
		e.accountCold(c)
		return
	}
	e.cycles[c.Result]++
	if c.Result == ResultSkipped {
		e.skips[c.Reason]++
	}
	cc := *c
	cc.Samples = nil
	e.lastCycle = &cc
	e.lastSteadyID = c.ID
	if c.Result != ResultSkipped {
		e.lastDuration = c.FinishedAt.Sub(c.StartedAt).Seconds()
	}
	for _, s := range c.Samples {
		e.written[s.Target] += float64(s.BytesWritten)
	}
	for t, n := range layout {
		e.written[t] += float64(n)
	}
	if len(c.Samples) > 0 {
		e.raw = c.Samples
		if len(c.Results) > 0 {
			e.results = c.Results
		}
		if c.Trigger != triggerConfirm {
			e.lastCycleBytes = c.BytesWritten
		}
	}
	if c.Result == ResultOK {
		e.lastSuccess = c.FinishedAt
	}
}

func (a *Agent) lockPath() string {
	if a.opts.LockPath != "" {
		return a.opts.LockPath
	}
	return hostfs.DefaultLockPath
}

// failureReasons lists the distinct failure reasons with their counts.
func failureReasons(samples []measure.Sample) []string {
	count := map[string]int{}
	for _, s := range samples {
		if !s.OK() {
			count[string(s.Failure.Reason)]++
		}
	}
	out := make([]string, 0, len(count))
	for r, n := range count {
		out = append(out, fmt.Sprintf("%s x%d", r, n))
	}
	sort.Strings(out)
	return out
}

// fsyncOnly is the profile reduced to its fsync job, for confirmation
// rounds: only the suspected workload needs fresh evidence.
func fsyncOnly(p fio.Profile) fio.Profile {
	q := p
	q.Jobs = slices.DeleteFunc(slices.Clone(p.Jobs), func(j fio.Job) bool { return j.Workload != measure.Fsync })
	return q
}

// facts are what the agent publishes of the engine: its last answer, and
// what the probe session found (fio's version restored from the store
// until a session has started).
func (e *engineState) facts() measure.EngineFacts {
	f := e.info.Facts()
	f.Runtime = e.runtime()
	f.FioVersion = e.fioVersion
	f.HostArmCgroup, f.HostArmCgroupError = e.hostArm, e.hostArmErr
	f.TopologyFacts = e.topology
	return f
}

// runtime is the engine's runtime label: what the engine said, or before
// it answered, containerd for an engine of that type. A Docker API engine
// stays empty until it answers: only its /version tells Docker from
// Podman.
func (e *engineState) runtime() string {
	if e.info.Runtime == "" && e.cfg.IsContainerd() {
		return engine.RuntimeContainerd
	}
	return e.info.Runtime
}
