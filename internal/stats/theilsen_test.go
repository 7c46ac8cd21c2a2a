package stats

import (
	"math"
	"testing"
)

func TestTheilSen(t *testing.T) {
	// y = 2x + 1 with one wild point: least squares would tilt, the median
	// of pairwise slopes does not.
	x := []float64{1, 1, 16, 16, 64, 64, 64}
	y := []float64{3, 3, 33, 33, 129, 129, 1000}
	s, ok := TheilSen(x, y)
	if !ok || math.Abs(s-2) > 1e-9 {
		t.Errorf("TheilSen = %v, %v; want 2, true", s, ok)
	}
	if _, ok := TheilSen([]float64{4, 4}, []float64{1, 2}); ok {
		t.Error("TheilSen with a single x value: ok, want false")
	}
	if _, ok := TheilSen(nil, nil); ok {
		t.Error("TheilSen without points: ok, want false")
	}
}
