// Package detector decides, round by round, whether the fsync latency of one
// storage target (container, bind or volume of one engine) has regressed
// against that target's own history.
//
// The observation is the per-round paired log ratio x = ln(target/host) of
// the watched metric (fsync p99 by default). The method has two stages, as
// the project's methodology notes recommend:
//
//  1. Screen. A baseline window of recent rounds gives the median m₀ and the
//     robust spread σ₀ = 1.4826·MAD (never below Params.SigmaFloor). Each
//     new round is standardised, z = clip((x − m₀)/σ₀, ±Clip), and fed to a
//     one-sided CUSUM, S = max(0, S + z − K). S > H opens a suspicion.
//  2. Confirm. The agent runs fresh rounds; the regression is confirmed when
//     at least ConfirmMin of ConfirmRounds of them exceed the floor
//     m₀ + ln(1+MinEffect), and rejected otherwise: a one-sided sign test
//     that the regression is larger than MinEffect. A round is a short
//     execution, noisy on its own (docs/detector.md has its spread on a
//     shared virtual disk); the count of rounds above the floor, not any
//     single round, carries the evidence. The baseline
//     is frozen from the moment a suspicion opens until the state is back to
//     watching, so a regression cannot become its own baseline.
//
// A confirmed regression ends when at least ConfirmMin of the last
// ConfirmRounds rounds are back below the same floor.
//
// Everything here is a pure function of its arguments. State is a value: the
// agent persists it per engine and target (it is JSON-serialisable) and
// passes it back with the next round; Observe never modifies the State it
// was given, so a caller that fails to persist the new State can retry with
// the old one.
package detector

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// DefaultSigmaFloor is the smallest σ₀ used, in log-ratio units (0.02 is
// about 2%). fio reports percentiles from a histogram with buckets about
// 0.8% wide, so a quiet series can have a MAD of exactly 0; without a floor
// the smallest change would then be an infinite z-score.
const DefaultSigmaFloor = 0.02

// Params are the detector's settings. ParamsFrom builds them from the
// configuration; the fields mirror the config keys detector.*.
type Params struct {
	BaselineRounds    int     // baseline window length, in rounds
	MinBaselineRounds int     // rounds needed before the screen runs
	K                 float64 // CUSUM allowance, in σ₀
	H                 float64 // CUSUM decision threshold
	Clip              float64 // robust z-scores are clipped at ±Clip
	MinEffect         float64 // effect floor as a ratio: 0.25 = 25% worse than baseline
	ConfirmRounds     int     // fresh rounds that decide a suspicion
	ConfirmMin        int     // of which at least this many must exceed the floor
	SigmaFloor        float64 // smallest σ₀, in log units; see DefaultSigmaFloor
}

// ParamsFrom returns the detector parameters of a configuration, with
// SigmaFloor set to DefaultSigmaFloor (it has no config key).
func ParamsFrom(c config.Detector) Params {
	return Params{
		BaselineRounds:    c.BaselineRounds,
		MinBaselineRounds: c.MinBaselineRound,
		K:                 c.K,
		H:                 c.H,
		Clip:              c.Clip,
		MinEffect:         c.MinEffect,
		ConfirmRounds:     c.ConfirmRounds,
		ConfirmMin:        c.ConfirmMin,
		SigmaFloor:        DefaultSigmaFloor,
	}
}

// Validate reports every parameter that makes the detector meaningless.
// config validation already rejects these for configured values; Validate
// exists for Params built in code.
func (p Params) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.MinBaselineRounds < 2 {
		bad("detector: min baseline rounds %d, want at least 2", p.MinBaselineRounds)
	}
	if p.BaselineRounds < p.MinBaselineRounds {
		bad("detector: baseline rounds %d, want at least min baseline rounds (%d)", p.BaselineRounds, p.MinBaselineRounds)
	}
	for _, f := range []struct {
		name     string
		v        float64
		positive bool
	}{{"k", p.K, false}, {"h", p.H, true}, {"clip", p.Clip, true}, {"min effect", p.MinEffect, false}, {"sigma floor", p.SigmaFloor, true}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || (f.positive && f.v == 0) {
			bad("detector: %s %v out of range", f.name, f.v)
		}
	}
	if p.ConfirmRounds < 1 {
		bad("detector: confirm rounds %d, want at least 1", p.ConfirmRounds)
	}
	if p.ConfirmMin < 1 || p.ConfirmMin > p.ConfirmRounds {
		bad("detector: confirm min %d, want 1 to confirm rounds (%d)", p.ConfirmMin, p.ConfirmRounds)
	}
	return errors.Join(errs...)
}

// Phase is where a series stands.
type Phase string

// Phases. The zero Phase ("") is a fresh state and behaves as learning.
const (
	PhaseLearning   Phase = "learning"   // fewer than MinBaselineRounds rounds: no screening yet
	PhaseWatching   Phase = "watching"   // screening every round with the CUSUM
	PhaseConfirming Phase = "confirming" // suspicion open: collecting confirmation rounds
	PhaseRegressed  Phase = "regressed"  // regression confirmed; waiting for recovery
)

// Event is what a round changed, for the agent to act on and log.
type Event string

// Events. Only the round that changes the phase reports one.
const (
	EventNone Event = ""
	// EventSuspect: the CUSUM crossed H. The agent should run fresh rounds
	// now, while Params.ConfirmRemaining says more are needed.
	EventSuspect Event = "suspect"
	// EventConfirmed: enough confirmation rounds exceeded the floor; the
	// series is regressed.
	EventConfirmed Event = "confirmed"
	// EventRejected: the confirmation failed; back to watching with S = 0.
	EventRejected Event = "rejected"
	// EventRecovered: at least ConfirmMin of the last ConfirmRounds rounds
	// are below the floor again; back to watching with S = 0.
	EventRecovered Event = "recovered"
)

// Baseline summarises the baseline window.
type Baseline struct {
	Median float64 `json:"median"` // m₀, log units
	// Sigma is σ₀ as used for scoring: 1.4826·MAD of the window, or
	// SigmaFloor if that is larger.
	Sigma float64 `json:"sigma"`
	N     int     `json:"n"` // rounds in the window
}

// Observation is one round's result for one series.
type Observation struct {
	// Round numbers the round. It must increase from round to round of a
	// series and survive agent restarts (a store sequence number, say),
	// and it starts at 1: an Observation whose Round is not above
	// State.LastRound is taken for a replay and ignored.
	Round int
	// At is when the round ran. It only stamps State.Since.
	At time.Time
	// X is ln(target/host) of the watched metric. NaN or ±Inf marks a
	// failed round, which is skipped.
	X float64
}

// State is a series' detector state. The zero State is a fresh series.
type State struct {
	Phase Phase   `json:"phase"`
	S     float64 `json:"s"` // CUSUM statistic; frozen while confirming or regressed
	// Baseline is the summary of Window that scores the next round. It is
	// frozen while a suspicion is open and while regressed.
	Baseline Baseline `json:"baseline"`
	// Window holds the baseline rounds, oldest first, at most
	// BaselineRounds of them. The detector owns it so that no caller can
	// let rounds of a suspected or confirmed regression into the
	// baseline: only rounds observed while learning or watching join it.
	Window []float64 `json:"window,omitempty"`
	// Confirm holds the confirmation rounds of the open suspicion, and
	// after a confirmation the rounds that confirmed it (as evidence).
	Confirm []float64 `json:"confirm,omitempty"`
	// Recent holds, while regressed, the last ConfirmRounds rounds, which
	// decide recovery.
	Recent     []float64 `json:"recent,omitempty"`
	Since      time.Time `json:"since,omitzero"` // Observation.At of the round that began the phase
	SinceRound int       `json:"since_round,omitempty"`
	Rounds     int       `json:"rounds"`     // finite observations applied
	LastRound  int       `json:"last_round"` // last Observation.Round seen, finite or not
}

// Regressed reports whether a regression is confirmed and not yet over:
// the value of layerprobe_fsync_regression.
func (s State) Regressed() bool { return s.Phase == PhaseRegressed }

// Floor returns the confirmation floor of a baseline, in log units:
// m₀ + ln(1+MinEffect). A confirmation round counts when its x is above
// it; a round in recovery counts when below.
//
// The floor has no σ₀ term. With one round per observation a floor several
// σ₀ above the baseline kept a lone noisy round from counting, but rounds
// are now short executions with a σ₀ near the effects worth finding: a
// 3σ₀ floor would sit near +50% and no 25% regression could ever be
// confirmed. The sign test over ConfirmRounds rounds does that job: if the
// regression were exactly MinEffect, each round would be above the floor
// with probability 1/2 and the default ConfirmMin of 23 of 32 would happen
// by chance one time in a hundred; a smaller regression, or none, less
// often.
func (p Params) Floor(b Baseline) float64 {
	return b.Median + math.Log1p(p.MinEffect)
}

// ConfirmRemaining returns how many more confirmation rounds the open
// suspicion can need: 0 unless the state is confirming. The decision may
// come sooner, as soon as the rounds still missing cannot change it, so
// the agent should check again after every round.
func (p Params) ConfirmRemaining(s State) int {
	if s.Phase != PhaseConfirming {
		return 0
	}
	return max(0, p.ConfirmRounds-len(s.Confirm))
}

// Observe applies one round, in round order, and returns the new state and
// what changed. st is not modified.
//
// A replayed round (o.Round not above st.LastRound) changes nothing. A
// failed round (X NaN or infinite) only advances LastRound.
//
// Confirmation and recovery stop as soon as the outcome is certain: a
// suspicion is confirmed at the ConfirmMin-th round above the floor and
// rejected at the (ConfirmRounds−ConfirmMin+1)-th round not above it. This
// is the same decision as waiting for all ConfirmRounds rounds, with fewer
// rounds written: a false suspicion on a stable series typically ends
// after ConfirmRounds−ConfirmMin+1 = 10 rounds, or a few more, instead of
// 32.
//
// Observe panics if p is invalid (see Validate). Configuration loading
// rejects such values, so invalid Params are a programming error, the
// zero Params above all: with ConfirmMin 0 every suspicion would be
// confirmed at once.
func (p Params) Observe(st State, o Observation) (State, Event) {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	if o.Round <= st.LastRound {
		return st, EventNone
	}
	st.LastRound = o.Round
	if math.IsNaN(o.X) || math.IsInf(o.X, 0) {
		return st, EventNone
	}
	st.Rounds++
	switch st.Phase {
	case PhaseConfirming:
		return p.confirm(st, o)
	case PhaseRegressed:
		return p.regressed(st, o)
	default:
		// Learning, watching, the zero Phase and anything unknown (a state
		// written by a later version, say) all continue from the window.
		return p.watch(st, o)
	}
}

// watch handles a round while learning or watching.
func (p Params) watch(st State, o Observation) (State, Event) {
	if len(st.Window) >= p.minBaseline() {
		// Score against the baseline of earlier rounds only, so a shifted
		// round does not soften its own z-score.
		st.S = max(0, st.S+p.z(st.Baseline, o.X)-p.K)
	} else {
		st.S = 0
	}
	st.Window = appendCapped(st.Window, p.WindowCap(), o.X)
	st.Baseline = p.baseline(st.Window)

	if st.S > p.H {
		st.setPhase(PhaseConfirming, o)
		st.Confirm = nil
		return st, EventSuspect
	}
	st.setPhase(p.windowPhase(st.Window), o)
	return st, EventNone
}

// confirm handles a round while a suspicion is open.
func (p Params) confirm(st State, o Observation) (State, Event) {
	floor := p.Floor(st.Baseline)
	st.Confirm = appendCapped(st.Confirm, len(st.Confirm)+1, o.X)
	above := 0
	for _, x := range st.Confirm {
		if x > floor {
			above++
		}
	}
	switch {
	case above >= p.ConfirmMin:
		st.setPhase(PhaseRegressed, o)
		st.Recent = nil
		return st, EventConfirmed
	case len(st.Confirm)-above > p.ConfirmRounds-p.ConfirmMin:
		// The confirmation rounds stay out of the baseline, like every
		// round of a suspicion. Letting them in would make the baseline
		// absorb a lasting shift near the floor at every rejection, and
		// in simulation a lasting step was then confirmed far less often.
		// The price is a few more suspicions while the rolling window
		// absorbs a lasting shift below the floor (docs/detector.md has
		// both figures).
		st.Confirm = nil
		st.S = 0
		st.setPhase(p.windowPhase(st.Window), o)
		return st, EventRejected
	}
	return st, EventNone
}

// regressed handles a round while a regression is confirmed.
func (p Params) regressed(st State, o Observation) (State, Event) {
	floor := p.Floor(st.Baseline)
	st.Recent = appendCapped(st.Recent, p.ConfirmRounds, o.X)
	below := 0
	for _, x := range st.Recent {
		if x < floor {
			below++
		}
	}
	if below < p.ConfirmMin {
		return st, EventNone
	}
	// The baseline is the one from before the regression: the series is
	// back under the floor of that baseline, and the regression rounds
	// never belonged in it.
	st.Recent = nil
	st.Confirm = nil
	st.S = 0
	st.setPhase(p.windowPhase(st.Window), o)
	return st, EventRecovered
}

// setPhase moves to phase, stamping Since when the phase changes.
func (st *State) setPhase(phase Phase, o Observation) {
	if st.Phase == phase {
		return
	}
	st.Phase = phase
	st.Since = o.At.UTC() // UTC also drops the monotonic reading, so Since survives JSON unchanged
	st.SinceRound = o.Round
}

// windowPhase is learning or watching, by the window's length.
func (p Params) windowPhase(w []float64) Phase {
	if len(w) >= p.minBaseline() {
		return PhaseWatching
	}
	return PhaseLearning
}

// minBaseline is MinBaselineRounds, at least 1.
func (p Params) minBaseline() int { return max(p.MinBaselineRounds, 1) }

// RoundsToSuspect is the fewest rounds that can open a suspicion: each
// round adds at most Clip − K to the CUSUM, which must exceed H. A cycle
// with fewer rounds of the watched workload cannot flag even a large shift
// on its own; 0 when no number of rounds can (Clip ≤ K).
func (p Params) RoundsToSuspect() int {
	step := p.Clip - p.K
	if step <= 0 {
		return 0
	}
	return int(math.Floor(p.H/step)) + 1
}

// WindowCap is BaselineRounds, but never below MinBaselineRounds: with a
// smaller cap the window could never fill enough to leave learning.
func (p Params) WindowCap() int { return max(p.BaselineRounds, p.minBaseline()) }

// Settled returns the state of a series whose baseline window holds w (its
// last WindowCap values), with S = 0 and no round after it: the start of a
// simulated series without BaselineRounds calls of Observe.
func (p Params) Settled(w []float64) State {
	w = appendCapped(nil, p.WindowCap(), w...)
	return State{Phase: p.windowPhase(w), Window: w, Baseline: p.baseline(w), Rounds: len(w), LastRound: len(w)}
}

// sigma is the σ₀ to score with: the baseline's, floored again in case the
// state was written with a smaller SigmaFloor.
func (p Params) sigma(b Baseline) float64 { return max(b.Sigma, p.SigmaFloor) }

// z is the clipped robust z-score of x.
func (p Params) z(b Baseline, x float64) float64 {
	z := (x - b.Median) / p.sigma(b)
	return max(-p.Clip, min(p.Clip, z))
}

// baseline summarises a window. An empty window has the zero Baseline,
// not NaN, so that the state always encodes as JSON.
func (p Params) baseline(w []float64) Baseline {
	if len(w) == 0 {
		return Baseline{}
	}
	m, mad := medianMAD(w)
	return Baseline{Median: m, Sigma: max(stats.MADScale*mad, p.SigmaFloor), N: len(w)}
}

// appendCapped returns a new slice holding the last capN values of
// old followed by xs. It never writes to old's backing array: State is a
// value, and a caller may still hold (and retry with) the previous one.
func appendCapped(old []float64, capN int, xs ...float64) []float64 {
	n := min(len(old)+len(xs), capN)
	out := make([]float64, 0, n)
	if keep := n - len(xs); keep > 0 {
		out = append(out, old[len(old)-keep:]...)
	}
	return append(out, xs[len(xs)-(n-len(out)):]...)
}
