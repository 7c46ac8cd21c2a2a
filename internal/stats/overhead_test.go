package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// noisy returns n host values around base and target values that are
// factor·host with multiplicative per-round noise, as rounds on a real host
// would look: host load varies a lot between rounds, the paired ratio less.
func noisy(rng *rand.Rand, n int, base, factor, noise float64) (host, target []float64) {
	host = make([]float64, n)
	target = make([]float64, n)
	for i := range host {
		host[i] = base * math.Exp(0.3*rng.NormFloat64())
		target[i] = factor * host[i] * math.Exp(noise*rng.NormFloat64())
	}
	return host, target
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestPairedOverheadDirection(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	tests := []struct {
		name      string
		factor    float64
		dir       Direction
		wantRatio float64
		wantPct   float64
	}{
		{"iops 10% lower is 10% slower", 0.9, HigherIsBetter, 0.1, 90},
		{"iops 10% higher is faster", 1.1, HigherIsBetter, -0.1, 110},
		{"latency 25% higher is 25% slower", 1.25, LowerIsBetter, 0.25, 80},
		{"latency 20% lower is faster", 0.8, LowerIsBetter, -0.2, 125},
		{"identical throughput", 1, HigherIsBetter, 0, 100},
		{"identical latency", 1, LowerIsBetter, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Exact factor: every pair has the same ratio, so the
			// interval collapses onto it.
			host, _ := noisy(rng, 12, 1000, 1, 0)
			target := make([]float64, len(host))
			for i, h := range host {
				target[i] = tt.factor * h
			}
			o := PairedOverhead(host, target, tt.dir, 0.95)
			if !near(o.Ratio, tt.wantRatio, 1e-9) || !near(o.PercentOfHost, tt.wantPct, 1e-7) {
				t.Errorf("Ratio = %v, PercentOfHost = %v; want %v, %v", o.Ratio, o.PercentOfHost, tt.wantRatio, tt.wantPct)
			}
			if !near(o.CILow, o.Ratio, 1e-9) || !near(o.CIHigh, o.Ratio, 1e-9) {
				t.Errorf("CI [%v, %v] should collapse onto %v", o.CILow, o.CIHigh, o.Ratio)
			}
			if math.Signbit(o.Ratio) && o.Ratio == 0 {
				t.Errorf("Ratio is -0, want +0 (it would print as -0 in JSON)")
			}
			if o.N != 12 || o.Coverage < 0.95 {
				t.Errorf("N = %d, Coverage = %v; want 12, >= 0.95", o.N, o.Coverage)
			}

			// Noisy version: the estimate moves but keeps its sign and
			// the interval brackets the true value.
			host, target = noisy(rng, 40, 1000, tt.factor, 0.02)
			o = PairedOverhead(host, target, tt.dir, 0.95)
			if !near(o.Ratio, tt.wantRatio, 0.02) {
				t.Errorf("noisy: Ratio = %v, want about %v", o.Ratio, tt.wantRatio)
			}
			if !(o.CILow <= o.Ratio && o.Ratio <= o.CIHigh) || !(o.PercentLow <= o.PercentOfHost && o.PercentOfHost <= o.PercentHigh) {
				t.Errorf("noisy: bounds out of order: %+v", o)
			}
			if !(o.CILow-0.005 <= tt.wantRatio && tt.wantRatio <= o.CIHigh+0.005) {
				t.Errorf("noisy: CI [%v, %v] misses true overhead %v", o.CILow, o.CIHigh, tt.wantRatio)
			}
		})
	}
}

// TestPairedOverheadMatchesLogCI checks the mapping from the interval of the
// log ratios to the overhead and percentage bounds, computed here directly.
func TestPairedOverheadMatchesLogCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	host, target := noisy(rng, 15, 500, 0.85, 0.1)
	logs := make([]float64, len(host))
	for i := range host {
		logs[i] = math.Log(target[i] / host[i])
	}
	ci := WilcoxonCI(logs, 0.95)
	if ci.Low == ci.High {
		t.Fatalf("test needs a non-degenerate interval, got %+v", ci)
	}
	const tol = 1e-12

	hb := PairedOverhead(host, target, HigherIsBetter, 0.95)
	wantHB := Overhead{
		Ratio: 1 - math.Exp(ci.Median), CILow: 1 - math.Exp(ci.High), CIHigh: 1 - math.Exp(ci.Low),
		PercentOfHost: 100 * math.Exp(ci.Median), PercentLow: 100 * math.Exp(ci.Low), PercentHigh: 100 * math.Exp(ci.High),
		N: ci.N, Coverage: ci.Coverage,
	}
	checkOverhead(t, "HigherIsBetter", hb, wantHB, tol)

	lb := PairedOverhead(host, target, LowerIsBetter, 0.95)
	wantLB := Overhead{
		Ratio: math.Exp(ci.Median) - 1, CILow: math.Exp(ci.Low) - 1, CIHigh: math.Exp(ci.High) - 1,
		PercentOfHost: 100 * math.Exp(-ci.Median), PercentLow: 100 * math.Exp(-ci.High), PercentHigh: 100 * math.Exp(-ci.Low),
		N: ci.N, Coverage: ci.Coverage,
	}
	checkOverhead(t, "LowerIsBetter", lb, wantLB, tol)
	if !(lb.PercentLow < lb.PercentHigh && lb.CILow < lb.CIHigh && hb.PercentLow < hb.PercentHigh && hb.CILow < hb.CIHigh) {
		t.Errorf("bounds not ordered: %+v, %+v", hb, lb)
	}
}

func checkOverhead(t *testing.T, name string, got, want Overhead, tol float64) {
	t.Helper()
	pairs := []struct {
		field     string
		got, want float64
	}{
		{"Ratio", got.Ratio, want.Ratio}, {"CILow", got.CILow, want.CILow}, {"CIHigh", got.CIHigh, want.CIHigh},
		{"PercentOfHost", got.PercentOfHost, want.PercentOfHost},
		{"PercentLow", got.PercentLow, want.PercentLow}, {"PercentHigh", got.PercentHigh, want.PercentHigh},
	}
	for _, p := range pairs {
		if !near(p.got, p.want, tol*math.Max(1, math.Abs(p.want))) {
			t.Errorf("%s: %s = %v, want %v", name, p.field, p.got, p.want)
		}
	}
	if got.N != want.N || got.Coverage != want.Coverage {
		t.Errorf("%s: N, Coverage = %d, %v; want %d, %v", name, got.N, got.Coverage, want.N, want.Coverage)
	}
}

func TestPairedOverheadDropsInvalidPairs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	host := []float64{100, 100, nan, 100, 0, 100, 100, -1, 100, 100, inf, 100}
	target := []float64{90, 90, 90, nan, 90, 0, 90, 90, inf, 90, 90, 90}
	// Valid pairs: indexes 0, 1, 6, 9, 11 -> 5 pairs, all 0.9.
	o := PairedOverhead(host, target, HigherIsBetter, 0.95)
	if o.N != 5 {
		t.Errorf("N = %d, want 5 valid pairs", o.N)
	}
	if !near(o.Ratio, 0.1, 1e-12) {
		t.Errorf("Ratio = %v, want 0.1: an invalid pair leaked in", o.Ratio)
	}
	if want := 1 - 2*math.Pow(0.5, 5); o.Coverage != want {
		t.Errorf("Coverage = %v, want %v for 5 pairs (below 0.95)", o.Coverage, want)
	}
}

func TestPairedOverheadNoPairs(t *testing.T) {
	for _, in := range [][2][]float64{
		{nil, nil},
		{{math.NaN(), 0}, {1, 1}},
	} {
		o := PairedOverhead(in[0], in[1], LowerIsBetter, 0.95)
		for name, v := range map[string]float64{
			"Ratio": o.Ratio, "CILow": o.CILow, "CIHigh": o.CIHigh, "PercentOfHost": o.PercentOfHost,
			"PercentLow": o.PercentLow, "PercentHigh": o.PercentHigh,
		} {
			if !math.IsNaN(v) {
				t.Errorf("PairedOverhead(%v, %v): %s = %v, want NaN", in[0], in[1], name, v)
			}
		}
		if o.N != 0 {
			t.Errorf("N = %d, want 0", o.N)
		}
	}
}

// TestPairedOverheadUsesPairing shows why pairing matters: the host varies a
// lot between rounds, the target is always 10% slower in the same round.
// Pairing recovers exactly 10% with a tight interval; an unpaired comparison
// of medians could not (and the shuffled pairing below does not).
func TestPairedOverheadUsesPairing(t *testing.T) {
	host := []float64{100, 400, 50, 900, 120, 300, 700, 60, 250, 80}
	target := make([]float64, len(host))
	for i, h := range host {
		target[i] = 0.9 * h
	}
	o := PairedOverhead(host, target, HigherIsBetter, 0.95)
	if !near(o.Ratio, 0.1, 1e-12) || !near(o.CIHigh-o.CILow, 0, 1e-12) {
		t.Errorf("paired: %+v, want 0.1 with a zero-width interval", o)
	}
	shifted := append(target[1:len(target):len(target)], target[0])
	o = PairedOverhead(host, shifted, HigherIsBetter, 0.95)
	if o.CIHigh-o.CILow < 0.5 {
		t.Errorf("mispaired rounds gave a tight interval %+v; pairing is not by index", o)
	}
}

func TestPairedOverheadPanics(t *testing.T) {
	cases := map[string]func(){
		"length mismatch": func() { PairedOverhead([]float64{1}, []float64{1, 2}, HigherIsBetter, 0.95) },
		"zero direction":  func() { PairedOverhead([]float64{1}, []float64{1}, Direction(0), 0.95) },
		"bad confidence":  func() { PairedOverhead([]float64{1}, []float64{1}, LowerIsBetter, 1.5) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			f()
		})
	}
}

func TestDirectionString(t *testing.T) {
	if HigherIsBetter.String() == LowerIsBetter.String() || Direction(0).String() == HigherIsBetter.String() {
		t.Errorf("Direction strings not distinct: %v %v %v", HigherIsBetter, LowerIsBetter, Direction(0))
	}
}

func TestFromLogIntervalSignInterval(t *testing.T) {
	// The sign-test interval of the median, as the earlier statistic
	// reported it: the same mapping from log ratios to overheads.
	ci := MedianCI([]float64{math.Log(1.1), math.Log(1.2), math.Log(1.3), math.Log(1.2), math.Log(1.25), math.Log(1.15)}, 0.95)
	lat := FromLogInterval(ci, LowerIsBetter)
	if math.Abs(lat.Ratio-0.2) > 1e-9 || math.Abs(lat.CILow-0.1) > 1e-9 || math.Abs(lat.CIHigh-0.3) > 1e-9 || lat.N != 6 {
		t.Errorf("latency overhead = %+v, want 0.2 in [0.1, 0.3] over 6", lat)
	}
	thr := FromLogInterval(ci, HigherIsBetter)
	if math.Abs(thr.Ratio-(1-1.2)) > 1e-9 || math.Abs(thr.CILow-(1-1.3)) > 1e-9 || math.Abs(thr.CIHigh-(1-1.1)) > 1e-9 {
		t.Errorf("throughput overhead = %+v, want -0.2 in [-0.3, -0.1]", thr)
	}
	defer func() {
		if recover() == nil {
			t.Error("FromLogInterval with the zero Direction did not panic")
		}
	}()
	FromLogInterval(ci, 0)
}
