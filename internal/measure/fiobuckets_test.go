package measure

import "testing"

// TestFioBucket: small latencies are their own bucket, larger ones fall in
// a bucket within 1/128 of them, and every latency of a bucket maps to the
// bucket's own value, as fio's histograms do. The bucket values below are
// keys of a real fio 3.33 json+ histogram (2448, 2480: a 4 KiB write job).
func TestFioBucket(t *testing.T) {
	for _, c := range []struct{ ns, want int64 }{
		{0, 0}, {-5, 0}, {1, 1}, {127, 127}, {128, 129}, {129, 129}, {130, 131},
		{2432, 2448}, {2448, 2448}, {2463, 2448}, {2464, 2480},
		{1000, 1004}, {1 << 20, 1<<20 + 1<<13},
	} {
		if got := FioBucket(c.ns); got != c.want {
			t.Errorf("FioBucket(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
	for ns := int64(1); ns < 1<<34; ns = ns*3/2 + 1 {
		b := FioBucket(ns)
		if d := float64(b-ns) / float64(ns); d > 1.0/128 || d < -1.0/128 {
			t.Errorf("FioBucket(%d) = %d: %.4f off", ns, b, d)
		}
		if FioBucket(b) != b {
			t.Errorf("FioBucket(FioBucket(%d)) = %d, want %d", ns, FioBucket(b), b)
		}
	}
}
