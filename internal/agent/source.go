package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/httpapi"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/metrics"
	"github.com/layerprobe/layerprobe/internal/stats"
	"github.com/layerprobe/layerprobe/internal/store"
)

// The agent is the REST API's and the metrics' source of data.
var (
	_ httpapi.Source = (*Agent)(nil)
	_ metrics.Source = (*Agent)(nil)
)

// Snapshot implements metrics.Source: the last published state. Scrapes
// never touch the store or fio.
func (a *Agent) Snapshot() *metrics.Snapshot { return a.snap.Load() }

// publish rebuilds the metrics snapshot from the engines' state. The
// store is asked first, without a.mu: the REST handlers take that lock, and
// must not wait for SQLite.
func (a *Agent) publish() {
	used := a.budgetUsed()
	a.mu.Lock()
	defer a.mu.Unlock()
	snap := &metrics.Snapshot{}
	for _, e := range a.engines {
		me := metrics.Engine{
			Name:              e.cfg.Name,
			EngineFacts:       e.facts(),
			Regression:        map[measure.Target]bool{},
			CyclesTotal:       maps.Clone(e.cycles),
			SkipsTotal:        maps.Clone(e.skips),
			WrittenBytesTotal: maps.Clone(e.written),
			LastCycleDuration: e.lastDuration,
			LastSuccess:       e.lastSuccess,
			BudgetBytes:       float64(a.cfg.Agent.DailyByteBudget),
		}
		if e.looked {
			up := e.reachable
			me.Up = &up
		}
		for _, t := range measure.Targets {
			if _, ok := me.WrittenBytesTotal[t]; !ok {
				me.WrittenBytesTotal[t] = 0
			}
		}
		me.BudgetUsedBytes = used[e.cfg.Name]
		for _, r := range e.results {
			for m, o := range r.Overhead {
				me.Overheads = append(me.Overheads, metrics.Overhead{Target: r.Target, Workload: r.Workload, Metric: m,
					Mode: measure.ModeSteady, Ratio: o.Ratio, CILow: o.CILow, CIHigh: o.CIHigh})
			}
		}
		for _, r := range e.cold.results {
			for m, o := range r.Overhead {
				me.Overheads = append(me.Overheads, metrics.Overhead{Target: r.Target, Workload: r.Workload, Metric: m,
					Mode: measure.ModeCold, Ratio: o.Ratio, CILow: o.CILow, CIHigh: o.CIHigh})
			}
		}
		a.publishCold(e, &me)
		me.Advisor = a.advisorSeries(e)
		sort.Slice(me.Overheads, func(i, j int) bool {
			x, y := me.Overheads[i], me.Overheads[j]
			if x.Mode != y.Mode {
				return x.Mode > y.Mode // steady first
			}
			if x.Target != y.Target {
				return x.Target < y.Target
			}
			if x.Workload != y.Workload {
				return x.Workload < y.Workload
			}
			return x.Metric < y.Metric
		})
		me.Raw = append(rawFigures(e.raw, measure.ModeSteady), rawFigures(e.cold.raw, measure.ModeCold)...)
		targets := e.targets
		if len(targets) == 0 {
			targets = measure.Targets
		}
		for _, t := range targets {
			if t != measure.TargetHost {
				me.Regression[t] = e.det[t].Regressed()
			}
		}
		snap.Engines = append(snap.Engines, me)
	}
	a.snap.Store(snap)
}

// rawFigures are the medians over a cycle's successful rounds, per target,
// job and data direction.
func rawFigures(samples []measure.Sample, mode measure.Mode) []metrics.Raw {
	type key struct {
		target   measure.Target
		workload measure.Workload
	}
	groups := map[key][]measure.JobResult{}
	for _, s := range samples {
		if s.OK() {
			k := key{s.Target, s.Workload}
			groups[k] = append(groups[k], s.JobResult)
		}
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].target != keys[j].target {
			return keys[i].target < keys[j].target
		}
		return keys[i].workload < keys[j].workload
	})
	var out []metrics.Raw
	for _, k := range keys {
		rs := groups[k]
		for _, op := range []string{"read", "write", "sync"} {
			pick := func(r measure.JobResult) measure.Op {
				switch op {
				case "read":
					return r.Read
				case "write":
					return r.Write
				}
				return r.Sync
			}
			ops := make([]measure.Op, len(rs))
			for i, r := range rs {
				ops[i] = pick(r)
			}
			p := measure.PoolOps(ops)
			if p.IOs == 0 {
				continue
			}
			// Pooled over the cycle's rounds, like the run's raw figures.
			raw := metrics.Raw{Target: k.target, Workload: k.workload, Op: op, Mode: mode,
				IOPS: p.IOPS, BandwidthBytes: p.BandwidthBytes,
				Latency: map[string]float64{"50": p.LatencyP50Sec, "99": p.LatencyP99Sec, "99.9": p.LatencyP999Sec}}
			if op == "sync" {
				// fio reports no rate for syncs, only their latency.
				raw.IOPS, raw.BandwidthBytes = math.NaN(), math.NaN()
			}
			out = append(out, raw)
		}
	}
	return out
}

// budgetUsed is the bytes each engine wrote in the last 24 hours, from the
// store; an engine the store cannot answer for in 5 s is left out (0). The
// engines are fixed once the agent runs, so no lock is needed to list them.
func (a *Agent) budgetUsed() map[string]float64 {
	out := map[string]float64{}
	if a.store == nil || a.cfg.Agent.DailyByteBudget <= 0 {
		return out
	}
	for _, e := range a.engines {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if used, err := a.store.BytesWrittenSince(ctx, e.cfg.Name, a.now().Add(-24*time.Hour)); err == nil {
			out[e.cfg.Name] = float64(used)
		}
		cancel()
	}
	return out
}

// Overhead implements httpapi.Source.
func (a *Agent) Overhead(context.Context) (api.OverheadResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := api.OverheadResponse{GeneratedAt: a.now().UTC(), Confidence: measure.DefaultConfidence, Engines: []api.EngineOverhead{}}
	for _, e := range a.engines {
		steady := a.overheadEntry(e, measure.ModeSteady, e.results, e.lastSteadyID, e.lastSuccess)
		steady.NextCycleAt = timePtr(e.nextSteady)
		resp.Engines = append(resp.Engines, steady)
		if a.cfg.Agent.ColdInterval > 0 || e.cold.lastCycle != nil || len(e.cold.results) > 0 {
			resp.Engines = append(resp.Engines, a.coldOverhead(e))
		}
	}
	return resp, nil
}

// overheadEntry is an engine's entry of GET /api/v1/overhead for one mode;
// the caller holds a.mu.
func (a *Agent) overheadEntry(e *engineState, mode measure.Mode, results []measure.Result, lastCycleID int64, lastSuccess time.Time) api.EngineOverhead {
	eo := api.EngineOverhead{Engine: e.cfg.Name, Driver: e.info.Driver, BackingFS: e.info.BackingFS,
		Mode: mode, Window: a.cfg.Agent.WindowOf(mode), Results: measure.NonNil(results), LastCycleID: lastCycleID,
		IntervalRounds: stats.MinN(measure.DefaultConfidence)}
	if !lastSuccess.IsZero() {
		t := lastSuccess.UTC()
		eo.LastSuccess = &t
	}
	return eo
}

// coldOverhead is an engine's cold entry of GET /api/v1/overhead, with the
// window's copy-up and lookup summaries; the caller holds a.mu.
func (a *Agent) coldOverhead(e *engineState) api.EngineOverhead {
	var last int64
	if e.cold.lastCycle != nil {
		last = e.cold.lastCycle.ID
	}
	eo := a.overheadEntry(e, measure.ModeCold, e.cold.results, last, e.cold.lastSuccess)
	eo.NextCycleAt = timePtr(e.nextCold)
	eo.CopyUp = measure.CopyUpOf(e.cold.reflink, e.cold.costPerMiB, e.cold.sizes, nil)
	eo.Lookup = measure.LookupOf(e.cold.lookup, nil)
	return eo
}

// timePtr is t in UTC, nil when zero: the API's null.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// publishCold adds the cold probe's cycle state and copy-up figures to an
// engine's metrics; the caller holds a.mu.
func (a *Agent) publishCold(e *engineState, me *metrics.Engine) {
	if a.cfg.Agent.ColdInterval > 0 || e.cold.lastCycle != nil {
		me.ColdCyclesTotal = maps.Clone(e.cold.cycles)
	}
	me.ColdLastCycleDuration = e.cold.lastDuration
	me.ColdLastSuccess = e.cold.lastSuccess
	me.Reflink = e.cold.reflink
	if st := e.cold.startup; st != nil && len(st.Sizes) > 0 {
		ms := &metrics.Startup{Sizes: st.Sizes, SecondsPerByte: math.NaN(), BytesPerImageByte: math.NaN()}
		if st.SecondsPerMiB != nil {
			ms.SecondsPerByte = *st.SecondsPerMiB / (1 << 20)
		}
		if st.BytesPerImageByte != nil {
			ms.BytesPerImageByte = *st.BytesPerImageByte
		}
		me.Startup = ms
	}
	me.CopyUpCostPerByte = math.NaN()
	if e.cold.costPerMiB != nil {
		me.CopyUpCostPerByte = *e.cold.costPerMiB / (1 << 20)
	}
	me.Lookup = e.cold.lookup
	for _, s := range e.cold.sizes {
		me.CopyUp = append(me.CopyUp,
			metrics.CopyUp{Target: measure.TargetHost, SizeBytes: s.SizeBytes, Seconds: s.HostSeconds},
			metrics.CopyUp{Target: measure.TargetContainer, SizeBytes: s.SizeBytes, Seconds: s.ContainerSeconds})
	}
}

// Cycles implements httpapi.Source.
func (a *Agent) Cycles(ctx context.Context, q httpapi.CycleQuery) ([]api.Cycle, error) {
	cs, err := a.store.Cycles(ctx, store.Query{Engine: q.Engine, Since: q.Since, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]api.Cycle, 0, len(cs))
	for _, c := range cs {
		out = append(out, a.withProgress(apiCycle(c)))
	}
	return out, nil
}

// Cycle implements httpapi.Source.
func (a *Agent) Cycle(ctx context.Context, id int64) (api.CycleDetail, error) {
	c, err := a.store.Cycle(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return api.CycleDetail{}, fmt.Errorf("cycle %d: %w", id, httpapi.ErrNotFound)
	}
	if err != nil {
		return api.CycleDetail{}, err
	}
	d := api.CycleDetail{Cycle: a.withProgress(apiCycle(c)), Samples: measure.NonNil(c.Samples), Results: measure.NonNil(c.Results)}
	if c.Mode == measure.ModeCold {
		// The cycle's own copy-up figures and lookups, not the window's:
		// the detail is the raw record of this cycle, as `run` reports
		// its own.
		d.CopyUp = measure.NewCopyUp(c.CopyUp, c.Reflink, measure.DefaultConfidence)
		d.Lookup = measure.NewLookup(c.Lookup, measure.DefaultConfidence)
	}
	return d, nil
}

// withProgress adds where a running cycle stands (api.Cycle.Running).
func (a *Agent) withProgress(c api.Cycle) api.Cycle {
	if c.Result != store.ResultRunning {
		return c
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.engines {
		if e.progressID == c.ID && e.progress != nil {
			p := *e.progress
			c.Running = &p
		}
	}
	return c
}

func apiCycle(c store.Cycle) api.Cycle {
	ac := api.Cycle{ID: c.ID, Engine: c.Engine, Mode: c.Mode, Profile: c.Profile, Result: c.Result,
		Reason: c.Reason, Message: c.Message, Trigger: c.Trigger, StartedAt: c.StartedAt.UTC(),
		FinishedAt: c.FinishedAt.UTC(), Rounds: c.Rounds, BytesWritten: c.BytesWritten, StopReason: c.StopReason}
	if !c.FinishedAt.IsZero() {
		ac.DurationSeconds = c.FinishedAt.Sub(c.StartedAt).Seconds()
	}
	return ac
}

// Engines implements httpapi.Source.
func (a *Agent) Engines(context.Context) ([]api.Engine, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]api.Engine, 0, len(a.engines))
	for _, e := range a.engines {
		ae := api.Engine{Name: e.cfg.Name, Endpoint: e.cli.Endpoint(), Reachable: e.reachable, EngineFacts: e.facts(),
			Warnings: append([]string{}, e.warnings...), FsyncRegression: map[string]bool{}, Detector: map[string]api.DetectorState{}}
		if e.infoErr != "" {
			ae.Warnings = append(ae.Warnings, e.infoErr)
		}
		if e.lastCycle != nil {
			c := apiCycle(*e.lastCycle)
			ae.LastCycle = &c
		}
		for t, st := range e.det {
			ae.FsyncRegression[string(t)] = st.Regressed()
			ae.Detector[string(t)] = a.detectorState(st)
		}
		out = append(out, ae)
	}
	return out, nil
}

// detectorState is the API's view of a detector state.
func (a *Agent) detectorState(st detector.State) api.DetectorState {
	ds := api.DetectorState{Phase: string(st.Phase), Rounds: st.Rounds, CUSUM: st.S, ConfirmRemaining: a.det.ConfirmRemaining(st)}
	if ds.Phase == "" {
		ds.Phase = string(detector.PhaseLearning)
	}
	if !st.Since.IsZero() {
		t := st.Since.UTC()
		ds.Since = &t
	}
	if st.Baseline.N > 0 {
		r := math.Exp(st.Baseline.Median)
		ds.BaselineRatio = &r
	}
	return ds
}

// TriggerCycle implements httpapi.Source: it queues one cycle of every
// engine now, recorded as running at once so that the answer names them.
// It takes no parameters on purpose: nothing from the API reaches fio,
// file paths or container configuration.
func (a *Agent) TriggerCycle(ctx context.Context) (api.TriggerResponse, error) {
	return a.trigger(ctx, measure.ModeSteady)
}

// TriggerColdCycle implements httpapi.Source: one cold cycle of every
// engine now.
func (a *Agent) TriggerColdCycle(ctx context.Context) (api.TriggerResponse, error) {
	return a.trigger(ctx, measure.ModeCold)
}

// apiTrigger is a trigger queued for the scheduler: the mode and the
// cycles recorded for it, by engine.
type apiTrigger struct {
	mode    measure.Mode
	started map[string]*store.Cycle
}

func (a *Agent) trigger(ctx context.Context, mode measure.Mode) (api.TriggerResponse, error) {
	if !a.running.CompareAndSwap(false, true) {
		return api.TriggerResponse{}, &httpapi.BusyError{CycleID: a.runningID()}
	}
	// The cycles are recorded before the scheduler sees them; not with
	// the request's context, which may end as soon as it is answered.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	prof := a.prof.Name
	resp := api.TriggerResponse{Engines: []string{}, CycleIDs: []int64{}}
	tr := apiTrigger{mode: mode, started: map[string]*store.Cycle{}}
	for _, e := range a.engines {
		c := &store.Cycle{Engine: e.cfg.Name, Mode: mode, Profile: prof, Trigger: triggerAPI, StartedAt: a.now().UTC()}
		if err := a.store.StartCycle(sctx, c); err != nil {
			for _, st := range tr.started {
				st.Result, st.Reason, st.Message = ResultFailed, "store", "the trigger could not record every engine's cycle"
				_ = a.store.FinishCycle(sctx, st)
			}
			a.running.Store(false)
			return api.TriggerResponse{}, fmt.Errorf("record the triggered cycle: %w", err)
		}
		tr.started[e.cfg.Name] = c
		a.setProgress(e, c.ID, "waiting")
		resp.Engines = append(resp.Engines, e.cfg.Name)
		resp.CycleIDs = append(resp.CycleIDs, c.ID)
	}
	if len(resp.CycleIDs) > 0 {
		resp.CycleID = resp.CycleIDs[0]
	}
	a.triggerCh <- tr // buffered 1, and running was false: never blocks
	return resp, nil
}

// runningID is the id of a cycle that runs, or an API trigger recorded,
// 0 when none is recorded yet (a scheduled cycle being prepared).
func (a *Agent) runningID() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.engines {
		if e.progressID != 0 && (e.progress == nil || e.progress.Phase != "waiting") {
			return e.progressID
		}
	}
	for _, e := range a.engines {
		if e.progressID != 0 {
			return e.progressID
		}
	}
	return 0
}

// Ready implements httpapi.Source.
func (a *Agent) Ready() error {
	if !a.ready.Load() {
		return errors.New("starting: engines not contacted yet")
	}
	return nil
}
