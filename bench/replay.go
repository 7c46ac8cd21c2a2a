//go:build bench

package bench

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// The replay: measured A/A rounds (bind against host, whose true ratio is
// 1) fed through internal/detector as simulated agent cycles. Rounds are
// resampled with replacement in blocks of consecutive rounds of one
// source (an agent's history, one run), the size of a real cycle's fsync
// rounds, so that whatever ties neighbouring rounds together (the disk's
// slow drift, a busy minute) stays in the sample.

// aaSources are the A/A fsync log ratios of one driver, per source, in
// round order.
type aaSources [][]float64

func (s aaSources) rounds() int {
	n := 0
	for _, xs := range s {
		n += len(xs)
	}
	return n
}

// all is every round of every source.
func (s aaSources) all() []float64 {
	var out []float64
	for _, xs := range s {
		out = append(out, xs...)
	}
	return out
}

// resampler draws blocks of consecutive rounds: a source with probability
// proportional to its rounds, a start in it uniformly, wrapping around at
// its end.
type resampler struct {
	src aaSources
	rng *rand.Rand
	n   int
}

func newResampler(src aaSources, rng *rand.Rand) *resampler {
	return &resampler{src: src, rng: rng, n: src.rounds()}
}

func (r *resampler) block(size int) []float64 {
	i := r.rng.IntN(r.n)
	var xs []float64
	for _, s := range r.src {
		if i < len(s) {
			xs = s
			break
		}
		i -= len(s)
	}
	out := make([]float64, size)
	for k := range out {
		out[k] = xs[(i+k)%len(xs)]
	}
	return out
}

// simAgent is one simulated agent's detector for one target.
type simAgent struct {
	p     detector.Params
	st    detector.State
	round int
	rs    *resampler
	block int
	shift float64
	// Counts of what the counted cycles raised.
	suspicions, confirmations int
}

func (a *simAgent) observe(x float64) detector.Event {
	a.round++
	var ev detector.Event
	a.st, ev = a.p.Observe(a.st, detector.Observation{Round: a.round, X: x + a.shift})
	return ev
}

// warm fills the baseline window as a long-running agent has it: a full
// window of rounds, and on until the detector is back to watching should
// the warm-up have raised anything. Nothing here is counted.
func (a *simAgent) warm() {
	for _, x := range a.rs.block(a.p.BaselineRounds) {
		a.observe(x)
	}
	for a.st.Phase != detector.PhaseWatching {
		a.observe(a.rs.block(1)[0])
	}
}

// cycle runs one measurement cycle of block rounds and, if it left a
// suspicion open, the confirmation rounds the agent runs right after it,
// until the detector decides. It counts the events.
func (a *simAgent) cycle() {
	count := func(ev detector.Event) {
		switch ev {
		case detector.EventSuspect:
			a.suspicions++
		case detector.EventConfirmed:
			a.confirmations++
		}
	}
	for _, x := range a.rs.block(a.block) {
		count(a.observe(x))
	}
	for a.p.ConfirmRemaining(a.st) > 0 {
		fresh := a.rs.block(a.p.ConfirmRemaining(a.st))
		for _, x := range fresh {
			count(a.observe(x))
			if a.p.ConfirmRemaining(a.st) == 0 {
				break
			}
		}
	}
}

// replayResult is the false-alarm replay of one driver's A/A rounds.
type replayResult struct {
	Rounds        int     // measured A/A rounds resampled
	Sources       int     // their sources (agent histories, runs)
	Block         int     // rounds per simulated cycle
	Sigma         float64 // their robust σ, log units
	Cycles        int     // simulated measurement cycles counted
	Suspicions    int
	Confirmations int // false confirmations
}

// perThousand is the false confirmations per 1000 cycles.
func (r replayResult) perThousand() float64 {
	return 1000 * float64(r.Confirmations) / float64(r.Cycles)
}

// replayFalseAlarms simulates agents × cycles measurement cycles on
// resampled A/A rounds, each agent from its own warm baseline.
func replayFalseAlarms(p detector.Params, src aaSources, block, agents, cycles int, seed uint64) replayResult {
	res := replayResult{Rounds: src.rounds(), Sources: len(src), Block: block, Sigma: stats.RobustSigma(src.all())}
	if res.Rounds == 0 || block < 1 {
		return res
	}
	for i := range agents {
		a := &simAgent{p: p, rs: newResampler(src, rand.New(rand.NewPCG(seed, uint64(i)))), block: block}
		a.warm()
		for range cycles {
			a.cycle()
		}
		res.Cycles += cycles
		res.Suspicions += a.suspicions
		res.Confirmations += a.confirmations
	}
	return res
}

// shiftReplay is the injected-shift replay at one level.
type shiftReplay struct {
	Level  float64 `json:"level"` // the injected ratio, e.g. 1.25
	Trials int     `json:"trials"`
	// Within[c-1] is the share of trials flagged within c measurement
	// cycles (with their confirmation rounds), c = 1..len(Within).
	Within []float64 `json:"within"`
}

// within returns the share flagged within c cycles.
func (s shiftReplay) within(c int) float64 {
	if c < 1 || c > len(s.Within) {
		return math.NaN()
	}
	return s.Within[c-1]
}

// replayShift adds ln(level) to every round after a warm, unshifted
// baseline and counts the measurement cycles until the detector confirms,
// for at most capCycles cycles.
func replayShift(p detector.Params, src aaSources, block int, level float64, trials, capCycles int, seed uint64) shiftReplay {
	res := shiftReplay{Level: level, Trials: trials, Within: make([]float64, capCycles)}
	if src.rounds() == 0 || trials == 0 {
		return res
	}
	for i := range trials {
		a := &simAgent{p: p, rs: newResampler(src, rand.New(rand.NewPCG(seed, uint64(i)))), block: block}
		a.warm()
		a.shift = math.Log(level)
		for c := 1; c <= capCycles; c++ {
			a.cycle()
			if a.st.Regressed() {
				for k := c; k <= capCycles; k++ {
					res.Within[k-1]++
				}
				break
			}
		}
	}
	for k := range res.Within {
		res.Within[k] /= float64(trials)
	}
	return res
}

// cycleBlock is the number of fsync rounds of a typical (median) counted
// unperturbed measurement cycle: the block size of the replay.
func cycleBlock(d *detectionResult) int {
	if d == nil {
		return 0
	}
	per := map[int64]int{}
	for _, r := range measurementRounds(d.Unperturbed, "counted") {
		if r.Workload == "fsync" && r.Target == "bind" {
			per[r.CycleID]++
		}
	}
	var ns []float64
	for _, n := range per {
		ns = append(ns, float64(n))
	}
	if len(ns) == 0 {
		return 0
	}
	return max(1, int(math.Round(median(ns))))
}

// aaSourcesOf gathers a driver's measured A/A fsync rounds: the agent's
// unperturbed history (every cycle, confirmation cycles included, in round
// order) and every default run.
func aaSourcesOf(r *results, driver string) aaSources {
	var src aaSources
	if d := r.Detection; d != nil && d.Driver == driver {
		if xs := fsyncX(d.Unperturbed.Rounds, "bind"); len(xs) > 0 {
			src = append(src, xs)
		}
	}
	for _, dr := range r.Drivers {
		if dr.Driver != driver {
			continue
		}
		for i := range dr.Defaults {
			if xs := dr.Defaults[i].logRatios("bind", "fsync"); len(xs) > 0 {
				src = append(src, slices.Clone(xs))
			}
		}
	}
	return src
}
