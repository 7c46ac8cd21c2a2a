package stats

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// ranks returns the sample 1, 2, ..., n shuffled, so that x(k) == k and the
// chosen order statistics can be read off the bounds.
func ranks(n int, rng *rand.Rand) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	rng.Shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs
}

func TestMedianCIKnownCoverage(t *testing.T) {
	// Coverages from the binomial(n, 1/2) distribution by hand:
	// n=6:  1 - 2·1/64 = 0.96875 for (min, max); k=2 would give 1 - 2·7/64 < 0.95.
	// n=9:  1 - 2·(1+9)/512 = 0.9609375; k=3 gives 1 - 2·46/512 = 0.8203125.
	// n=10: 1 - 2·(1+10)/1024 = 0.978515625; k=3 gives 1 - 2·56/1024 = 0.890625.
	// n=5:  (min, max) only reaches 1 - 2/32 = 0.9375 < 0.95.
	tests := []struct {
		n        int
		conf     float64
		wantLow  float64
		wantHigh float64
		wantCov  float64
	}{
		{6, 0.95, 1, 6, 1 - 2.0/64},
		{9, 0.95, 2, 8, 1 - 2*10.0/512},
		{10, 0.95, 2, 9, 1 - 2*11.0/1024},
		{5, 0.95, 1, 5, 1 - 2.0/32},
		{2, 0.95, 1, 2, 0.5},
		{10, 0.80, 3, 8, 1 - 2*56.0/1024},
		// Exactly on the boundary: coverage == confidence is accepted.
		{6, 0.96875, 1, 6, 0.96875},
		{10, 0.978515625, 2, 9, 0.978515625},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d conf=%v", tt.n, tt.conf), func(t *testing.T) {
			got := MedianCI(ranks(tt.n, rng), tt.conf)
			if got.Low != tt.wantLow || got.High != tt.wantHigh || got.Coverage != tt.wantCov || got.N != tt.n {
				t.Errorf("MedianCI = %+v, want [x(%v), x(%v)] coverage %v, N %d",
					got, tt.wantLow, tt.wantHigh, tt.wantCov, tt.n)
			}
			if want := float64(tt.n+1) / 2; got.Median != want {
				t.Errorf("Median = %v, want %v", got.Median, want)
			}
		})
	}
}

func TestMedianCIEdgeCases(t *testing.T) {
	empty := MedianCI(nil, 0.95)
	if !math.IsNaN(empty.Median) || !math.IsNaN(empty.Low) || !math.IsNaN(empty.High) || empty.N != 0 {
		t.Errorf("MedianCI(nil) = %+v, want NaN bounds and N 0", empty)
	}
	one := MedianCI([]float64{4.2}, 0.95)
	if one.Median != 4.2 || one.Low != 4.2 || one.High != 4.2 || one.N != 1 || one.Coverage != 0 {
		t.Errorf("MedianCI([4.2]) = %+v, want all bounds 4.2, N 1, coverage 0", one)
	}
	for _, c := range []float64{0, 1, -0.5, 95, math.NaN()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MedianCI with confidence %v did not panic", c)
				}
			}()
			MedianCI([]float64{1, 2, 3}, c)
		}()
	}
}

// exactTail returns P(B <= j) for B ~ binomial(n, 1/2) as a big.Rat, summing
// the coefficients independently of the implementation under test
// (big.Int.Binomial rather than the multiplicative recurrence).
func exactTail(n, j int) *big.Rat {
	sum := new(big.Int)
	for i := 0; i <= j; i++ {
		sum.Add(sum, new(big.Int).Binomial(int64(n), int64(i)))
	}
	return new(big.Rat).SetFrac(sum, new(big.Int).Lsh(big.NewInt(1), uint(n)))
}

// TestMedianCIIsNarrowestValid checks the choice of k against the definition
// for every n up to 80 and several confidences: the chosen interval reaches
// the confidence, the next narrower one does not, and Coverage is exact.
func TestMedianCIIsNarrowestValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, conf := range []float64{0.5, 0.8, 0.9, 0.95, 0.99} {
		minN := MinN(conf)
		for n := 1; n <= 80; n++ {
			got := MedianCI(ranks(n, rng), conf)
			k := int(got.Low)
			if int(got.High) != n+1-k {
				t.Fatalf("n=%d conf=%v: interval [x(%v), x(%v)] is not symmetric", n, conf, got.Low, got.High)
			}
			cov := func(k int) float64 {
				tail := exactTail(n, k-1)
				f, _ := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).Mul(big.NewRat(2, 1), tail)).Float64()
				return f
			}
			if want := cov(k); got.Coverage != want {
				t.Errorf("n=%d conf=%v: Coverage = %v, want %v for k=%d", n, conf, got.Coverage, want, k)
			}
			if n < minN {
				if k != 1 || got.Coverage >= conf {
					t.Errorf("n=%d < MinN=%d conf=%v: got k=%d coverage %v, want (min, max) below confidence",
						n, minN, conf, k, got.Coverage)
				}
				continue
			}
			if got.Coverage < conf {
				t.Errorf("n=%d conf=%v: coverage %v below confidence", n, conf, got.Coverage)
			}
			if narrower := k + 1; narrower <= (n+1)/2 && cov(narrower) >= conf {
				t.Errorf("n=%d conf=%v: chose k=%d but k=%d also reaches %v", n, conf, k, narrower, cov(narrower))
			}
		}
	}
}

func TestMinN(t *testing.T) {
	for _, conf := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
		n := MinN(conf)
		if 1-2*math.Pow(0.5, float64(n)) < conf {
			t.Errorf("MinN(%v) = %d, but (min, max) of %d only covers %v", conf, n, n, 1-2*math.Pow(0.5, float64(n)))
		}
		if n > 1 && 1-2*math.Pow(0.5, float64(n-1)) >= conf {
			t.Errorf("MinN(%v) = %d, but %d already suffices", conf, n, n-1)
		}
	}
	if got := MinN(0.95); got != 6 {
		t.Errorf("MinN(0.95) = %d, want 6 (benchstat's documented minimum)", got)
	}
}

// TestMedianCIProperties checks invariants on random samples with ties and
// heavy tails.
func TestMedianCIProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(60)
		xs := make([]float64, n)
		for i := range xs {
			switch trial % 3 {
			case 0:
				xs[i] = rng.NormFloat64()
			case 1:
				xs[i] = math.Exp(3 * rng.NormFloat64()) // heavy right tail
			default:
				xs[i] = float64(rng.IntN(4)) // many ties
			}
		}
		in := slices.Clone(xs)
		ci := MedianCI(xs, 0.95)
		if !slices.Equal(in, xs) {
			t.Fatalf("MedianCI modified its input")
		}
		if !(ci.Low <= ci.Median && ci.Median <= ci.High) {
			t.Fatalf("MedianCI(%v) = %+v: want Low <= Median <= High", xs, ci)
		}
		if ci.Median != Median(xs) {
			t.Fatalf("MedianCI median %v != Median %v", ci.Median, Median(xs))
		}
		if !slices.Contains(xs, ci.Low) || !slices.Contains(xs, ci.High) {
			t.Fatalf("bounds %v, %v are not sample values of %v", ci.Low, ci.High, xs)
		}
		if ci.N != n || ci.Coverage < 0 || ci.Coverage >= 1 {
			t.Fatalf("MedianCI = %+v for n=%d", ci, n)
		}
		if n >= MinN(0.95) && ci.Coverage < 0.95 {
			t.Fatalf("n=%d: coverage %v < 0.95", n, ci.Coverage)
		}
	}
}

// TestMedianCIEmpiricalCoverage draws many samples from distributions with a
// known median and counts how often the interval contains it. For continuous
// distributions the exact coverage is Coverage, so the empirical rate must
// be close to it (within about 5 binomial standard errors) and therefore at
// least the nominal confidence minus that tolerance.
func TestMedianCIEmpiricalCoverage(t *testing.T) {
	const trials = 4000
	dists := []struct {
		name   string
		draw   func(*rand.Rand) float64
		median float64
	}{
		{"normal", func(r *rand.Rand) float64 { return 5 + 2*r.NormFloat64() }, 5},
		{"exponential", func(r *rand.Rand) float64 { return r.ExpFloat64() }, math.Ln2},
		{"lognormal", func(r *rand.Rand) float64 { return math.Exp(1.5 * r.NormFloat64()) }, 1},
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, d := range dists {
		for _, n := range []int{5, 6, 9, 10, 20, 50} {
			t.Run(fmt.Sprintf("%s/n=%d", d.name, n), func(t *testing.T) {
				var hits int
				var cov float64
				xs := make([]float64, n)
				for range trials {
					for i := range xs {
						xs[i] = d.draw(rng)
					}
					ci := MedianCI(xs, 0.95)
					cov = ci.Coverage // depends on n only
					if ci.Low <= d.median && d.median <= ci.High {
						hits++
					}
				}
				emp := float64(hits) / trials
				tol := 5 * math.Sqrt(cov*(1-cov)/trials)
				if math.Abs(emp-cov) > tol {
					t.Errorf("empirical coverage %v, want %v ± %v", emp, cov, tol)
				}
				if n >= MinN(0.95) && emp < 0.95-tol {
					t.Errorf("empirical coverage %v below nominal 0.95 - %v", emp, tol)
				}
			})
		}
	}
}

// TestMedianCILargeN checks that big samples neither overflow nor lose the
// interval: for large n the rank k is close to the normal approximation
// n/2 - z·√n/2 with z = 1.96.
func TestMedianCILargeN(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1000, 3000, 5000} {
		ci := MedianCI(ranks(n, rng), 0.95)
		if ci.Coverage < 0.95 || ci.Coverage > 0.96 {
			t.Errorf("n=%d: coverage %v, want in [0.95, 0.96]", n, ci.Coverage)
		}
		approx := float64(n)/2 - 1.96*math.Sqrt(float64(n))/2
		if math.Abs(ci.Low-approx) > 3 {
			t.Errorf("n=%d: k = %v, want about %.1f", n, ci.Low, approx)
		}
		if float64(n+1)-ci.Low != ci.High {
			t.Errorf("n=%d: [%v, %v] not symmetric", n, ci.Low, ci.High)
		}
	}
}
