package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestWilcoxonCriticalValues(t *testing.T) {
	// Two-sided 5% critical values of the signed-rank statistic from the
	// standard tables (reject when T <= crit): the interval's lower bound
	// is then the (crit+1)-th Walsh average.
	tests := []struct{ n, crit int }{
		{6, 0}, {7, 2}, {8, 3}, {9, 5}, {10, 8}, {12, 13}, {15, 25}, {20, 52}, {25, 89}, {30, 137},
	}
	for _, tt := range tests {
		c, cov := signedRankIndex(tt.n, 0.95)
		if c != tt.crit+1 {
			t.Errorf("n=%d: c = %d, want %d", tt.n, c, tt.crit+1)
		}
		if cov < 0.95 || cov > 0.99 {
			t.Errorf("n=%d: coverage %v outside [0.95, 0.99]", tt.n, cov)
		}
	}
	// n = 10 exactly: P(T <= 8) = 25/1024.
	if _, cov := signedRankIndex(10, 0.95); math.Abs(cov-(1-2*25.0/1024)) > 1e-12 {
		t.Errorf("n=10 coverage %v, want %v", cov, 1-2*25.0/1024)
	}
}

func TestWilcoxonTooFew(t *testing.T) {
	// n = 5: even (min, max) of the Walsh averages covers only 1 - 2/32.
	ci := WilcoxonCI([]float64{5, 1, 4, 2, 3}, 0.95)
	if ci.Low != 1 || ci.High != 5 || ci.Coverage != 1-2.0/32 || ci.N != 5 {
		t.Errorf("n=5: %+v", ci)
	}
	one := WilcoxonCI([]float64{0.3}, 0.95)
	if one.Median != 0.3 || one.Low != 0.3 || one.High != 0.3 || one.Coverage != 0 {
		t.Errorf("n=1: %+v", one)
	}
	none := WilcoxonCI(nil, 0.95)
	if !math.IsNaN(none.Median) || !math.IsNaN(none.Low) || !math.IsNaN(none.Coverage) || none.N != 0 {
		t.Errorf("n=0: %+v", none)
	}
}

func TestHodgesLehmann(t *testing.T) {
	// Walsh averages of {1, 2, 3}: 1, 1.5, 2, 2, 2.5, 3; median 2.
	if got := HodgesLehmann([]float64{3, 1, 2}); got != 2 {
		t.Errorf("HL = %v, want 2", got)
	}
	// One wild value moves the HL estimate by a fraction of what it moves
	// the mean.
	xs := []float64{0, 0.01, -0.01, 0.02, -0.02, 0.015, -0.015, 5}
	if got := HodgesLehmann(xs); got > 0.05 {
		t.Errorf("HL with one outlier = %v, want < 0.05", got)
	}
	if !math.IsNaN(HodgesLehmann(nil)) {
		t.Error("HL of nothing is not NaN")
	}
}

func TestWilcoxonNormalApproximationJoinsExact(t *testing.T) {
	// At the switch from the exact distribution to the approximation the
	// chosen rank must not jump: compare both at the largest exact n.
	n := exactWilcoxonMax
	exactC, exactCov := signedRankIndex(n, 0.95)
	m := n * (n + 1) / 2
	mean := float64(m) / 2
	sd := math.Sqrt(float64(n) * float64(n+1) * float64(2*n+1) / 24)
	approxC := int(math.Floor(mean + normalQuantile(0.025)*sd + 0.5))
	if d := exactC - approxC; d < -3 || d > 3 {
		t.Errorf("n=%d: exact c %d, normal approximation %d", n, exactC, approxC)
	}
	c, cov := signedRankIndex(n+1, 0.95)
	if c <= exactC || math.Abs(cov-exactCov) > 0.002 {
		t.Errorf("n=%d: c %d coverage %v after exact c %d coverage %v", n+1, c, cov, exactC, exactCov)
	}
}

func TestWilcoxonCoverageOnSymmetricData(t *testing.T) {
	// Empirical coverage on distributions with a known centre, heavy tails
	// included: it must reach the promised coverage up to the simulation's
	// own error (3 standard errors at 2000 trials is about 1.5 points).
	dists := map[string]func(*rand.Rand) float64{
		"normal":  func(r *rand.Rand) float64 { return r.NormFloat64() },
		"laplace": func(r *rand.Rand) float64 { return r.ExpFloat64() * float64(1-2*r.IntN(2)) },
		"t3": func(r *rand.Rand) float64 {
			z := r.NormFloat64()
			c := 0.0
			for range 3 {
				g := r.NormFloat64()
				c += g * g
			}
			return z / math.Sqrt(c/3)
		},
	}
	const centre = 0.07
	for name, draw := range dists {
		for _, n := range []int{6, 10, 16, 30, 250} {
			t.Run(fmt.Sprintf("%s/n=%d", name, n), func(t *testing.T) {
				// Fewer trials for the large n: each one sorts 31k Walsh
				// averages. 3 standard errors: 1.5 points at 2000, 3.3 at 400.
				trials, slack := 2000, 0.015
				if n > 100 {
					trials, slack = 400, 0.033
				}
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				hit := 0
				var promised float64
				for range trials {
					xs := make([]float64, n)
					for i := range xs {
						xs[i] = centre + 0.1*draw(rng)
					}
					ci := WilcoxonCI(xs, 0.95)
					promised = ci.Coverage
					if ci.Low <= centre && centre <= ci.High {
						hit++
					}
				}
				got := float64(hit) / float64(trials)
				if got < promised-slack {
					t.Errorf("coverage %.3f, promised %.3f", got, promised)
				}
			})
		}
	}
}

func TestWilcoxonNarrowerThanSignTest(t *testing.T) {
	// The reason for the choice: on the same normal data the signed-rank
	// interval is clearly narrower than the sign-test interval.
	rng := rand.New(rand.NewPCG(1, 2))
	var w, s float64
	for range 500 {
		xs := make([]float64, 16)
		for i := range xs {
			xs[i] = rng.NormFloat64()
		}
		wc, sc := WilcoxonCI(xs, 0.95), MedianCI(xs, 0.95)
		w += wc.High - wc.Low
		s += sc.High - sc.Low
	}
	if w >= 0.9*s {
		t.Errorf("mean width: signed-rank %.3f, sign test %.3f", w/500, s/500)
	}
}
