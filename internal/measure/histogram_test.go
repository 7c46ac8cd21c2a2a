package measure_test

import (
	"math"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

func TestHistogramQuantile(t *testing.T) {
	// 100 samples: 90 at 1 µs, 9 at 2 µs, 1 at 10 µs. fio's rule: the
	// first bucket whose cumulative count reaches q·total.
	h := measure.NewHistogram(map[int64]uint64{1000: 90, 2000: 9, 10000: 1, -5: 3, 7: 0})
	if h.Total() != 100 || len(h.NS) != 3 {
		t.Fatalf("histogram %+v: want 3 buckets, 100 samples (bad bins dropped)", h)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 1e-6}, {0.9, 1e-6}, {0.91, 2e-6}, {0.99, 2e-6}, {0.995, 10e-6}, {1, 10e-6}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	for _, q := range []float64{0, -1, 1.5, math.NaN()} {
		if !math.IsNaN(h.Quantile(q)) {
			t.Errorf("Quantile(%v) is not NaN", q)
		}
	}
	if !math.IsNaN((measure.Histogram{}).Quantile(0.5)) || !(measure.Histogram{}).Empty() {
		t.Error("the empty histogram has a quantile")
	}
}

func TestMergeHistograms(t *testing.T) {
	// The pooled p99 is not the mean of the parts' p99s: one part's tail
	// is 1% of the pool.
	a := measure.NewHistogram(map[int64]uint64{100: 990, 200: 10})
	b := measure.NewHistogram(map[int64]uint64{100: 500, 5000: 500})
	m := measure.MergeHistograms(a, b)
	if m.Total() != 2000 || m.Quantile(0.5) != 100e-9 || m.Quantile(0.99) != 5000e-9 {
		t.Errorf("merged %+v: p50 %v p99 %v", m, m.Quantile(0.5), m.Quantile(0.99))
	}
	if e := measure.MergeHistograms(); !e.Empty() {
		t.Errorf("merge of nothing = %+v", e)
	}
}
