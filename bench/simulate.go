//go:build bench

package bench

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/layerprobe/layerprobe/internal/detector"
)

// DelayHorizon is how many rounds after a shift DelayTable follows a trial
// before counting it as not detected: 200 fsync rounds, about four days at
// the default cadence (agent.interval 6h, a dozen fsync rounds a cycle).
const DelayHorizon = 200

// DelayRow is DelayTable's result for one shift.
type DelayRow struct {
	Shift  float64 `json:"shift"`  // size of the step in x, log units: ln 2 doubles fsync p99
	Sigma  float64 `json:"sigma"`  // noise standard deviation of x per round
	Trials int     `json:"trials"` // simulated series

	// Suspected is the share of trials with a suspicion within
	// DelayHorizon rounds of the shift; SuspectMean and SuspectP90 are
	// the mean and 90th percentile of the rounds from the shift to the
	// first suspicion (1 = the first shifted round), over those trials,
	// and 0 when there were none.
	Suspected   float64 `json:"suspected"`
	SuspectMean float64 `json:"suspect_mean"`
	SuspectP90  float64 `json:"suspect_p90"`

	// Confirmed, ConfirmMean and ConfirmP90 are the same for the
	// confirmation; the rounds counted include the confirmation rounds
	// (and any earlier, rejected, suspicions), all of them shifted.
	Confirmed   float64 `json:"confirmed"`
	ConfirmMean float64 `json:"confirm_mean"`
	ConfirmP90  float64 `json:"confirm_p90"`
}

// DelayTable simulates how many rounds the detector needs to notice a step
// of each size in shifts. Each trial starts from a full baseline window of
// BaselineRounds rounds of N(0, sigma²) noise and S = 0, then feeds rounds
// of shift + N(0, sigma²), confirmation rounds included, until a
// confirmation or DelayHorizon rounds. A shift of 0 measures false alarms
// within the horizon.
//
// The result is a deterministic function of the arguments. Trial i uses
// the same random numbers for every shift, so rows differ only by the
// shift, and a row does not depend on the other shifts asked for.
func DelayTable(p detector.Params, shifts []float64, sigma float64, seed uint64, trials int) []DelayRow {
	rows := make([]DelayRow, 0, len(shifts))
	for _, shift := range shifts {
		var suspect, confirm []float64
		for trial := range trials {
			rng := rand.New(rand.NewPCG(seed, uint64(trial)))
			s, c := delayTrial(p, rng, shift, sigma)
			if s > 0 {
				suspect = append(suspect, float64(s))
			}
			if c > 0 {
				confirm = append(confirm, float64(c))
			}
		}
		row := DelayRow{Shift: shift, Sigma: sigma, Trials: trials}
		if trials > 0 {
			row.Suspected = float64(len(suspect)) / float64(trials)
			row.Confirmed = float64(len(confirm)) / float64(trials)
		}
		row.SuspectMean, row.SuspectP90 = meanP90(suspect)
		row.ConfirmMean, row.ConfirmP90 = meanP90(confirm)
		rows = append(rows, row)
	}
	return rows
}

// delayTrial runs one trial and returns the rounds after the shift to the
// first suspicion and to the confirmation, 0 for none.
func delayTrial(p detector.Params, rng *rand.Rand, shift, sigma float64) (suspect, confirm int) {
	st := warm(p, rng, sigma)
	start := st.LastRound
	for r := 1; r <= DelayHorizon; r++ {
		var ev detector.Event
		st, ev = p.Observe(st, detector.Observation{Round: start + r, X: shift + sigma*rng.NormFloat64()})
		switch ev {
		case detector.EventSuspect:
			if suspect == 0 {
				suspect = r
			}
		case detector.EventConfirmed:
			return suspect, r
		}
	}
	return suspect, 0
}

// warm returns a watching state whose window is full of in-control noise.
// Building it directly, rather than through BaselineRounds calls of
// Observe, keeps simulations cheap and starts every trial at S = 0, the
// usual convention for detection delays (a zero-state ARL).
func warm(p detector.Params, rng *rand.Rand, sigma float64) detector.State {
	w := make([]float64, p.WindowCap())
	for i := range w {
		w[i] = sigma * rng.NormFloat64()
	}
	return p.Settled(w)
}

// meanP90 returns the mean and the nearest-rank 90th percentile of xs, or
// zeros for none.
func meanP90(xs []float64) (mean, p90 float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return sum / float64(len(s)), s[int(math.Ceil(0.9*float64(len(s))))-1]
}
