package detector

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// The simulations are sized to keep `go test` near a few seconds. The
// figures quoted in docs/detector.md come from longer runs (about two
// minutes):
//
//	go test -run 'FalseAlarm|EarlyLife|Autocorrelated' -v ./internal/detector/ \
//		-args -detector.rounds=1000000
//
// The detection delays (DelayTable) are simulated by the benchmark, in
// bench/simulate.go, with its own test.
var simRounds = flag.Int("detector.rounds", 50_000, "rounds per in-control series in TestFalseAlarms")

// short says whether to cut the simulations down (-short, or the race
// detector's tenfold slowdown). Assertions that need the full size are
// then skipped; the others still run.
func short() bool { return testing.Short() || raceEnabled }

func rounds() int {
	if short() {
		return min(*simRounds, 5_000)
	}
	return *simRounds
}

// Noise generators, each scaled so that 1.4826·MAD, the σ₀ the detector
// estimates, is sigma.
type noise struct {
	name string
	draw func(rng *rand.Rand, sigma float64) float64
	// cdf is the distribution of x/σ₀, for the Markov-chain ARL, or nil.
	cdf func(float64) float64
}

// laplaceScale is the Laplace scale b, in units of σ₀: MAD = b·ln 2.
var laplaceScale = 1 / (stats.MADScale * math.Ln2)

// t3MAD is the median absolute deviation of Student's t with 3 degrees of
// freedom (its upper quartile).
const t3MAD = 0.7648923284

var noises = []noise{
	{"normal", func(rng *rand.Rand, sigma float64) float64 { return sigma * rng.NormFloat64() }, normalCDF},
	{"laplace", func(rng *rand.Rand, sigma float64) float64 {
		u := rng.Float64() - 0.5
		return -sigma * laplaceScale * math.Copysign(math.Log(1-2*math.Abs(u)), u)
	}, laplaceCDF(laplaceScale)},
	{"t3", func(rng *rand.Rand, sigma float64) float64 {
		v := 0.0
		for range 3 {
			g := rng.NormFloat64()
			v += g * g
		}
		return sigma / (stats.MADScale * t3MAD) * rng.NormFloat64() / math.Sqrt(v/3)
	}, nil},
}

// TestMarkovARL checks the test's own oracle, cusumARL, against the
// methodology's figures for the one-sided CUSUM k = 0.5, h = 6 on normal
// data without clipping: ARL0 ≈ 2575 (Siegmund), ARL1 12.3, 4.6 and 2.8
// at 1, 2 and 3σ.
func TestMarkovARL(t *testing.T) {
	for _, tt := range []struct {
		shift, want, tol float64
	}{{0, 2575, 0.03}, {1, 12.3, 0.03}, {2, 4.6, 0.06}, {3, 2.8, 0.1}} {
		got := cusumARL(func(x float64) float64 { return normalCDF(x - tt.shift) }, 0.5, 6, math.Inf(1), 200)
		if math.Abs(got-tt.want) > tt.tol*tt.want {
			t.Errorf("ARL at a %vσ shift = %.4g, want %.4g within %.0f%%", tt.shift, got, tt.want, 100*tt.tol)
		}
	}
}

// TestFalseAlarms feeds long in-control series, iid with no shift, and
// counts what the detector does. No confirmation may happen: a false one
// needs ConfirmMin of ConfirmRounds fresh rounds above a floor at least
// 3σ₀ over the median, each with probability 0.0013 for normal data (0.023
// for Laplace): about 120·p¹⁴, under 1e-20 per suspicion. The rate of
// suspicions (the ARL0 of the screen) must match the Markov-chain value
// for known parameters, lowered somewhat because m₀ and σ₀ are estimated
// from a 200-round window; the band allows for that and for the sampling
// error of a few dozen suspicions.
func TestFalseAlarms(t *testing.T) {
	p := defaults()
	n := rounds()
	for i, nz := range noises {
		t.Run(nz.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(i)))
			s := &series{t: t, p: p}
			for range p.BaselineRounds {
				s.next(nz.draw(rng, 0.05))
			}
			counts := map[Event]int{}
			watching, confirming := 0, 0
			for range n {
				switch s.st.Phase {
				case PhaseWatching:
					watching++
				case PhaseConfirming:
					confirming++
				}
				counts[s.next(nz.draw(rng, 0.05))]++
			}
			sus := counts[EventSuspect]
			arl := float64(watching) / float64(max(sus, 1))
			msg := fmt.Sprintf("%s: %d rounds, %d suspicions (ARL0 %.0f rounds), %d rejected, %d confirmed; %.2f confirmation rounds per suspicion",
				nz.name, n, sus, arl, counts[EventRejected], counts[EventConfirmed], float64(confirming)/float64(max(sus, 1)))
			if nz.cdf != nil {
				msg += fmt.Sprintf("; Markov ARL0 with known m₀, σ₀: %.0f", cusumARL(nz.cdf, p.K, p.H, p.Clip, 200))
			}
			t.Log(msg)

			if counts[EventConfirmed] != 0 || counts[EventRecovered] != 0 {
				t.Errorf("false confirmations on in-control data: %v", counts)
			}
			if open := sus - counts[EventRejected]; open != 0 && (open != 1 || s.st.Phase != PhaseConfirming) {
				t.Errorf("%d suspicions but %d rejections", sus, counts[EventRejected])
			}
			// On in-control data the early rejection stops at the
			// (ConfirmRounds−ConfirmMin+1)-th round not above the floor:
			// after that many rounds over 1−q, q the chance that an
			// in-control round clears the floor. At σ₀ 0.05 and a 5% floor
			// q is 0.16 for normal noise, less for the heavier tails drawn
			// at the same σ₀; 0.2 bounds it.
			if want := float64(p.ConfirmRounds-p.ConfirmMin+1) / (1 - 0.2); sus > 0 && float64(confirming)/float64(sus) > want+0.5 {
				t.Errorf("%.2f confirmation rounds per false suspicion, want about %v", float64(confirming)/float64(sus), want)
			}
			if nz.cdf == nil || short() {
				return
			}
			want := cusumARL(nz.cdf, p.K, p.H, p.Clip, 200)
			if arl < want/3 || arl > 1.5*want {
				t.Errorf("ARL0 %.0f rounds, want within [%.0f, %.0f] (Markov value %.0f)", arl, want/3, 1.5*want, want)
			}
		})
	}
}

// TestEarlyLife: a new series screens from MinBaselineRounds on, when m₀
// and σ₀ rest on a dozen rounds. Suspicions are then more frequent (logged
// for docs/detector.md); confirmations must still not happen.
func TestEarlyLife(t *testing.T) {
	p := defaults()
	nSeries, n := 300, p.BaselineRounds
	if short() {
		nSeries = 50
	}
	withSuspect, suspicions, watching := 0, 0, 0
	for i := range nSeries {
		rng := rand.New(rand.NewPCG(43, uint64(i)))
		s := &series{t: t, p: p}
		hit := false
		for range n {
			if s.st.Phase == PhaseWatching {
				watching++
			}
			switch s.next(0.05 * rng.NormFloat64()) {
			case EventSuspect:
				suspicions++
				hit = true
			case EventConfirmed:
				t.Fatalf("series %d: a confirmation in the first %d rounds of in-control data", i, n)
			}
		}
		if hit {
			withSuspect++
		}
	}
	t.Logf("first %d rounds of %d new series: %d (%.0f%%) had a false suspicion; one per %.0f watching rounds",
		n, nSeries, withSuspect, 100*float64(withSuspect)/float64(nSeries), float64(watching)/float64(max(suspicions, 1)))
}

// TestAutocorrelated measures how far the iid assumption matters: AR(1)
// noise with lag-one correlation 0.5 (slow drifts of host load, say). It
// asserts only that nothing is confirmed, and logs the ARL0 for
// docs/detector.md.
func TestAutocorrelated(t *testing.T) {
	p := defaults()
	const rho = 0.5
	n := rounds() / 2
	rng := rand.New(rand.NewPCG(44, 0))
	e := 0.0
	draw := func() float64 {
		e = rho*e + math.Sqrt(1-rho*rho)*0.05*rng.NormFloat64()
		return e
	}
	s := &series{t: t, p: p}
	for range p.BaselineRounds {
		s.next(draw())
	}
	counts := map[Event]int{}
	watching := 0
	for range n {
		if s.st.Phase == PhaseWatching {
			watching++
		}
		counts[s.next(draw())]++
	}
	t.Logf("AR(1) ρ = %v: %d rounds, %d suspicions (ARL0 %.0f rounds), %d confirmed",
		rho, n, counts[EventSuspect], float64(watching)/float64(max(counts[EventSuspect], 1)), counts[EventConfirmed])
	if counts[EventConfirmed] != 0 {
		t.Errorf("%d false confirmations on AR(1) data", counts[EventConfirmed])
	}
}
