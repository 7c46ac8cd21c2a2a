package agent

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/store"
)

// coldState is one engine's published cold-probe state (guarded by
// Agent.mu like the rest of engineState's published fields).
type coldState struct {
	results    []measure.Result // windowed cold overheads (host, container; fsync)
	raw        []measure.Sample // samples of the last cold cycle that has any
	sizes      []measure.CopyUpSize
	costPerMiB *float64
	// lookup summarizes the stat walks and first creates in the cold
	// image's tree over the window of cold rounds.
	lookup  []measure.LookupSummary
	reflink *bool
	// startup is the last cold cycle's container start-up cost; nil
	// before one measured it.
	startup      *measure.Startup
	lastCycle    *store.Cycle
	lastSuccess  time.Time
	lastDuration float64
	cycles       map[string]float64
	// lastBytesPerRound estimates the next cold cycle's writes for the
	// budget.
	lastBytesPerRound int64
	// retryAt is when a scheduled cold cycle that was skipped or failed
	// runs again (zero: none pending), after backoff, like steady cycles.
	retryAt time.Time
	backoff time.Duration
}

func newColdState() coldState {
	c := coldState{cycles: map[string]float64{}, lastDuration: math.NaN()}
	for _, r := range Results {
		c.cycles[r] = 0
	}
	return c
}

// firstColdDelay schedules the first cold cycle: one cold interval after
// the last one the store remembers that measured, but not before the first
// steady cycle has had its start, so an agent restarted often still
// measures cold paths on schedule, and a new agent, or one whose last cold
// cycle was skipped, shows cold figures within minutes.
func (a *Agent) firstColdDelay(ctx context.Context) time.Duration {
	delay := a.opts.FirstCycleDelay + time.Minute
	if a.store == nil {
		return delay
	}
	var newest time.Time
	for _, e := range a.engines {
		if c, err := a.store.LatestCycleOf(ctx, e.cfg.Name, measure.ModeCold, ResultOK); err == nil && c.StartedAt.After(newest) {
			newest = c.StartedAt
		}
	}
	if !newest.IsZero() {
		if due := a.cfg.Agent.ColdInterval - a.now().Sub(newest); due > delay {
			delay = due
		}
	}
	return delay
}

// coldAll runs one cold cycle on every engine and publishes.
func (a *Agent) coldAll(ctx context.Context, trigger string) {
	for _, e := range a.engines {
		if ctx.Err() != nil {
			return
		}
		a.coldCycle(ctx, e, trigger)
	}
	a.publish()
	a.releaseMemory()
}

// scheduledCold runs the cold cycles that are due: every engine's when the
// cold interval is up (regular), otherwise the retries whose backoff is
// over. It returns how long until the next cold cycle is due. A skipped or
// failed scheduled cold cycle is retried after agent.retry_backoff,
// doubling up to the cold interval, so that an agent started on a busy
// host does not wait a day for its first cold result.
func (a *Agent) scheduledCold(ctx context.Context, regular bool) time.Duration {
	now := a.now()
	if regular {
		a.coldDue = now.Add(a.jittered(a.cfg.Agent.ColdInterval))
	}
	for _, e := range a.engines {
		if ctx.Err() != nil {
			return 0
		}
		retry := !e.cold.retryAt.IsZero()
		if !regular && (!retry || e.cold.retryAt.After(now)) {
			continue
		}
		trigger := triggerSchedule
		if retry && !regular {
			trigger = triggerRetry
		}
		result := a.coldCycle(ctx, e, trigger)
		if initial := a.cfg.Agent.RetryBackoff; initial > 0 && (result == ResultSkipped || result == ResultFailed) {
			e.cold.backoff = nextBackoff(e.cold.backoff, initial, a.cfg.Agent.ColdInterval)
			e.cold.retryAt = a.now().Add(e.cold.backoff)
			a.logger.Info("next cold cycle soon", "engine", e.cfg.Name, "after", result, "in", e.cold.backoff.String())
		} else {
			e.cold.backoff, e.cold.retryAt = 0, time.Time{}
		}
	}
	a.publish()
	a.releaseMemory()
	return a.untilColdDue()
}

// untilColdDue is the wait until the next regular cold cycle or the
// earliest pending retry.
func (a *Agent) untilColdDue() time.Duration {
	next := a.coldDue
	for _, e := range a.engines {
		if r := e.cold.retryAt; !r.IsZero() && r.Before(next) {
			next = r
		}
	}
	return max(next.Sub(a.now()), 0)
}

// coldEstimate is what a cold cycle is expected to write: the last cold
// cycle's bytes per round, or before the first, per round two fsync jobs'
// files and the copied-up files, plus the host's reference files once.
func (e *engineState) coldEstimate(prof fio.Profile, rounds int) int64 {
	if e.cold.lastBytesPerRound > 0 {
		return e.cold.lastBytesPerRound * int64(rounds)
	}
	var copyUp, fsync int64
	for _, s := range probeimage.CopyUpSizes {
		copyUp += s
	}
	for _, j := range prof.Jobs {
		if j.Workload == measure.Fsync {
			fsync = j.FileBytes
		}
	}
	return int64(rounds)*(2*fsync+copyUp) + copyUp
}

// coldCycle runs one cold cycle on one engine and records it whatever
// happens, under the same host lock, busy-host guard and byte budget as
// steady cycles. Cold results feed no detector: a fresh container's first
// seconds vary too much for a baseline; the cold overhead alert is a plain
// threshold on the published interval.
func (a *Agent) coldCycle(ctx context.Context, e *engineState, trigger string) (result string) {
	prof := a.coldProf
	prior, err := a.store.RecentSamples(ctx, e.cfg.Name, measure.ModeCold, a.cfg.Agent.ColdWindowRounds)
	if err != nil {
		a.logger.Warn("read recent cold rounds", "engine", e.cfg.Name, "err", err)
	}
	rounds := a.cfg.Agent.ColdRounds
	// The first cold cycle makes the rounds the first cold interval
	// needs, within the first fill's ceiling.
	perRound := e.coldEstimate(prof, 1)
	if fill := coldFillRounds(rounds, a.cfg.Agent.FirstFill, prior, perRound, a.dayLeft(ctx, e)); fill > rounds {
		a.logger.Info("first fill: the cold window lacks rounds for an interval", "engine", e.cfg.Name, "rounds", fill)
		rounds = fill
	}
	r, ended := a.begin(ctx, e, cycleSpec{mode: measure.ModeCold, trigger: trigger, profile: a.prof.Name, jobs: prof,
		rounds: rounds, estimate: e.coldEstimate(prof, rounds)})
	if r == nil {
		return ended
	}
	c := r.c
	run, err := e.sess.RunCold(ctx, prof, r.first, rounds, a.rng, r.progress)
	c.Samples, c.CopyUp, c.Reflink, c.Lookup = run.Samples, run.CopyUp, run.Reflink, run.Lookup
	c.BytesWritten = run.BytesWritten()
	// A cold round is complete with its two fsync samples.
	c.Rounds = completedRounds(c.Samples, 2)
	if err != nil {
		r.abort(ctx, ResultFailed, failReason(err), err.Error())
		return ResultFailed
	}
	if st, n := a.coldStartup(ctx, e, c.BytesWritten); st != nil || n > 0 {
		c.BytesWritten += n
		if st != nil {
			a.mu.Lock()
			e.cold.startup = st
			a.mu.Unlock()
		}
	}
	c.Results = measure.SummarizeWindow(prior, c.Samples, a.cfg.Agent.ColdWindowRounds, measure.DefaultConfidence)
	failed := append(failureReasons(c.Samples), timingFailures("copy_up", c.CopyUp)...)
	result = r.end(ctx, "failed cold measurements", append(failed, timingFailures("lookup", c.Lookup)...))
	sizes, cost := a.refreshCopyUp(ctx, e)
	lookup := a.refreshLookup(ctx, e)
	a.mu.Lock()
	e.cold.sizes, e.cold.costPerMiB, e.cold.lookup = sizes, cost, lookup
	a.mu.Unlock()
	return result
}

// coldStartup measures container start-up cost (one start from each of
// agent.startup_images) within what the daily byte budget leaves after
// the cycle's spent bytes, and returns it with the bytes it wrote. It
// publishes nothing of its own: a start-up that could not run (a
// user-named probe image cannot carry the files) is logged, and the cold
// cycle's result does not depend on it.
func (a *Agent) coldStartup(ctx context.Context, e *engineState, spent int64) (*measure.Startup, int64) {
	sizes := a.cfg.Agent.StartupImages
	if len(sizes) == 0 || ctx.Err() != nil {
		return nil, 0
	}
	var left int64
	if b := int64(a.cfg.Agent.DailyByteBudget); b > 0 {
		used, err := a.store.BytesWrittenSince(ctx, e.cfg.Name, a.now().Add(-24*time.Hour))
		if err != nil {
			return nil, 0
		}
		left = max(b-used-spent, 1) // 1 byte fits no start
	}
	bs := make([]int64, len(sizes))
	for i, s := range sizes {
		bs[i] = int64(s)
	}
	run, err := e.sess.RunStartup(ctx, bs, 1, left, a.rng)
	if err != nil {
		a.logger.Info("container start-up cost not measured", "engine", e.cfg.Name, "err", err)
		return nil, run.BytesWritten
	}
	return &run.Startup, run.BytesWritten
}

// completedRounds counts the rounds that have perRound samples.
func completedRounds(samples []measure.Sample, perRound int) int {
	n := map[int]int{}
	for _, s := range samples {
		n[s.Round]++
	}
	done := 0
	for _, c := range n {
		if c == perRound {
			done++
		}
	}
	return done
}

// timingFailures counts the failed timings of a cold cycle's copy-ups or
// lookups like failureReasons counts failed fio jobs: "what xN", or none.
func timingFailures[T interface{ OK() bool }](what string, ts []T) []string {
	n := 0
	for _, t := range ts {
		if !t.OK() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return []string{what + " x" + strconv.Itoa(n)}
}

// refreshLookup recomputes the published lookup summary from the store's
// window of cold rounds, as refreshCopyUp does for copy-up.
func (a *Agent) refreshLookup(ctx context.Context, e *engineState) []measure.LookupSummary {
	ls, err := a.store.RecentLookup(ctx, e.cfg.Name, a.cfg.Agent.ColdWindowRounds)
	if err != nil {
		a.logger.Warn("read recent lookup rounds", "engine", e.cfg.Name, "err", err)
		return nil
	}
	return measure.SummarizeLookup(ls, measure.DefaultConfidence)
}

// refreshCopyUp recomputes the published copy-up summary from the store's
// window of cold rounds (the store has the cycle just finished).
func (a *Agent) refreshCopyUp(ctx context.Context, e *engineState) ([]measure.CopyUpSize, *float64) {
	us, err := a.store.RecentCopyUp(ctx, e.cfg.Name, a.cfg.Agent.ColdWindowRounds)
	if err != nil {
		a.logger.Warn("read recent copy-up rounds", "engine", e.cfg.Name, "err", err)
		return nil, nil
	}
	return measure.SummarizeCopyUp(us, measure.DefaultConfidence)
}

// accountCold updates the published cold state after a cold cycle; the
// caller holds a.mu.
func (e *engineState) accountCold(c *store.Cycle) {
	e.cold.cycles[c.Result]++
	if c.Result == ResultSkipped {
		e.skips[c.Reason]++
	}
	cc := *c
	cc.Samples, cc.CopyUp, cc.Lookup = nil, nil, nil
	e.cold.lastCycle = &cc
	e.lastCycle = &cc
	if c.Result != ResultSkipped {
		e.cold.lastDuration = c.FinishedAt.Sub(c.StartedAt).Seconds()
	}
	for _, s := range c.Samples {
		e.written[s.Target] += float64(s.BytesWritten)
	}
	for _, u := range c.CopyUp {
		if u.OK() {
			if u.Target == measure.TargetContainer {
				e.written[u.Target] += float64(u.SizeBytes)
			} else {
				e.written[u.Target] += 4096
			}
		}
	}
	if len(c.Samples) > 0 {
		e.cold.raw = c.Samples
		if len(c.Results) > 0 {
			e.cold.results = c.Results
		}
		if c.Rounds > 0 {
			e.cold.lastBytesPerRound = c.BytesWritten / int64(c.Rounds)
		}
	}
	if c.Reflink != nil {
		e.cold.reflink = c.Reflink
	}
	if c.Result == ResultOK {
		e.cold.lastSuccess = c.FinishedAt
	}
}

// restoreCold loads the last cold results, so cold metrics survive a
// restart.
func (a *Agent) restoreCold(ctx context.Context, e *engineState) {
	c, err := a.store.LatestCycleOf(ctx, e.cfg.Name, measure.ModeCold, ResultOK)
	if err != nil {
		return
	}
	e.cold.lastSuccess = c.FinishedAt
	e.cold.results = c.Results
	e.cold.reflink = c.Reflink
	if full, err := a.store.Cycle(ctx, c.ID); err == nil {
		e.cold.raw = full.Samples
		if c.Rounds > 0 {
			e.cold.lastBytesPerRound = c.BytesWritten / int64(c.Rounds)
		}
	}
	e.cold.sizes, e.cold.costPerMiB = a.refreshCopyUp(ctx, e)
	e.cold.lookup = a.refreshLookup(ctx, e)
}
