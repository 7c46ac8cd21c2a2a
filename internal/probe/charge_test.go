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

// overlay2Spends are those rounds after the minimum 6 of each job.
func overlay2Spends() []roundSpend {
	var out []roundSpend
	for _, j := range overlay2Round {
		out = append(out, roundSpend{bytes: float64(j.bytes), seconds: j.secs, noise: j.sigma * j.sigma})
	}
	return out
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

// TestBindingChargesTheBudgetThatRunsOut: binding charges bytes when the
// byte-optimal mix of the rounds to come spends the bytes left before the
// time left, time otherwise.
func TestBindingChargesTheBudgetThatRunsOut(t *testing.T) {
	const mib = 1 << 20
	spent, elapsed := overlay2Start()
	jobs := overlay2Spends()
	// The time the bytes left take in the byte-optimal mix: about 88 s.
	var wb, ws float64
	for _, j := range jobs {
		w := math.Sqrt(j.noise / j.bytes)
		wb += w * j.bytes
		ws += w * j.seconds
	}
	need := time.Duration(float64(2560*mib-spent) * ws / wb * float64(time.Second))
	if need < 80*time.Second || need > 95*time.Second {
		t.Fatalf("the bytes left take %v in the byte-optimal mix; the cases below expect about 88 s", need)
	}
	only := func(w measure.Workload) []roundSpend {
		j := overlay2Round[w]
		return []roundSpend{{bytes: float64(j.bytes), seconds: j.secs, noise: j.sigma * j.sigma}}
	}
	withZero := append(overlay2Spends(), roundSpend{bytes: 0, seconds: 2, noise: 0.03})
	unmeasured := overlay2Spends()
	for i := range unmeasured {
		unmeasured[i].seconds = 0
	}
	for _, c := range []struct {
		name        string
		jobs        []roundSpend
		maxBytes    int64
		spent       int64
		maxDuration time.Duration
		elapsed     time.Duration
		want        budget
	}{
		// 1.27 GiB left take about 88 s; 3 min 48 s are left.
		{"default run: stops on bytes", jobs, 2560 * mib, spent, 5 * time.Minute, elapsed, chargeBytes},
		// 48 s left: the time runs out first.
		{"2 min cap: stops on time", jobs, 2560 * mib, spent, 2 * time.Minute, elapsed, chargeTime},
		// Either side of the point where both run out together.
		{"borderline, a little more time than the bytes take", jobs, 2560 * mib, spent, elapsed + need + time.Second, elapsed, chargeBytes},
		{"borderline, a little less", jobs, 2560 * mib, spent, elapsed + need - time.Second, elapsed, chargeTime},
		{"no caps", jobs, 0, spent, 0, elapsed, chargeBytes},
		{"bytes capped only", jobs, 2560 * mib, spent, 0, elapsed, chargeBytes},
		{"time capped only", jobs, 0, spent, 5 * time.Minute, elapsed, chargeTime},
		// Smallfiles alone writes 6.5 MiB in 2.3 s: the bytes left
		// would take it 7 min 40 s.
		{"smallfiles alone wants rounds", only(measure.SmallFiles), 2560 * mib, spent, 5 * time.Minute, elapsed, chargeTime},
		{"seqwrite alone wants rounds", only(measure.SeqWrite), 2560 * mib, spent, 5 * time.Minute, elapsed, chargeBytes},
		// Charged bytes, a job that writes nothing would take every round.
		{"a job that writes nothing", withZero, 2560 * mib, spent, 5 * time.Minute, elapsed, chargeTime},
		{"a job that writes nothing, no time cap", withZero, 2560 * mib, spent, 0, elapsed, chargeBytes},
		{"no round timed yet", unmeasured, 2560 * mib, spent, 5 * time.Minute, elapsed, chargeBytes},
		{"no job wants rounds", nil, 2560 * mib, spent, 5 * time.Minute, elapsed, chargeBytes},
		{"bytes spent", jobs, 2560 * mib, 2560 * mib, 5 * time.Minute, elapsed, chargeBytes},
		{"time spent", jobs, 2560 * mib, spent, 5 * time.Minute, 5 * time.Minute, chargeTime},
	} {
		if got := binding(c.jobs, c.maxBytes, c.spent, c.maxDuration, c.elapsed); got != c.want {
			t.Errorf("%s: charged %s, want %s", c.name, got, c.want)
		}
	}
}

// replayOverlay2 replays the planner's adaptive rounds over the default
// profile's jobs with overlay2's costs and noise (overlay2Round) on the
// headline pair, from the minimum 6 rounds of each, under the plan's
// budgets: the rounds of each job, what was spent, why it stopped and
// the budgets the rounds were charged to.
func replayOverlay2(t *testing.T, plan Plan) (rounds map[measure.Workload]int, spent int64, elapsed time.Duration, stop measure.StopReason, charged map[budget]int) {
	t.Helper()
	s := &Session{targets: []measure.Target{measure.TargetHost, measure.TargetContainer}}
	var jobs []*jobState
	for _, w := range []measure.Workload{measure.SeqWrite, measure.RandWrite, measure.Fsync, measure.SmallFiles} {
		j := overlay2Round[w]
		jobs = append(jobs, &jobState{job: fio.Job{Workload: w}, rounds: 6, lastBytes: j.bytes, lastTargets: 2,
			lastTime: time.Duration(j.secs * float64(time.Second)), halfWidth: j.sigma / math.Sqrt(6)})
	}
	spent, elapsed = overlay2Start()
	charged = map[budget]int{}
	rng := rand.New(rand.NewPCG(3, 4))
	for {
		c := s.charge(jobs, plan, 200, spent, elapsed)
		js, why := s.next(jobs, plan, 200, spent, elapsed, rng)
		if js == nil {
			stop = why
			break
		}
		charged[c]++
		js.rounds++
		js.halfWidth = overlay2Round[js.job.Workload].sigma / math.Sqrt(float64(js.rounds))
		spent += js.lastBytes
		elapsed += js.lastTime
	}
	rounds = map[measure.Workload]int{}
	for _, js := range jobs {
		rounds[js.job.Workload] = js.rounds
		t.Logf("%s: %d rounds, ±%.1f points", js.job.Workload, js.rounds, 100*js.halfWidth)
	}
	t.Logf("stopped on %s after %d MiB and %v; rounds charged %v", stop, spent>>20, elapsed.Round(time.Second), charged)
	return rounds, spent, elapsed, stop, charged
}

// TestNextChargesWhatBinds replays a default run on overlay2 (2.5 GiB,
// 5 min; the 20 runs of 1 Dec stopped on bytes in 2.5-3.4 min). Charged
// the larger of its shares, smallfiles' time share (three times its byte
// share), it got 15 rounds here (a median 17 in those runs) while the run
// stopped on bytes with time left. Charged bytes, what binds, it gets
// about √3 times as many: the planner's rounds of a job grow as
// 1/√cost. Under a time cap that binds, the same jobs are charged time
// and the run stops on time; at the border both budgets end spent.
func TestNextChargesWhatBinds(t *testing.T) {
	const mib = 1 << 20
	def := Plan{MinRounds: 6, Precision: 0.03, MaxBytes: 2560 * mib, MaxDuration: 5 * time.Minute}
	t.Run("bytes bind", func(t *testing.T) {
		rounds, spent, elapsed, stop, charged := replayOverlay2(t, def)
		if stop != measure.StopBytes || spent > def.MaxBytes || elapsed > def.MaxDuration {
			t.Errorf("stopped on %q after %d MiB, %v; want bytes within the budgets", stop, spent/mib, elapsed)
		}
		if charged[chargeTime] > 0 {
			t.Errorf("%d rounds charged time in a run that stops on bytes", charged[chargeTime])
		}
		// The larger share gave it 15 here.
		if got := rounds[measure.SmallFiles]; got < 23 {
			t.Errorf("smallfiles got %d rounds; want at least 23, 1.5 times the 15 its time share left it", got)
		}
	})
	t.Run("time binds", func(t *testing.T) {
		plan := def
		plan.MaxDuration = 100 * time.Second
		rounds, spent, _, stop, charged := replayOverlay2(t, plan)
		if stop != measure.StopTime || spent > plan.MaxBytes*9/10 {
			t.Errorf("stopped on %q after %d MiB; want time, with bytes left", stop, spent/mib)
		}
		if charged[chargeBytes] > 0 {
			t.Errorf("%d rounds charged bytes in a run that stops on time", charged[chargeBytes])
		}
		// Charged its byte share, the larger, seqwrite got 19 rounds
		// here: its 0.7 s rounds are the cheapest in time.
		if got := rounds[measure.SeqWrite]; got < 22 {
			t.Errorf("seqwrite got %d rounds; want at least 22, charged the time it takes", got)
		}
		// Charged time, smallfiles' 2.3 s rounds are the dearest.
		if got := rounds[measure.SmallFiles]; got >= rounds[measure.SeqWrite] {
			t.Errorf("smallfiles got %d rounds, seqwrite %d; want fewer for the slower round", got, rounds[measure.SeqWrite])
		}
	})
	t.Run("both bind", func(t *testing.T) {
		// Charged bytes throughout, the rounds would take 165 s;
		// charged time, 115 s. At 140 s neither alone fits.
		plan := def
		plan.MaxDuration = 140 * time.Second
		_, spent, elapsed, _, charged := replayOverlay2(t, plan)
		if charged[chargeBytes] == 0 || charged[chargeTime] == 0 {
			t.Errorf("rounds charged %v; want both budgets charged in turn", charged)
		}
		if spent < plan.MaxBytes*95/100 || elapsed < plan.MaxDuration*95/100 {
			t.Errorf("spent %d MiB of %d and %v of %v; want both within 5%% of their cap", spent/mib, plan.MaxBytes/mib, elapsed, plan.MaxDuration)
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

	// The same cycle with no window (a run): the bytes are spent.
	plan.Window = 0
	if _, spent, stop = cycle(plan, full); stop != measure.StopBytes {
		t.Errorf("no window: stopped on %q after %d MiB; want bytes", stop, spent/mib)
	}
}
