package detector

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/stats"
)

func defaults() Params { return ParamsFrom(config.Default().Detector) }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// at is the time of round r at the default cadence of 20 minutes.
func at(r int) time.Time { return t0.Add(time.Duration(r) * 20 * time.Minute) }

// series drives one detector state through rounds, remembering events.
type series struct {
	t  *testing.T
	p  Params
	st State
}

// next feeds x as the next round and returns the event.
func (s *series) next(x float64) Event {
	s.t.Helper()
	r := s.st.LastRound + 1
	var ev Event
	s.st, ev = s.p.Observe(s.st, Observation{Round: r, At: at(r), X: x})
	return ev
}

// warmUp feeds n rounds of N(0, sigma²) noise through Observe and fails the
// test unless the series ends up watching: the scenarios below start from a
// settled baseline, and a seed that opened a suspicion here would make them
// test something else.
func (s *series) warmUp(rng *rand.Rand, n int, sigma float64) {
	s.t.Helper()
	for range n {
		s.next(sigma * rng.NormFloat64())
	}
	if s.st.Phase != PhaseWatching {
		s.t.Fatalf("after %d warm-up rounds the phase is %q, want watching; pick another seed", n, s.st.Phase)
	}
}

// clone deep-copies a state, so later comparisons catch writes through
// shared slices.
func clone(st State) State {
	st.Window = slices.Clone(st.Window)
	st.Confirm = slices.Clone(st.Confirm)
	st.Recent = slices.Clone(st.Recent)
	return st
}

func TestParamsFrom(t *testing.T) {
	c := config.Detector{Metric: "fsync_p99", BaselineRounds: 300, MinBaselineRound: 20, K: 0.4, H: 7,
		Clip: 2.5, MinEffect: 0.15, ConfirmRounds: 12, ConfirmMin: 11}
	want := Params{BaselineRounds: 300, MinBaselineRounds: 20, K: 0.4, H: 7, Clip: 2.5, MinEffect: 0.15,
		ConfirmRounds: 12, ConfirmMin: 11, SigmaFloor: DefaultSigmaFloor}
	if got := ParamsFrom(c); got != want {
		t.Errorf("ParamsFrom(%+v) = %+v, want %+v", c, got, want)
	}
	if err := defaults().Validate(); err != nil {
		t.Errorf("default params: %v", err)
	}
}

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Params)
		want   string // substring of the error; "" for valid
	}{
		{"defaults", func(*Params) {}, ""},
		{"min baseline 1", func(p *Params) { p.MinBaselineRounds = 1 }, "min baseline rounds 1"},
		{"window below min", func(p *Params) { p.BaselineRounds = 11 }, "baseline rounds 11"},
		{"k negative", func(p *Params) { p.K = -0.1 }, "k -0.1"},
		{"h zero", func(p *Params) { p.H = 0 }, "h 0"},
		{"clip NaN", func(p *Params) { p.Clip = math.NaN() }, "clip NaN"},
		{"min effect inf", func(p *Params) { p.MinEffect = math.Inf(1) }, "min effect +Inf"},
		{"sigma floor zero", func(p *Params) { p.SigmaFloor = 0 }, "sigma floor 0"},
		{"confirm rounds zero", func(p *Params) { p.ConfirmRounds = 0; p.ConfirmMin = 0 }, "confirm rounds 0"},
		{"confirm min above rounds", func(p *Params) { p.ConfirmMin = p.ConfirmRounds + 1 }, fmt.Sprintf("confirm min %d", defaults().ConfirmRounds+1)},
		{"k zero is fine", func(p *Params) { p.K = 0; p.MinEffect = 0 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaults()
			tt.change(&p)
			err := p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestMedianMADMatchesStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 80; n++ {
		for range 20 {
			xs := make([]float64, n)
			for i := range xs {
				// Coarse values, so ties (and MAD = 0) occur often.
				xs[i] = math.Round(rng.NormFloat64()*4) / 8
			}
			m, mad := medianMAD(xs)
			if wm, wmad := stats.Median(xs), stats.MAD(xs); m != wm || mad != wmad {
				t.Fatalf("medianMAD(%v) = %v, %v; stats says %v, %v", xs, m, mad, wm, wmad)
			}
		}
	}
}

func TestAppendCapped(t *testing.T) {
	tests := []struct {
		old  []float64
		capN int
		xs   []float64
		want []float64
	}{
		{nil, 3, []float64{1}, []float64{1}},
		{[]float64{1, 2}, 3, []float64{3}, []float64{1, 2, 3}},
		{[]float64{1, 2, 3}, 3, []float64{4}, []float64{2, 3, 4}},
		{[]float64{1, 2, 3}, 3, []float64{4, 5}, []float64{3, 4, 5}},
		{[]float64{1, 2}, 3, []float64{4, 5, 6, 7}, []float64{5, 6, 7}},
		{[]float64{1, 2, 3, 4, 5}, 2, []float64{6}, []float64{5, 6}}, // cap lowered since
		{[]float64{1}, 0, []float64{2}, []float64{}},
	}
	for _, tt := range tests {
		old := make([]float64, len(tt.old), len(tt.old)+8) // spare capacity an append would reuse
		copy(old, tt.old)
		got := appendCapped(old, tt.capN, tt.xs...)
		if !slices.Equal(got, tt.want) {
			t.Errorf("appendCapped(%v, %d, %v) = %v, want %v", tt.old, tt.capN, tt.xs, got, tt.want)
		}
		spare := old[len(old):cap(old)]
		if !slices.Equal(old, tt.old) || slices.ContainsFunc(spare, func(v float64) bool { return v != 0 }) {
			t.Errorf("appendCapped(%v, ...) wrote to the old slice's array", tt.old)
		}
	}
}

func TestFloor(t *testing.T) {
	p := defaults()
	tests := []struct {
		b    Baseline
		want float64
	}{
		{Baseline{Median: 0.1, Sigma: 0.05}, 0.1 + math.Log(1.05)},
		{Baseline{Median: 0.1, Sigma: 0.2}, 0.1 + math.Log(1.05)}, // σ₀ plays no part: the count of rounds does
		{Baseline{Median: 0, Sigma: 0}, math.Log(1.05)},
	}
	for _, tt := range tests {
		if got := p.Floor(tt.b); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Floor(%+v) = %v, want %v", tt.b, got, tt.want)
		}
	}
}

// TestByHand follows a tiny configuration round by round with numbers
// worked out by hand: 3-round window, σ₀ floor 0.125, confirmation 3 of 4.
func TestByHand(t *testing.T) {
	p := Params{BaselineRounds: 3, MinBaselineRounds: 3, K: 0.5, H: 6, Clip: 3, MinEffect: 0.25,
		ConfirmRounds: 4, ConfirmMin: 3, SigmaFloor: 0.125}
	sig := stats.MADScale * 0.25   // σ₀ of windows like {0, 0.25, 1}: MAD 0.25
	floor := 0.75 + math.Log(1.25) // of the frozen window {0.5, 1, 0.75}
	type step struct {
		x     float64
		s     float64 // S after the round
		ev    Event
		phase Phase
	}
	start := []step{
		{0, 0, "", PhaseLearning},
		{0, 0, "", PhaseLearning},
		{0, 0, "", PhaseWatching},                                        // window full; this round is not scored
		{0.25, 1.5, "", PhaseWatching},                                   // z = 0.25/0.125 = 2
		{1, 4, "", PhaseWatching},                                        // z = 8, clipped to 3; window {0, .25, 1}
		{0.25, 3.5, "", PhaseWatching},                                   // z = 0 against median .25; window {.25, 1, .25}: MAD 0
		{0.5, 5, "", PhaseWatching},                                      // z = .25/.125 = 2; window {1, .25, .5}
		{1, 5 + 0.5/sig - 0.5, "", PhaseWatching},                        // median .5, σ₀ = sig
		{0.75, 5 + 0.75/sig - 1, EventSuspect, PhaseConfirming},          // S > 6; window frozen at {.5, 1, .75}
		{2, 5 + 0.75/sig - 1, "", PhaseConfirming},                       // above the floor: 1 of 1
		{2, 5 + 0.75/sig - 1, "", PhaseConfirming},                       // 2 of 2
		{floor, 5 + 0.75/sig - 1, "", PhaseConfirming},                   // at the floor is not above it: 2 of 3, still possible
		{floor + 0.01, 5 + 0.75/sig - 1, EventConfirmed, PhaseRegressed}, // 3 of 4
	}
	confirmedThen := []step{
		{0, 5 + 0.75/sig - 1, "", PhaseRegressed},
		{floor, 5 + 0.75/sig - 1, "", PhaseRegressed}, // at the floor is not below it
		{0, 5 + 0.75/sig - 1, "", PhaseRegressed},
		{0, 0, EventRecovered, PhaseWatching}, // 3 below in the last 4
		{0.75, 0, "", PhaseWatching},          // z = 0 against the kept baseline
	}
	rejectedThen := []step{
		{0.9, 5 + 0.75/sig - 1, "", PhaseConfirming},
		{0.9, 0, EventRejected, PhaseWatching}, // 2 not above: 3 of 4 is out of reach
	}
	run := func(t *testing.T, steps []step) State {
		t.Helper()
		s := &series{t: t, p: p}
		for i, st := range steps {
			ev := s.next(st.x)
			if ev != st.ev || s.st.Phase != st.phase || math.Abs(s.st.S-st.s) > 1e-12 {
				t.Fatalf("round %d (x = %v): event %q, phase %q, S %v; want %q, %q, %v",
					i+1, st.x, ev, s.st.Phase, s.st.S, st.ev, st.phase, st.s)
			}
		}
		return s.st
	}

	t.Run("confirmed and recovered", func(t *testing.T) {
		st := run(t, append(slices.Clone(start), confirmedThen...))
		if want := []float64{1, 0.75, 0.75}; !slices.Equal(st.Window, want) {
			t.Errorf("window after recovery = %v, want %v (frozen, then the first watching round)", st.Window, want)
		}
		if st.Confirm != nil || st.Recent != nil {
			t.Errorf("after recovery Confirm = %v, Recent = %v, want both empty", st.Confirm, st.Recent)
		}
	})
	t.Run("confirmation state", func(t *testing.T) {
		st := run(t, start)
		want := Baseline{Median: 0.75, Sigma: sig, N: 3}
		if st.Baseline != want || p.Floor(st.Baseline) != floor {
			t.Errorf("frozen baseline %+v (floor %v), want %+v (floor %v)", st.Baseline, p.Floor(st.Baseline), want, floor)
		}
		if want := []float64{2, 2, floor, floor + 0.01}; !slices.Equal(st.Confirm, want) {
			t.Errorf("Confirm = %v, want the confirmation rounds %v", st.Confirm, want)
		}
		if !st.Regressed() || st.Since != at(13) || st.SinceRound != 13 {
			t.Errorf("Regressed() = %v, Since %v round %d; want true since round 13 (%v)", st.Regressed(), st.Since, st.SinceRound, at(13))
		}
	})
	t.Run("rejected", func(t *testing.T) {
		st := run(t, append(slices.Clone(start[:9]), rejectedThen...))
		if want := []float64{0.5, 1, 0.75}; !slices.Equal(st.Window, want) {
			t.Errorf("window after rejection = %v, want the frozen %v", st.Window, want)
		}
		if st.Confirm != nil || st.Regressed() {
			t.Errorf("after rejection Confirm = %v, Regressed() = %v", st.Confirm, st.Regressed())
		}
	})
}

func TestLearningDoesNotScreen(t *testing.T) {
	p := defaults()
	s := &series{t: t, p: p}
	for i := 1; i < p.MinBaselineRounds; i++ {
		if ev := s.next(float64(i)); ev != EventNone || s.st.Phase != PhaseLearning || s.st.S != 0 {
			t.Fatalf("learning round %d: event %q, phase %q, S %v; want no event, learning, S 0", i, ev, s.st.Phase, s.st.S)
		}
	}
	s.next(0)
	if s.st.Phase != PhaseWatching || s.st.Since != at(p.MinBaselineRounds) || s.st.Baseline.N != p.MinBaselineRounds {
		t.Errorf("after %d rounds: phase %q since %v, baseline %+v; want watching since round %d",
			p.MinBaselineRounds, s.st.Phase, s.st.Since, s.st.Baseline, p.MinBaselineRounds)
	}
}

// TestSigmaFloor: a perfectly quiet baseline (MAD 0) must not turn a tiny
// change into an infinite z-score.
func TestSigmaFloor(t *testing.T) {
	p := defaults()
	s := &series{t: t, p: p}
	for range p.MinBaselineRounds {
		s.next(0)
	}
	if s.st.Baseline.Sigma != p.SigmaFloor {
		t.Fatalf("σ₀ of a constant window = %v, want the floor %v", s.st.Baseline.Sigma, p.SigmaFloor)
	}
	// 1% worse is half a floor sigma: below k, nothing accumulates.
	for range 50 {
		if s.next(0.01); s.st.S != 0 {
			t.Fatalf("S = %v after 1%% steps on a quiet baseline, want 0", s.st.S)
		}
	}
	// 4% worse is 2 floor sigmas: S grows by 1.5 a round and passes 6 at the
	// 5th round, and the confirmation rejects it, being under the 5% floor,
	// at the (ConfirmRounds−ConfirmMin+1)-th round not above it.
	// The window is now mostly 0.01, so start from a fresh quiet one.
	s = &series{t: t, p: p}
	for range p.MinBaselineRounds {
		s.next(0)
	}
	var evs []Event
	reject := p.ConfirmRounds - p.ConfirmMin + 1
	for range 5 + reject {
		evs = append(evs, s.next(0.04))
	}
	want := make([]Event, 5+reject)
	want[4], want[4+reject] = EventSuspect, EventRejected
	if !slices.Equal(evs, want) {
		t.Errorf("events of a 4%% step on a quiet baseline = %q, want %q", evs, want)
	}
}

func TestWindowCapped(t *testing.T) {
	p := defaults()
	p.BaselineRounds, p.MinBaselineRounds = 20, 5
	s := &series{t: t, p: p}
	var all []float64
	for i := range 60 {
		// ±1% alternating: σ₀ is the 2% floor, z = ±0.5, S stays 0.
		x := 0.01 * float64(1-2*(i%2))
		all = append(all, x)
		if ev := s.next(x); ev != EventNone {
			t.Fatalf("round %d: event %q", i+1, ev)
		}
		if want := all[max(0, len(all)-20):]; !slices.Equal(s.st.Window, want) || s.st.Baseline.N != len(want) {
			t.Fatalf("round %d: window %v (N %d), want the last %d rounds %v", i+1, s.st.Window, s.st.Baseline.N, len(want), want)
		}
	}
	// A smaller baseline_rounds takes effect at the next round.
	p.BaselineRounds = 8
	st, _ := p.Observe(s.st, Observation{Round: s.st.LastRound + 1, X: 0})
	if len(st.Window) != 8 || st.Window[7] != 0 || st.Baseline.N != 8 {
		t.Errorf("after lowering baseline_rounds to 8: window %v, N %d", st.Window, st.Baseline.N)
	}
}

// scenario returns states in every phase, produced by Observe itself.
func scenario(t *testing.T) map[Phase]State {
	t.Helper()
	p := defaults()
	s := &series{t: t, p: p}
	out := map[Phase]State{"": s.st}
	s.next(0.01)
	out[PhaseLearning] = s.st
	s.warmUp(rand.New(rand.NewPCG(5, 5)), 60, 0.05)
	out[PhaseWatching] = s.st
	for s.st.Phase != PhaseConfirming {
		s.next(math.Ln2)
	}
	s.next(math.Ln2)
	out[PhaseConfirming] = s.st
	for s.st.Phase != PhaseRegressed {
		s.next(math.Ln2)
	}
	s.next(0)
	out[PhaseRegressed] = s.st
	return out
}

func TestReplayIsNoop(t *testing.T) {
	p := defaults()
	for phase, st := range scenario(t) {
		for _, round := range []int{st.LastRound, st.LastRound - 1, 0, -5} {
			for _, x := range []float64{0, 5, -5, math.NaN()} {
				got, ev := p.Observe(st, Observation{Round: round, At: at(999), X: x})
				if ev != EventNone || !reflect.DeepEqual(got, st) {
					t.Errorf("phase %q: replaying round %d (x = %v) gave %q and changed the state", phase, round, x, ev)
				}
			}
		}
	}
}

func TestFailedRoundsSkipped(t *testing.T) {
	p := defaults()
	for phase, st := range scenario(t) {
		for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			r := st.LastRound + 3 // round numbers may have gaps
			got, ev := p.Observe(st, Observation{Round: r, At: at(r), X: x})
			want := clone(st)
			want.LastRound = r
			if ev != EventNone || !reflect.DeepEqual(got, want) {
				t.Errorf("phase %q: failed round x = %v gave %q, state %+v; want only LastRound = %d", phase, x, ev, got, r)
			}
			// The next good round continues exactly as without the failed one.
			a, evA := p.Observe(got, Observation{Round: r + 1, At: at(r + 1), X: 0.3})
			b, evB := p.Observe(st, Observation{Round: r + 1, At: at(r + 1), X: 0.3})
			if evA != evB || !reflect.DeepEqual(a, b) {
				t.Errorf("phase %q: a failed round x = %v changed what follows: %q %+v vs %q %+v", phase, x, evA, a, evB, b)
			}
		}
	}
}

// TestObserveLeavesInputAlone: State is a value, so a caller can keep the
// old one (to retry a failed save, say) whatever Observe did since.
func TestObserveLeavesInputAlone(t *testing.T) {
	p := defaults()
	for phase, st := range scenario(t) {
		before := clone(st)
		r := st.LastRound + 1
		a, _ := p.Observe(st, Observation{Round: r, At: at(r), X: 0.7})
		b, _ := p.Observe(st, Observation{Round: r, At: at(r), X: -0.7})
		// And once more from a, to reuse any spare capacity a left behind.
		p.Observe(a, Observation{Round: r + 1, At: at(r + 1), X: 0.1})
		if !reflect.DeepEqual(st, before) {
			t.Errorf("phase %q: Observe modified its input", phase)
		}
		if b2, _ := p.Observe(before, Observation{Round: r, At: at(r), X: -0.7}); !reflect.DeepEqual(b, b2) {
			t.Errorf("phase %q: a sibling state changed after another Observe", phase)
		}
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	p := defaults()
	for phase, st := range scenario(t) {
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("phase %q: Marshal: %v", phase, err)
		}
		var got State
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("phase %q: Unmarshal(%s): %v", phase, data, err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Errorf("phase %q: round trip changed the state:\n got %+v\nwant %+v", phase, got, st)
		}
		if phase != "" && !strings.Contains(string(data), `"phase":"`+string(phase)+`"`) {
			t.Errorf("phase %q: JSON %s lacks the phase", phase, data)
		}
		r := st.LastRound + 1
		a, evA := p.Observe(st, Observation{Round: r, At: at(r), X: 0.4})
		b, evB := p.Observe(got, Observation{Round: r, At: at(r), X: 0.4})
		if evA != evB || !reflect.DeepEqual(a, b) {
			t.Errorf("phase %q: a decoded state continues differently", phase)
		}
	}
}

func TestConfirmRemaining(t *testing.T) {
	p := defaults()
	states := scenario(t)
	for phase, want := range map[Phase]int{"": 0, PhaseLearning: 0, PhaseWatching: 0, PhaseConfirming: p.ConfirmRounds - 1, PhaseRegressed: 0} {
		if got := p.ConfirmRemaining(states[phase]); got != want {
			t.Errorf("ConfirmRemaining in phase %q = %d, want %d", phase, got, want)
		}
	}
}

// TestDoubling: after a settled baseline, fsync p99 of the target doubles.
// The screen must notice within 3 rounds (z is clipped at 3, so S gains
// 2.5 a round), every confirmation round is far above the floor, so the
// ConfirmMin-th confirms; the baseline stays frozen throughout; and when
// the shift goes away the series recovers onto the old baseline.
func TestDoubling(t *testing.T) {
	p := defaults()
	const sigma = 0.05
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 1))
		noise := func() float64 { return sigma * rng.NormFloat64() }
		s := &series{t: t, p: p}
		s.warmUp(rng, p.BaselineRounds, sigma)

		suspectAfter := 0
		for i := 1; i <= 3 && suspectAfter == 0; i++ {
			if s.next(math.Ln2+noise()) == EventSuspect {
				suspectAfter = i
			}
		}
		if suspectAfter == 0 {
			t.Fatalf("seed %d: no suspicion within 3 rounds of a doubling (S = %v)", seed, s.st.S)
		}
		if got := p.ConfirmRemaining(s.st); got != p.ConfirmRounds {
			t.Errorf("seed %d: ConfirmRemaining after the suspicion = %d, want %d", seed, got, p.ConfirmRounds)
		}
		frozen := clone(s.st)
		for i := 1; i <= p.ConfirmMin; i++ {
			ev := s.next(math.Ln2 + noise())
			if want := map[bool]Event{true: EventConfirmed, false: ""}[i == p.ConfirmMin]; ev != want {
				t.Fatalf("seed %d: confirmation round %d gave %q, want %q", seed, i, ev, want)
			}
		}
		if !s.st.Regressed() {
			t.Fatalf("seed %d: not regressed after confirmation", seed)
		}
		for range 100 {
			if ev := s.next(math.Ln2 + noise()); ev != EventNone {
				t.Fatalf("seed %d: event %q while the regression lasts", seed, ev)
			}
		}
		if !reflect.DeepEqual(s.st.Window, frozen.Window) || s.st.Baseline != frozen.Baseline {
			t.Errorf("seed %d: the baseline moved during the regression: %+v, want %+v", seed, s.st.Baseline, frozen.Baseline)
		}

		// Back to normal: recovered once ConfirmMin of the last
		// ConfirmRounds rounds are under the floor, which normal noise can
		// delay by a round or two but never beyond ConfirmRounds.
		recovered := 0
		for i := 1; i <= p.ConfirmRounds && recovered == 0; i++ {
			switch ev := s.next(noise()); ev {
			case EventRecovered:
				recovered = i
			case EventNone:
			default:
				t.Fatalf("seed %d: recovery round %d gave %q", seed, i, ev)
			}
		}
		if recovered < p.ConfirmMin {
			t.Fatalf("seed %d: recovered after %d rounds, want between %d and %d", seed, recovered, p.ConfirmMin, p.ConfirmRounds)
		}
		if s.st.Regressed() || s.st.Phase != PhaseWatching || s.st.S != 0 || s.st.Baseline != frozen.Baseline {
			t.Errorf("seed %d: after recovery phase %q S %v baseline %+v; want watching, 0, %+v",
				seed, s.st.Phase, s.st.S, s.st.Baseline, frozen.Baseline)
		}
		s.next(noise())
		if got, want := s.st.Window[len(s.st.Window)-1], frozen.Window[len(frozen.Window)-1]; got == want {
			t.Errorf("seed %d: the first round after recovery did not join the window", seed)
		}
	}
}

// TestSmallShiftNotConfirmed: a lasting 5% step, half the 10% effect
// floor. The screen sees it (it is about 1σ₀), but no confirmation may
// succeed, and once the rolling window has absorbed the new level the
// suspicions stop.
func TestSmallShiftNotConfirmed(t *testing.T) {
	p := defaults()
	const sigma = 0.05
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 2))
		s := &series{t: t, p: p}
		s.warmUp(rng, p.BaselineRounds, sigma)
		var suspects []int
		confirming := 0
		for i := 1; i <= 1000; i++ {
			if s.st.Phase == PhaseConfirming {
				confirming++
			}
			switch s.next(math.Log(1.05) + sigma*rng.NormFloat64()) {
			case EventSuspect:
				suspects = append(suspects, i)
			case EventConfirmed:
				t.Fatalf("seed %d: a 5%% step was confirmed at round %d", seed, i)
			}
		}
		t.Logf("seed %d: 5%% step: %d suspicions, at rounds %v, costing %d confirmation rounds", seed, len(suspects), suspects, confirming)
		if len(suspects) == 0 || suspects[0] > 40 {
			t.Errorf("seed %d: the screen did not notice a 1σ₀ step within 40 rounds: %v", seed, suspects)
		}
		late := 0
		for _, r := range suspects {
			if r > 500 {
				late++
			}
		}
		// Absorbed, the series is in control again: about 500/2000 false
		// suspicions expected in the last 500 rounds.
		if late > 2 {
			t.Errorf("seed %d: %d suspicions in rounds 501-1000, want the new level absorbed by then", seed, late)
		}
	}
}

// TestTransientSpike: 1 to 3 bad rounds (fsync p99 doubled), then normal
// rounds. The screen may open a suspicion, but the fresh rounds that follow
// are normal, so it is rejected, after ConfirmRounds-ConfirmMin+1 of them.
func TestTransientSpike(t *testing.T) {
	p := defaults()
	const sigma = 0.05
	for bad := 1; bad <= 3; bad++ {
		for seed := range uint64(5) {
			rng := rand.New(rand.NewPCG(seed, 3))
			s := &series{t: t, p: p}
			s.warmUp(rng, p.BaselineRounds, sigma)
			var evs []Event
			for i := range bad + 20 {
				x := sigma * rng.NormFloat64()
				if i < bad {
					x += math.Ln2
				}
				if ev := s.next(x); ev != EventNone {
					evs = append(evs, ev)
				}
			}
			switch {
			case bad == 3 && !slices.Equal(evs, []Event{EventSuspect, EventRejected}):
				// S gains at least 2.5 a bad round, so three make a suspicion.
				t.Errorf("%d bad rounds, seed %d: events %q, want suspect then rejected", bad, seed, evs)
			case bad < 3 && len(evs) > 0 && !slices.Equal(evs, []Event{EventSuspect, EventRejected}):
				t.Errorf("%d bad rounds, seed %d: events %q, want none, or suspect then rejected", bad, seed, evs)
			}
			if s.st.Phase != PhaseWatching {
				t.Errorf("%d bad rounds, seed %d: phase %q 20 rounds later, want watching", bad, seed, s.st.Phase)
			}
		}
	}
	// The rejection comes as soon as it is certain.
	s := &series{t: t, p: p}
	s.warmUp(rand.New(rand.NewPCG(9, 9)), p.BaselineRounds, sigma)
	for s.st.Phase != PhaseConfirming {
		s.next(math.Ln2)
	}
	for i := 1; i <= p.ConfirmRounds-p.ConfirmMin+1; i++ {
		ev := s.next(0)
		if want := map[bool]Event{true: EventRejected, false: ""}[i == p.ConfirmRounds-p.ConfirmMin+1]; ev != want {
			t.Fatalf("normal confirmation round %d gave %q, want %q", i, ev, want)
		}
	}
	if s.st.S != 0 {
		t.Errorf("S = %v after rejection, want 0", s.st.S)
	}
}

// TestUnknownPhase: a state from a later version, or edited by hand, is
// neither lost nor stuck; it continues from its window.
func TestUnknownPhase(t *testing.T) {
	p := defaults()
	st := scenario(t)[PhaseWatching]
	st.Phase = "hibernating"
	got, _ := p.Observe(st, Observation{Round: st.LastRound + 1, X: 0})
	if got.Phase != PhaseWatching || len(got.Window) != min(len(st.Window)+1, p.BaselineRounds) {
		t.Errorf("unknown phase continued as %q with %d window rounds", got.Phase, len(got.Window))
	}
}

// TestIntermittentDoesNotRecover: recovery looks at the last ConfirmRounds
// rounds only, so a regression that is still there two rounds in three
// does not end by collecting good rounds over a long time.
func TestIntermittentDoesNotRecover(t *testing.T) {
	p := defaults()
	s := &series{t: t, p: p, st: scenario(t)[PhaseRegressed]}
	for i := range 300 {
		x := math.Ln2
		if i%3 == 2 {
			x = 0
		}
		if ev := s.next(x); ev != EventNone {
			t.Fatalf("round %d of an intermittent regression: event %q", i+1, ev)
		}
		if len(s.st.Recent) > p.ConfirmRounds {
			t.Fatalf("Recent holds %d rounds, want at most %d", len(s.st.Recent), p.ConfirmRounds)
		}
	}
}

func TestObservePanicsOnInvalidParams(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Observe with zero Params did not panic")
		}
	}()
	Params{}.Observe(State{}, Observation{Round: 1, X: 0})
}

// Settled starts a series as BaselineRounds calls of Observe would leave
// it, with S = 0: watching, its window the last WindowCap values.
func TestSettled(t *testing.T) {
	p := defaults()
	w := make([]float64, p.WindowCap()+5)
	for i := range w {
		w[i] = 0.01 * float64(i%7)
	}
	st := p.Settled(w)
	if st.Phase != PhaseWatching || len(st.Window) != p.WindowCap() || st.Window[0] != w[5] || st.S != 0 {
		t.Fatalf("Settled: phase %q, window %d from %v, S %v", st.Phase, len(st.Window), st.Window[0], st.S)
	}
	if st.Baseline != p.baseline(st.Window) || st.LastRound != p.WindowCap() {
		t.Errorf("Settled: baseline %+v, last round %d", st.Baseline, st.LastRound)
	}
	if short := p.Settled(w[:1]); short.Phase != PhaseLearning {
		t.Errorf("one value: phase %q, want learning", short.Phase)
	}
}

// TestRoundsToSuspect: however large the shift, RoundsToSuspect()-1
// rounds of it cannot open a suspicion from a settled baseline, and
// RoundsToSuspect() rounds of a shift beyond the clip do. An agent's
// cycle gives fsync that many rounds (agent.CyclePlan).
func TestRoundsToSuspect(t *testing.T) {
	p := defaults()
	n := p.RoundsToSuspect()
	if n != 3 {
		t.Errorf("defaults (k %.1f, h %.0f, clip %.0f): %d rounds, want 3", p.K, p.H, p.Clip, n)
	}
	for _, c := range []struct {
		k, h, clip float64
		want       int
	}{{0.5, 5, 3, 3}, {0.5, 4.9, 3, 2}, {1, 6, 1, 0}, {0.5, 6, 6.5, 2}} {
		q := p
		q.K, q.H, q.Clip = c.k, c.h, c.clip
		if got := q.RoundsToSuspect(); got != c.want {
			t.Errorf("k %.1f, h %.1f, clip %.1f: %d rounds, want %d", c.k, c.h, c.clip, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	s := &series{t: t, p: p}
	s.warmUp(rng, p.BaselineRounds, 0.1)
	for i := 1; i <= n; i++ {
		ev := s.next(5) // e⁵ times the baseline: far beyond the clip
		if i < n && (ev == EventSuspect || s.st.Phase != PhaseWatching) {
			t.Fatalf("round %d of %d opened a suspicion (phase %q)", i, n, s.st.Phase)
		}
		if i == n && ev != EventSuspect {
			t.Fatalf("round %d: event %q, phase %q; want a suspicion", i, ev, s.st.Phase)
		}
	}
}
