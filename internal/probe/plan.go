package probe

import (
	"cmp"
	"context"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// Plan says how many rounds a measurement makes and when it stops.
//
// A round runs one job once on every target, in a random order that the
// job's next round reverses (ABBA): whatever drifts during a pair of rounds
// weighs on every target alike. Rounds of the different jobs alternate.
type Plan struct {
	// Rounds is a fixed number of rounds of every job. 0 makes the
	// measurement adaptive: MinRounds rounds of every job, then more rounds
	// of the job whose interval is widest, until every headline interval
	// is within Precision or the next round would exceed MaxBytes or
	// MaxDuration.
	Rounds    int
	MinRounds int
	// MinRoundsOf raises MinRounds for the workloads it names: an agent's
	// cycle gives fsync the rounds its detector needs to open a suspicion
	// within the cycle (detector.Params.RoundsToSuspect).
	MinRoundsOf map[measure.Workload]int
	// MaxRounds bounds the rounds of any one job (0: DefaultMaxRounds).
	MaxRounds int
	// Precision is the half-width, in ratio units (0.03 = 3 percentage
	// points), every headline interval must reach. 0 stops an adaptive
	// measurement after MinRounds.
	Precision float64
	// MaxBytes bounds what the measurement writes, layout included; 0 is
	// no bound. A round is started when its estimate (roundCost: the
	// job's last round) fits in what is left, and a steady job's round
	// whose worst case would not (every target's execution at its byte
	// cap, and its files) runs with every execution's cap lowered to its
	// share of what is left (roundJob), so the budget is a hard cap.
	// Starting rounds only when their worst case fits would keep it too,
	// but gives up rounds: an fsync execution is ended by its time limit
	// far below its cap (on the benchmark's disk, agent cycles under that
	// rule made 5 fsync rounds a cycle, under this one 8).
	MaxBytes int64
	// MaxDuration bounds how long the adaptive rounds go on; 0 is no
	// bound. A round that would end after it is not started (its length
	// estimated from the job's last round). The minimum rounds run
	// regardless: they are what makes an interval at all.
	MaxDuration time.Duration
	// Prior holds earlier samples whose rounds count towards Precision
	// (the agent's window of recent cycles). They are not returned.
	Prior []measure.Sample
	// Window, above 0, is how many of each workload's most recent rounds,
	// Prior's and this measurement's, Outcome.Results summarise (the
	// agent's window); 0 summarises every round. A job whose rounds fill
	// the window runs no adaptive rounds (jobState.windowFull): its
	// interval cannot narrow further.
	Window int
	// Confidence of the intervals that decide Precision (0: the default).
	Confidence float64
	// SideEvery, above 1, gives the headline pair the bytes: once a job
	// has MinRounds rounds, its side targets (bind and volume, when the
	// container is measured) run in one of every SideEvery of its
	// adaptive rounds, and Precision is asked of the headline targets
	// alone. The headline is container against host; bind (the A/A meter)
	// and the volume took half of a default run's execution bytes. Their
	// MinRounds rounds keep a 95% interval each. 0 or 1: every target in
	// every round. Fixed rounds (Rounds > 0) run every target always.
	SideEvery int
	// Fill, when its Pairs is above 0, fills an empty window: a job
	// whose interval rests on fewer than Fill.Pairs rounds (Prior's and
	// this measurement's) runs rounds, every target in each, until it has
	// them, within Fill.MaxBytes and Fill.MaxDuration instead of MaxBytes
	// and MaxDuration; then the measurement stops (StopRounds). The agent's first cycle asks the rounds an exact
	// 95% interval needs (stats.MinN): the regular budget made 2-4 a job,
	// and the page said "no interval yet" until the next cycle, 6 hours
	// later.
	Fill Fill
	// After, when set, sees every completed round's samples; returning
	// true ends the measurement (measure.StopDecided). Confirmation
	// rounds use it to stop as soon as the detector has its verdict.
	After func(round []measure.Sample) bool
}

// Fill is the first-fill rule of a Plan (Plan.Fill).
type Fill struct {
	Pairs       int
	MaxBytes    int64
	MaxDuration time.Duration
}

// filling reports whether the job's next round is a fill round: its
// interval rests on fewer rounds than Fill.Pairs.
func (p Plan) filling(js *jobState) bool {
	return p.Fill.Pairs > 0 && js.pairs() < p.Fill.Pairs
}

// maxBytes is the byte budget the job's next round runs under: the fill
// ceiling for a fill round (never below MaxBytes), MaxBytes otherwise.
func (p Plan) maxBytes(js *jobState) int64 {
	if p.filling(js) && p.MaxBytes > 0 {
		if p.Fill.MaxBytes <= 0 {
			return 0
		}
		return max(p.Fill.MaxBytes, p.MaxBytes)
	}
	return p.MaxBytes
}

// maxDuration is maxBytes' counterpart for time.
func (p Plan) maxDuration(js *jobState) time.Duration {
	if p.filling(js) && p.MaxDuration > 0 {
		if p.Fill.MaxDuration <= 0 {
			return 0
		}
		return max(p.Fill.MaxDuration, p.MaxDuration)
	}
	return p.MaxDuration
}

// LeastRounds is the fewest rounds of workload w: the fixed Rounds, or
// MinRounds raised by MinRoundsOf.
func (p Plan) LeastRounds(w measure.Workload) int {
	if p.Rounds > 0 {
		return p.Rounds
	}
	return max(p.MinRounds, p.MinRoundsOf[w])
}

// ForProfile is the plan with what it leaves to the profile filled in: a
// MinRounds of 0 takes the profile's minimum; with profileRounds, so does
// a Rounds of 0 take the profile's fixed rounds (a `layerprobe run` of a
// fixed profile such as seed), which an agent's cycle leaves adaptive.
// Fixed rounds run every target in every round (no SideEvery).
func (p Plan) ForProfile(prof fio.Profile, profileRounds bool) Plan {
	if p.MinRounds == 0 {
		p.MinRounds = prof.MinRounds
	}
	if p.Rounds == 0 && profileRounds {
		p.Rounds = prof.DefaultRounds
	}
	if p.Rounds > 0 {
		p.SideEvery = 0
	}
	return p
}

// DefaultMaxRounds bounds an adaptive job's rounds when Plan.MaxRounds is 0.
const DefaultMaxRounds = 200

// Outcome is what Measure did.
type Outcome struct {
	Samples []measure.Sample
	// Rounds is the number of rounds run (of all jobs together); round
	// numbers first..first+Rounds-1 are used.
	Rounds int
	// LayoutBytes is what laying out the job files wrote, per target.
	LayoutBytes map[measure.Target]int64
	// BytesWritten is everything written: samples and layout.
	BytesWritten int64
	Stop         measure.StopReason
	// HalfWidth is, per workload, the widest headline half-width over the
	// non-host targets when the measurement stopped (NaN: no interval).
	HalfWidth map[measure.Workload]float64
	// Results are the overheads of Plan.Window's rounds (all of them when
	// it is 0), Plan.Prior's and this measurement's: what a run reports
	// and an agent's cycle publishes.
	Results []measure.Result
}

// Progress reports a measurement's position to a UI.
type Progress struct {
	Engine   string
	Phase    string // "layout", "measure", "cold" or "done"
	Round    int    // 1-based round of this measurement
	Target   measure.Target
	Workload measure.Workload
	// Done counts executions so far; Total is their number when it is
	// known in advance (fixed rounds), 0 otherwise.
	Done, Total int
	// BytesWritten so far and the budget (0: none).
	BytesWritten, MaxBytes int64
	// HalfWidth is the widest headline half-width so far (NaN before a
	// first interval), Precision the target (0: none).
	HalfWidth, Precision float64
	Elapsed, ETA         time.Duration
}

// jobState is one job's bookkeeping during a measurement.
type jobState struct {
	job         fio.Job
	rounds      int
	priorRounds int              // the prior window's rounds of the job (Plan.Prior)
	order       []measure.Target // the last round's order of every target, which the next one reverses
	// sideFrom and sideEvery: from its sideFrom-th round on, the job's
	// side targets run in one of every sideEvery rounds (Plan.SideEvery).
	sideFrom, sideEvery int
	side                map[measure.Target]bool // the side targets; nil: none
	lastBytes           int64                   // bytes of the job's last round, the cost estimate of the next
	lastTargets         int                     // targets of the job's last round
	layoutBytes         int64                   // bytes of the job's last layout over the targets, what a round that lays out files adds
	layoutTargets       int                     // targets of the job's last layout
	// how the profile's executions treat the job's files: fio.Steady when
	// they are laid out (a steady profile); runs counts every target's
	// executions so far, which pick its file (fio.Job.FileOf), and laid
	// the files laid out on each target.
	how       fio.Execution
	runs      map[measure.Target]int
	laid      map[measure.Target]map[int]bool
	lastTime  time.Duration
	halfWidth float64
	broken    map[measure.Target]*measure.Failure // layout failed: the target cannot run the job
	samples   []measure.Sample                    // prior and new, for the intervals
}

// Measure runs the profile's jobs on every target of the session as plan
// says, starting at round number first, and returns every sample, failed
// executions included, with their overheads (Outcome.Results) and why it
// stopped. It is the one steady measurement of an engine, which
// `layerprobe run` and an agent's cycle both make. It stops early only
// when ctx ends; failed jobs are recorded and the measurement goes on. A
// steady profile's files are laid out first and removed at the end,
// whatever happens.
func (s *Session) Measure(ctx context.Context, prof fio.Profile, plan Plan, first int, rng *rand.Rand, progress func(Progress)) Outcome {
	start := time.Now()
	out := Outcome{LayoutBytes: map[measure.Target]int64{}, HalfWidth: map[measure.Workload]float64{}}
	conf := plan.Confidence
	if conf == 0 {
		conf = measure.DefaultConfidence
	}
	maxRounds := plan.MaxRounds
	if maxRounds <= 0 {
		maxRounds = DefaultMaxRounds
	}
	if plan.Rounds > 0 {
		maxRounds = plan.Rounds
	}
	how := prof.Execution()
	side := s.sideTargets(plan)
	jobs := make([]*jobState, len(prof.Jobs))
	for i, j := range prof.Jobs {
		js := &jobState{job: j, halfWidth: math.NaN(), broken: map[measure.Target]*measure.Failure{},
			side: side, sideFrom: plan.MinRounds, sideEvery: plan.SideEvery,
			how: how, runs: map[measure.Target]int{}, laid: map[measure.Target]map[int]bool{}}
		priorRounds := map[int]bool{}
		for _, sm := range plan.Prior {
			if sm.Workload == j.Workload {
				js.samples = append(js.samples, sm)
				priorRounds[sm.Round] = true
			}
		}
		js.priorRounds = len(priorRounds)
		// Fill rounds run every target: bind and the volume need their
		// intervals too.
		js.sideFrom = max(js.sideFrom, plan.Fill.Pairs-js.priorRounds)
		js.halfWidth = widestHalfWidth(js.samples, j.Workload, conf, side)
		jobs[i] = js
	}
	done := 0
	report := func(phase string, round int, t measure.Target, w measure.Workload) {
		if progress == nil {
			return
		}
		p := Progress{Engine: s.opts.EngineName, Phase: phase, Round: round, Target: t, Workload: w, Done: done,
			BytesWritten: out.BytesWritten, MaxBytes: plan.MaxBytes, HalfWidth: widest(jobs), Precision: plan.Precision,
			Elapsed: time.Since(start)}
		if plan.Rounds > 0 {
			p.Total = plan.Rounds * len(jobs) * len(s.targets)
		}
		p.ETA = eta(jobs, plan, out.BytesWritten, p.Total, done, p.Elapsed)
		progress(p)
	}

	if prof.Steady {
		defer s.removeJobFiles(ctx)
		for _, js := range jobs {
			maps.Copy(js.broken, s.layoutJob(ctx, js, s.targets, 0, rng, report, &out))
		}
	}

	round := first
	for {
		if ctx.Err() != nil {
			out.Stop = measure.StopCanceled
			break
		}
		js, stop := s.next(jobs, plan, maxRounds, out.BytesWritten, time.Since(start), rng)
		if js == nil {
			out.Stop = stop
			break
		}
		job := js.job
		if limit := plan.maxBytes(js); limit > 0 && how == fio.Steady {
			var ok bool
			if job, ok = s.roundJob(js, limit-out.BytesWritten); !ok {
				out.Stop = measure.StopBytes
				break
			}
		}
		roundStart := time.Now()
		var roundBytes int64
		mark := len(out.Samples)
		// A job with a file per round, or files in turn, lays out the
		// files this round measures first where they are new (the first
		// round uses the files laid out above); a target whose file could
		// not be laid out fails this round, not the measurement.
		var failed map[measure.Target]*measure.Failure
		if need := js.unlaid(s.roundTargets(js)); len(need) > 0 {
			failed = s.layoutJob(ctx, js, need, round-first+1, rng, report, &out)
		}
		order := s.roundOrder(js, rng)
		for i, t := range order {
			if ctx.Err() != nil {
				break
			}
			report("measure", round-first+1, t, js.job.Workload)
			var sm measure.Sample
			if f := cmp.Or(js.broken[t], failed[t]); f != nil {
				sm = measure.Sample{Round: round, Order: i + 1, Target: t, StartedAt: time.Now().UTC(),
					JobResult: measure.JobResult{Workload: js.job.Workload, Failure: f}}
			} else {
				sm = s.runJob(ctx, s.probe, round, i+1, t, job, how, js.fileOf(t))
			}
			js.runs[t]++
			out.Samples = append(out.Samples, sm)
			js.samples = append(js.samples, sm)
			roundBytes += sm.BytesWritten
			out.BytesWritten += sm.BytesWritten
			done++
		}
		if ctx.Err() != nil {
			// A round cut short is not a round: its samples are kept
			// (they were written) but it does not count.
			out.Stop = measure.StopCanceled
			break
		}
		js.rounds++
		js.lastBytes, js.lastTargets, js.lastTime = roundBytes, len(order), time.Since(roundStart)
		js.halfWidth = widestHalfWidth(js.samples, js.job.Workload, conf, side)
		round++
		if plan.After != nil && plan.After(out.Samples[mark:]) {
			out.Stop = measure.StopDecided
			break
		}
	}
	out.Rounds = round - first
	for _, js := range jobs {
		out.HalfWidth[js.job.Workload] = js.halfWidth
	}
	out.Results = measure.SummarizeWindow(plan.Prior, out.Samples, plan.Window, conf)
	report("done", out.Rounds, "", "")
	return out
}

// next picks the job whose round comes next, or says why none does.
func (s *Session) next(jobs []*jobState, plan Plan, maxRounds int, spent int64, elapsed time.Duration, rng *rand.Rand) (*jobState, measure.StopReason) {
	fits := func(js *jobState) bool {
		limit := plan.maxBytes(js)
		return limit <= 0 || spent+s.roundCost(js) <= limit
	}
	inTime := func(js *jobState) bool {
		limit := plan.maxDuration(js)
		return limit <= 0 || elapsed+s.roundSeconds(js) <= limit
	}
	// The fewest-rounds job first, so that the jobs' rounds alternate;
	// ties in random order, so no job always runs first.
	order := shuffled(rng, jobs)
	slices.SortStableFunc(order, func(a, b *jobState) int { return a.rounds - b.rounds })

	for _, js := range order {
		if js.rounds < min(plan.LeastRounds(js.job.Workload), maxRounds) {
			if !fits(js) {
				return nil, measure.StopBytes
			}
			return js, ""
		}
	}
	if plan.Rounds == 0 && plan.Fill.Pairs > 0 {
		// Fill: the job with the fewest rounds behind its interval, as
		// long as the fill ceiling lets it (time first, as below).
		var fill *jobState
		for _, js := range order {
			if plan.filling(js) && js.rounds < maxRounds && (fill == nil || js.pairs() < fill.pairs()) {
				fill = js
			}
		}
		if fill != nil {
			switch {
			case !inTime(fill):
				return nil, measure.StopTime
			case !fits(fill):
				return nil, measure.StopBytes
			}
			return fill, ""
		}
		// Filled: the measurement ends here, so that its intervals are
		// published as soon as they exist (an agent publishes at the
		// end of a cycle); the next cycle narrows them. With a cycle cap
		// above the fill's ceiling, going on would hold the first
		// interval back by minutes.
		return nil, measure.StopRounds
	}
	if plan.Rounds > 0 || plan.Precision <= 0 {
		return nil, measure.StopRounds
	}
	// Adaptive: the job with the widest interval, so that the run's
	// widest interval, the one a reader judges it by, is as narrow as the
	// budget allows: at the end every job's interval is about as wide as
	// the others' (docs/methodology.md, "Which job gets the next round").
	// What a round costs does not enter: whichever job is widest must
	// narrow for the widest to. A job whose round does not fit goes to the
	// next widest that does. A job without an interval yet (every pair
	// failed) cannot be helped by more rounds of the same failures.
	var best *jobState
	blocked, late, capped := false, false, false
	for _, js := range order {
		hw := js.halfWidth
		if math.IsNaN(hw) || hw <= plan.Precision {
			continue
		}
		if js.rounds >= maxRounds || js.windowFull(plan.Window) {
			capped = true
			continue
		}
		// Time first: a round that would end after the time budget does
		// not run whatever bytes are left, so a run whose time is spent
		// stops on time even where a round would not fit the bytes either.
		if !inTime(js) {
			late = true
			continue
		}
		if !fits(js) {
			blocked = true
			continue
		}
		if best == nil || hw > best.halfWidth {
			best = js
		}
	}
	switch {
	case best != nil:
		return best, ""
	case blocked:
		return nil, measure.StopBytes
	case late:
		return nil, measure.StopTime
	case capped:
		return nil, measure.StopRounds
	}
	return nil, measure.StopPrecision
}

// pairs is how many rounds the job's interval rests on: the prior
// window's and this measurement's.
func (js *jobState) pairs() int { return js.priorRounds + js.rounds }

// windowFull reports whether the job's rounds fill a window of the given
// size (0: no window). A full window's interval cannot narrow: each
// further round pushes the oldest out of it, so an agent's cycle that
// went on narrowing the widest interval would write its whole byte cap,
// every cycle, on a disk too noisy for the precision within the window,
// for no narrower interval. The minimum rounds still run and keep the
// window fresh.
func (js *jobState) windowFull(window int) bool { return window > 0 && js.pairs() >= window }

// fileOf is the number of the file target t's next execution of the job
// measures (fio.Job.FileOf).
func (js *jobState) fileOf(t measure.Target) int { return js.job.FileOf(js.runs[t]) }

// unlaid are the targets, of those given, whose next execution of the job
// measures a file not laid out yet on them: every target of a round of a
// job with a file per round but the first, of one whose files rotate
// until each has its files, none for a job with one file. A target whose
// first layout failed (broken) has none to lay out: it cannot run the job.
func (js *jobState) unlaid(targets []measure.Target) []measure.Target {
	if js.how != fio.Steady {
		return nil
	}
	var out []measure.Target
	for _, t := range targets {
		if js.broken[t] == nil && !js.laid[t][js.fileOf(t)] {
			out = append(out, t)
		}
	}
	return out
}

// roundCost estimates what the job's next round writes: its last round's
// executions, or before the first one what its executions can write at
// most (fio.Job.WriteBytes) on every target; and for each target whose
// file is new (unlaid), its share of the job's last layout.
func (s *Session) roundCost(js *jobState) int64 {
	targets := s.roundTargets(js)
	n := int64(len(targets))
	var cost int64
	if js.lastBytes > 0 && js.lastTargets > 0 {
		cost = js.lastBytes * n / int64(js.lastTargets)
	} else {
		cost = js.job.WriteBytes(js.how, len(targets), 0)
	}
	if need := int64(len(js.unlaid(targets))); need > 0 && js.layoutTargets > 0 {
		cost += js.layoutBytes * need / int64(js.layoutTargets)
	}
	return cost
}

// sideTargets are the targets the plan runs in a share of the rounds only
// (Plan.SideEvery): every one but the host and the headline, the
// container. nil when every target runs every round: SideEvery of 0 or 1,
// or no container measured (then bind and volume are the headline).
func (s *Session) sideTargets(plan Plan) map[measure.Target]bool {
	if plan.SideEvery <= 1 || plan.Rounds > 0 || !slices.Contains(s.targets, measure.TargetContainer) {
		return nil
	}
	side := map[measure.Target]bool{}
	for _, t := range s.targets {
		if t != measure.TargetHost && t != measure.TargetContainer {
			side[t] = true
		}
	}
	return side
}

// roundTargets are the targets of the job's next round: every target
// while the job has fewer than sideFrom rounds and in one of every
// sideEvery rounds after that; the others leave the side targets out.
func (s *Session) roundTargets(js *jobState) []measure.Target {
	if len(js.side) == 0 || js.sideEvery <= 1 || js.rounds < js.sideFrom || (js.rounds-js.sideFrom+1)%js.sideEvery == 0 {
		return s.targets
	}
	out := make([]measure.Target, 0, len(s.targets))
	for _, t := range s.targets {
		if !js.side[t] {
			out = append(out, t)
		}
	}
	return out
}

// roundJob is the steady job as its next round runs it with left bytes of
// the budget: as it is when every target's execution at its byte cap, and
// the round's new files (unlaid), fit; otherwise with the cap of every
// execution lowered to its share of what the files leave. The round was started
// because its estimate fits, so the lowered cap is about what an execution
// of the job's last round wrote: it ends only one that would write more
// (a moment of the device fast enough to reach the cap). Every target of
// the round runs with the same cap, so the round's pairs stay alike. ok is
// false when not even fio's smallest cap (a block per clone) would fit.
func (s *Session) roundJob(js *jobState, left int64) (job fio.Job, ok bool) {
	job = js.job
	round := s.roundTargets(js)
	unlaid := len(js.unlaid(round))
	if job.WriteBytes(fio.Steady, len(round), unlaid) <= left {
		return job, true
	}
	job.IOBytes = (left - job.WriteBytes(fio.Steady, 0, unlaid)) / int64(len(round))
	// fio's cap has a floor (a block per clone) the share may be below.
	return job, job.WriteBytes(fio.Steady, len(round), unlaid) <= left
}

// roundSeconds estimates how long the job's next round takes: its last
// round's time per target, times the next round's targets (0 before a
// first round). A round after the minimum rounds leaves the side targets
// out (roundTargets) and takes about half the time of one with them.
func (s *Session) roundSeconds(js *jobState) time.Duration {
	if js.lastTargets <= 0 {
		return js.lastTime
	}
	return js.lastTime * time.Duration(len(s.roundTargets(js))) / time.Duration(js.lastTargets)
}

// shuffled is a copy of xs in a random order drawn from rng.
func shuffled[T any](rng *rand.Rand, xs []T) []T {
	out := slices.Clone(xs)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// roundOrder is the order of the job's next round: a fresh random order
// of every target, or the reverse of the job's previous one every second
// round; then without the targets the round leaves out (roundTargets), so
// that the ones it runs keep their order's reversal.
func (s *Session) roundOrder(js *jobState, rng *rand.Rand) []measure.Target {
	var order []measure.Target
	if js.rounds%2 == 1 && len(js.order) == len(s.targets) {
		order = slices.Clone(js.order)
		slices.Reverse(order)
	} else {
		order = shuffled(rng, s.targets)
	}
	js.order = order
	runs := s.roundTargets(js)
	if len(runs) == len(order) {
		return slices.Clone(order)
	}
	return slices.DeleteFunc(slices.Clone(order), func(t measure.Target) bool { return !slices.Contains(runs, t) })
}

// widestHalfWidth is the widest headline half-width over the non-host
// targets of w but the side ones: +Inf while a target has too few pairs
// for an interval of the asked confidence (fewer than 6 for 95%: what
// there is covers less), NaN when a target has successful rounds but no
// pair at all.
func widestHalfWidth(samples []measure.Sample, w measure.Workload, confidence float64, side map[measure.Target]bool) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	widest := math.NaN()
	for _, r := range measure.Summarize(samples, confidence) {
		if r.Target == measure.TargetHost || r.Workload != w || side[r.Target] {
			continue
		}
		o, ok := r.Overhead[measure.HeadlineMetric(w)]
		if !ok {
			continue
		}
		hw := o.HalfWidth()
		if o.N > 0 && o.Coverage < confidence {
			hw = math.Inf(1)
		}
		if math.IsNaN(hw) {
			if r.RoundsOK > 0 {
				return math.NaN()
			}
			continue // the target never ran: it cannot hold the others back
		}
		if math.IsNaN(widest) || hw > widest {
			widest = hw
		}
	}
	return widest
}

// widest is the widest half-width over the jobs (NaN if none has one).
func widest(jobs []*jobState) float64 {
	w := math.NaN()
	for _, js := range jobs {
		if !math.IsNaN(js.halfWidth) && (math.IsNaN(w) || js.halfWidth > w) {
			w = js.halfWidth
		}
	}
	return w
}

// eta estimates the time left: from the executions left when the rounds
// are fixed; otherwise the sooner of the budget running out and every job
// reaching the precision at the rate its interval narrows (as 1/√rounds).
func eta(jobs []*jobState, plan Plan, spent int64, total, done int, elapsed time.Duration) time.Duration {
	if done == 0 {
		return 0
	}
	if total > 0 {
		return time.Duration(float64(elapsed) / float64(done) * float64(total-done))
	}
	// The budgets of the rounds to come: a filling job's are the fill's
	// (Plan.Fill).
	maxBytes, maxDuration := plan.MaxBytes, plan.MaxDuration
	for _, js := range jobs {
		if plan.filling(js) {
			maxBytes, maxDuration = plan.maxBytes(js), plan.maxDuration(js)
		}
	}
	est := time.Duration(math.MaxInt64)
	if maxDuration > 0 {
		est = max(maxDuration-elapsed, 0)
	}
	if maxBytes > 0 && spent > 0 {
		est = min(est, time.Duration(float64(elapsed)/float64(spent)*float64(max(maxBytes-spent, 0))))
	}
	var byPrecision time.Duration
	for _, js := range jobs {
		rounds := float64(js.rounds)
		least := plan.LeastRounds(js.job.Workload)
		if js.rounds < least {
			byPrecision += time.Duration(least-js.rounds) * js.lastTime
			rounds = float64(least)
		}
		if plan.filling(js) {
			more := plan.Fill.Pairs - js.pairs() - max(least-js.rounds, 0)
			byPrecision += time.Duration(max(more, 0)) * js.lastTime
			rounds = float64(max(int(rounds), plan.Fill.Pairs-js.priorRounds))
		}
		if math.IsInf(js.halfWidth, 1) {
			byPrecision += js.lastTime // no interval yet: at least another round
			continue
		}
		if plan.Precision > 0 && !math.IsNaN(js.halfWidth) && js.halfWidth > plan.Precision {
			more := rounds*math.Pow(js.halfWidth/plan.Precision, 2) - rounds
			byPrecision += time.Duration(more * float64(js.lastTime))
		}
	}
	return min(est, byPrecision)
}

// layoutJob lays out, on every target given that can run the job, the
// file its next execution measures (jobState.fileOf; round is for the
// progress report), counts what that wrote and returns the targets whose
// layout failed. The targets lay out in a
// random order: where a file lands can depend on what was laid out just
// before it, and a fixed order would turn that into a bias of the later
// targets. On btrfs, ten default runs alternating host-first and
// host-last layout moved bind's and the volume's mean fsync latency
// against host by 2.0 and 2.8 points (each about twice its standard
// error); random, it is noise that a file per round puts into the
// interval, as fsync's four files in turn put most of it, and that runs
// and agent cycles average out.
func (s *Session) layoutJob(ctx context.Context, js *jobState, targets []measure.Target, round int, rng *rand.Rand, report func(string, int, measure.Target, measure.Workload), out *Outcome) map[measure.Target]*measure.Failure {
	failed := map[measure.Target]*measure.Failure{}
	js.layoutBytes, js.layoutTargets = 0, len(targets)
	order := shuffled(rng, targets)
	for _, t := range order {
		if ctx.Err() != nil {
			break
		}
		if js.broken[t] != nil {
			continue
		}
		report("layout", round, t, js.job.Workload)
		file := js.fileOf(t)
		n, f := s.layout(ctx, t, js.job, file)
		js.layoutBytes += n
		out.LayoutBytes[t] += n
		out.BytesWritten += n
		if f != nil {
			failed[t] = f
			s.logger.Warn("layout of a job file failed: the target misses the rounds that need it",
				"target", t, "job", js.job.Workload, "file", fio.RoundFileName(js.job.Workload, file), "reason", f.Reason, "err", f.Message)
			continue
		}
		if js.laid[t] == nil {
			js.laid[t] = map[int]bool{}
		}
		js.laid[t][file] = true
	}
	return failed
}

// layout writes the job's file number file on target t: file 0 once per
// measurement, the others before the executions that first use them
// (fio.Job.FilePerRound, fio.Job.RotateFiles).
// Every target lays out files of its own, bind too: one file measured by
// two targets would be measured twice in a round, and a file's second
// execution in a round need not read like its first (on btrfs, a fresh
// file's second random-write execution read 13% slower).
func (s *Session) layout(ctx context.Context, t measure.Target, job fio.Job, file int) (int64, *measure.Failure) {
	res := s.execute(ctx, s.probe, t, job, fio.Layout, file)
	return res.BytesWritten, res.Failure
}

// removeJobFiles removes the job files from every target. It
// runs with its own timeout so that it also works after cancellation.
func (s *Session) removeJobFiles(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, t := range s.targets {
		if t == measure.TargetHost {
			// The directory is this process's alone: empty it whole, so
			// that what a crashed or killed fio left goes too.
			if err := hostfs.ClearDir(s.hostDir); err != nil {
				s.logger.Error("remove job files", "target", t, "err", err)
			}
			continue
		}
		dir := s.containerDir(t)
		if r, err := s.eng.Exec(ctx, s.probe, []string{engine.ContainerHelper, "probe-helper", "clean", dir}); err != nil || r.ExitCode != 0 {
			s.logger.Error("remove job files", "target", t, "err", err, "stderr", trim(r.Stderr))
		}
	}
}
