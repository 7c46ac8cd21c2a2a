package probe

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// overlay2Round is a headline round (host and container) of each job of
// the default profile in the 20 default runs on overlay2 of 1 Dec: its
// bytes (executions and the round's new files), its seconds, and σ, the
// container's half-width times √rounds (the median over the runs).
var overlay2Round = map[measure.Workload]struct {
	sigma float64
	bytes int64
	secs  float64
}{
	measure.SeqWrite:   {0.362, 32 << 20, 0.7},
	measure.RandWrite:  {0.244, 40 << 20, 0.9},
	measure.Fsync:      {0.279, 18 << 20, 1.65},
	measure.SmallFiles: {0.184, 6.5 * (1 << 20), 2.3},
}

// overlay2Start is what the minimum rounds (every target: twice a
// headline round) and the first layout spent.
func overlay2Start() (int64, time.Duration) {
	spent, elapsed := int64(100<<20), 5*time.Second
	for _, j := range overlay2Round {
		spent += 12 * j.bytes
		elapsed += time.Duration(12 * j.secs * float64(time.Second))
	}
	return spent, elapsed
}

// replayOverlay2 replays the planner's adaptive rounds over the default
// profile's jobs with overlay2's costs and noise (overlay2Round) on the
// headline pair, from the minimum 6 rounds of each, under the plan's
// budgets: each job's rounds and half-width, what was spent and why it
// stopped.
func replayOverlay2(t *testing.T, plan Plan) (rounds map[measure.Workload]int, hw map[measure.Workload]float64, spent int64, elapsed time.Duration, stop measure.StopReason) {
	t.Helper()
	s := &Session{targets: []measure.Target{measure.TargetHost, measure.TargetContainer}}
	var jobs []*jobState
	for _, w := range []measure.Workload{measure.SeqWrite, measure.RandWrite, measure.Fsync, measure.SmallFiles} {
		j := overlay2Round[w]
		jobs = append(jobs, &jobState{job: fio.Job{Workload: w}, rounds: 6, lastBytes: j.bytes, lastTargets: 2,
			lastTime: time.Duration(j.secs * float64(time.Second)), halfWidth: j.sigma / math.Sqrt(6)})
	}
	spent, elapsed = overlay2Start()
	rng := rand.New(rand.NewPCG(3, 4))
	for {
		js, why := s.next(jobs, plan, 200, spent, elapsed, rng)
		if js == nil {
			stop = why
			break
		}
		js.rounds++
		js.halfWidth = overlay2Round[js.job.Workload].sigma / math.Sqrt(float64(js.rounds))
		spent += js.lastBytes
		elapsed += js.lastTime
	}
	rounds, hw = map[measure.Workload]int{}, map[measure.Workload]float64{}
	for _, js := range jobs {
		rounds[js.job.Workload], hw[js.job.Workload] = js.rounds, js.halfWidth
		t.Logf("%s: %d rounds, ±%.1f points", js.job.Workload, js.rounds, 100*js.halfWidth)
	}
	t.Logf("stopped on %s after %d MiB and %v", stop, spent>>20, elapsed.Round(time.Second))
	return rounds, hw, spent, elapsed, stop
}

// equalWidth is the least widest interval a budget of rounds allows
// after the minimum 6 of each job: job j needs max(6, σ_j²/h²) rounds for
// a half-width h, and h is the least for which those beyond the minimum
// cost at most budget, in bytes or seconds (the budget that binds).
func equalWidth(budget float64, cost func(bytes int64, secs float64) float64) float64 {
	spend := func(h float64) float64 {
		var sum float64
		for _, j := range overlay2Round {
			sum += max(0, j.sigma*j.sigma/(h*h)-6) * cost(j.bytes, j.secs)
		}
		return sum
	}
	lo, hi := 1e-4, 1.0
	for range 60 {
		if mid := (lo + hi) / 2; spend(mid) > budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestNextNarrowsTheWidest replays a default run on overlay2 (the default
// caps; 1 Dec's per-round costs and noise). The planner that scored a job
// by the narrowing of its squared half-width per byte left the costliest
// jobs widest and the cheap ones far narrower: in 14 default runs of 5 Dec
// small files read a median ±2.9 points and random writes ±5.7. Given to
// the widest interval, the rounds leave every job about as wide as the
// others, at the least widest interval the budget allows, whichever
// budget binds.
func TestNextNarrowsTheWidest(t *testing.T) {
	const mib = 1 << 20
	def := Plan{MinRounds: 6, Precision: 0.03, MaxBytes: 3072 * mib, MaxDuration: 5 * time.Minute}
	check := func(t *testing.T, hw map[measure.Workload]float64, bound float64) {
		t.Helper()
		hi := 0.0
		for _, h := range hw {
			hi = max(hi, h)
		}
		t.Logf("widest ±%.2f, equal split ±%.2f points", 100*hi, 100*bound)
		if hi > 1.03*bound {
			t.Errorf("widest interval ±%.2f points; want at most 3%% above the ±%.2f of the equal split", 100*hi, 100*bound)
		}
	}
	t.Run("bytes bind", func(t *testing.T) {
		_, hw, spent, elapsed, stop := replayOverlay2(t, def)
		if stop != measure.StopBytes || spent > def.MaxBytes || elapsed > def.MaxDuration {
			t.Errorf("stopped on %q after %d MiB, %v; want bytes within the budgets", stop, spent/mib, elapsed)
		}
		start, _ := overlay2Start()
		check(t, hw, equalWidth(float64(def.MaxBytes-start), func(b int64, _ float64) float64 { return float64(b) }))
	})
	t.Run("time binds", func(t *testing.T) {
		plan := def
		plan.MaxDuration = 100 * time.Second
		_, hw, spent, elapsed, stop := replayOverlay2(t, plan)
		if stop != measure.StopTime || spent > plan.MaxBytes*9/10 || elapsed > plan.MaxDuration {
			t.Errorf("stopped on %q after %d MiB, %v; want time, with bytes left", stop, spent/mib, elapsed)
		}
		_, start := overlay2Start()
		check(t, hw, equalWidth((plan.MaxDuration-start).Seconds(), func(_ int64, s float64) float64 { return s }))
	})
	t.Run("precision reached", func(t *testing.T) {
		plan := def
		plan.Precision = 0.08
		rounds, hw, spent, _, stop := replayOverlay2(t, plan)
		if stop != measure.StopPrecision || spent >= plan.MaxBytes {
			t.Errorf("stopped on %q after %d MiB; want precision, with bytes left", stop, spent/mib)
		}
		for w, h := range hw {
			// The round before the last left the job wider than the precision.
			if before := overlay2Round[w].sigma / math.Sqrt(float64(rounds[w]-1)); h > plan.Precision || (rounds[w] > 6 && before <= plan.Precision) {
				t.Errorf("%s: %d rounds, ±%.2f points; want the fewest rounds within ±%.0f", w, rounds[w], 100*h, 100*plan.Precision)
			}
		}
	})
}

// TestRoundSecondsScalesToTheRoundsTargets: a round after the minimum
// leaves the side targets out and is priced at the time per target of
// the last round, which ran every target.
func TestRoundSecondsScalesToTheRoundsTargets(t *testing.T) {
	s := &Session{targets: []measure.Target{measure.TargetHost, measure.TargetContainer, measure.TargetBind, measure.TargetVolume}}
	js := &jobState{rounds: 6, sideFrom: 6, sideEvery: 3, side: map[measure.Target]bool{measure.TargetBind: true, measure.TargetVolume: true},
		lastTime: 4 * time.Second, lastTargets: 4}
	if got := s.roundSeconds(js); got != 2*time.Second {
		t.Errorf("a headline round after a round of 4 targets in 4 s: %v, want 2s", got)
	}
	js.rounds = 8 // the third adaptive round runs every target
	if got := s.roundSeconds(js); got != 4*time.Second {
		t.Errorf("a round of every target: %v, want 4s", got)
	}
	if got := s.roundSeconds(&jobState{}); got != 0 {
		t.Errorf("no round yet: %v, want 0", got)
	}
}

// TestNextLeavesAFullWindow: an agent's cycle (Plan.Window) gives a job
// whose rounds fill the window no adaptive round, since another round
// pushes its oldest out and cannot narrow the window's interval; the
// cycle stops on rounds, with bytes left, once every job still wider
// than the precision is full. Without the rule, the same cycle writes its
// whole cap on those jobs.
func TestNextLeavesAFullWindow(t *testing.T) {
	const mib = 1 << 20
	const window = 48
	plan := Plan{MinRounds: 2, Precision: 0.03, MaxBytes: 4096 * mib, Window: window}
	s := &Session{targets: []measure.Target{measure.TargetHost, measure.TargetContainer}}
	cycle := func(plan Plan, prior map[measure.Workload]int) (map[measure.Workload]int, int64, measure.StopReason) {
		var jobs []*jobState
		for _, w := range []measure.Workload{measure.SeqWrite, measure.RandWrite, measure.Fsync, measure.SmallFiles} {
			j := overlay2Round[w]
			// Noise four times overlay2's: no window of 48 reaches ±3.
			n := prior[w] + 2
			jobs = append(jobs, &jobState{job: fio.Job{Workload: w}, rounds: 2, priorRounds: prior[w], lastBytes: j.bytes, lastTargets: 2,
				lastTime: time.Duration(j.secs * float64(time.Second)), halfWidth: 4 * j.sigma / math.Sqrt(float64(min(n, window)))})
		}
		spent := int64(0)
		rng := rand.New(rand.NewPCG(5, 6))
		for {
			js, why := s.next(jobs, plan, 200, spent, 0, rng)
			if js == nil {
				rounds := map[measure.Workload]int{}
				for _, js := range jobs {
					rounds[js.job.Workload] = js.rounds
				}
				return rounds, spent, why
			}
			js.rounds++
			js.halfWidth = 4 * overlay2Round[js.job.Workload].sigma / math.Sqrt(float64(min(js.pairs(), window)))
			spent += js.lastBytes
		}
	}

	// A window that lacks rounds: they go where the window is widest,
	// up to the window, then the cycle stops on rounds.
	rounds, spent, stop := cycle(plan, map[measure.Workload]int{measure.SeqWrite: 10, measure.RandWrite: 10, measure.Fsync: 46, measure.SmallFiles: 46})
	if stop != measure.StopRounds || spent >= plan.MaxBytes {
		t.Errorf("filling: stopped on %q after %d MiB; want rounds, with bytes left", stop, spent/mib)
	}
	if rounds[measure.SeqWrite] != window-10 || rounds[measure.RandWrite] != window-10 {
		t.Errorf("filling: seqwrite %d, randwrite %d rounds; want %d each, what fills the window", rounds[measure.SeqWrite], rounds[measure.RandWrite], window-10)
	}
	if rounds[measure.Fsync] != 2 || rounds[measure.SmallFiles] != 2 {
		t.Errorf("filling: fsync %d, smallfiles %d rounds; want the minimum 2 (their windows were full after it)", rounds[measure.Fsync], rounds[measure.SmallFiles])
	}

	// Every window full: the minimum rounds and nothing more.
	full := map[measure.Workload]int{measure.SeqWrite: window, measure.RandWrite: window, measure.Fsync: window, measure.SmallFiles: window}
	rounds, spent, stop = cycle(plan, full)
	for w, n := range rounds {
		if n != 2 {
			t.Errorf("full: %s ran %d rounds; want the minimum 2", w, n)
		}
	}
	if stop != measure.StopRounds {
		t.Errorf("full: stopped on %q; want rounds", stop)
	}
	t.Logf("full windows: %d MiB", spent/mib)

	// The detector's rounds (Plan.MinRoundsOf): fsync makes 3 however
	// full its window is, the others the minimum 2.
	withFsync := plan
	withFsync.MinRoundsOf = map[measure.Workload]int{measure.Fsync: 3}
	rounds, _, stop = cycle(withFsync, full)
	for w, n := range rounds {
		if want := map[bool]int{true: 3, false: 2}[w == measure.Fsync]; n != want {
			t.Errorf("full, fsync at least 3: %s ran %d rounds; want %d", w, n, want)
		}
	}
	if stop != measure.StopRounds {
		t.Errorf("full, fsync at least 3: stopped on %q; want rounds", stop)
	}

	// The same cycle with no window (a run): the bytes are spent.
	plan.Window = 0
	if _, spent, stop = cycle(plan, full); stop != measure.StopBytes {
		t.Errorf("no window: stopped on %q after %d MiB; want bytes", stop, spent/mib)
	}
}
