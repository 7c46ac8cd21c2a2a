package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"one", []float64{3}, 3},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even takes mean of middle pair", []float64{4, 1, 3, 2}, 2.5},
		{"duplicates", []float64{2, 2, 2, 9}, 2},
		{"negative", []float64{-1, -5, -3}, -3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
			if !slices.Equal(in, tt.xs) {
				t.Errorf("Median modified its input: %v, was %v", in, tt.xs)
			}
		})
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

// TestMedianSplitsSample checks the defining property on random samples:
// at most half the values lie strictly on either side of the median.
func TestMedianSplitsSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 500; trial++ {
		xs := make([]float64, 1+rng.IntN(40))
		for i := range xs {
			xs[i] = float64(rng.IntN(10)) // ties on purpose
		}
		m := Median(xs)
		var below, above int
		for _, x := range xs {
			if x < m {
				below++
			} else if x > m {
				above++
			}
		}
		if 2*below > len(xs) || 2*above > len(xs) {
			t.Fatalf("Median(%v) = %v: %d below, %d above", xs, m, below, above)
		}
	}
}

func TestMAD(t *testing.T) {
	// median 3; deviations 2 1 0 1 97 -> median 1. The outlier does not matter.
	xs := []float64{1, 2, 3, 4, 100}
	if got := MAD(xs); got != 1 {
		t.Errorf("MAD(%v) = %v, want 1", xs, got)
	}
	if got, want := RobustSigma(xs), MADScale*1; got != want {
		t.Errorf("RobustSigma(%v) = %v, want %v", xs, got, want)
	}
	if got := MAD(nil); !math.IsNaN(got) {
		t.Errorf("MAD(nil) = %v, want NaN", got)
	}
	if got := MAD([]float64{7, 7, 7}); got != 0 {
		t.Errorf("MAD of constant sample = %v, want 0", got)
	}
}

// TestRobustSigmaNormal checks that 1.4826·MAD estimates σ for normal data,
// which is what the regression detector relies on.
func TestRobustSigmaNormal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const sigma = 2.5
	xs := make([]float64, 20000)
	for i := range xs {
		xs[i] = 10 + sigma*rng.NormFloat64()
	}
	if got := RobustSigma(xs); math.Abs(got-sigma) > 0.05*sigma {
		t.Errorf("RobustSigma of N(10, %v²) sample = %v, want within 5%% of %v", sigma, got, sigma)
	}
}
