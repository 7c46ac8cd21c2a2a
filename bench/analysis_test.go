//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// The unit tests of the benchmark's own arithmetic: no daemon, no fio
// (go test -tags bench -run 'Unit' . in bench/).

// syntheticRun is a run document of host, container and bind with the
// given rounds; old puts every workload in every round (the earlier method),
// otherwise a round runs one workload. The container is 10% slower than host
// in every headline metric, with noise.
func syntheticRun(rounds int, old bool, seed uint64) *report.Run {
	rng := rand.New(rand.NewPCG(seed, 1))
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	run := &report.Run{SchemaVersion: 2, Profile: "quick", StartedAt: start, Rounds: rounds}
	e := report.Engine{Name: "default", LayoutBytes: 80 << 20}
	at := start
	add := func(round int, w measure.Workload) {
		for i, t := range []measure.Target{"host", "container", "bind"} {
			f := math.Exp(0.1 * rng.NormFloat64())
			slow := map[measure.Target]float64{"host": 1, "container": 1.1, "bind": 1}[t] * f
			jr := measure.JobResult{Workload: w, BytesWritten: 8 << 20}
			jr.Write = measure.Op{IOPS: 1000 / slow, BandwidthBytes: 1e9 / slow, LatencyP50Sec: 1e-4 * slow, LatencyP99Sec: 1e-3 * slow}
			jr.Sync = measure.Op{LatencyP99Sec: math.NaN()}
			if w == measure.Fsync {
				jr.Sync.LatencyP99Sec = 2e-3 * slow
			}
			if round == 3 && t == "bind" {
				jr = measure.JobResult{Workload: w, Failure: &measure.Failure{Reason: measure.ReasonTimeout, Message: "killed"}}
			}
			e.Samples = append(e.Samples, measure.Sample{Round: round, Order: i + 1, Target: t, StartedAt: at, DurationSeconds: 0.5, JobResult: jr})
			at = at.Add(600 * time.Millisecond)
		}
	}
	n := 0
	for r := 1; r <= rounds; r++ {
		// The data-path workloads, which both methods measure.
		for _, w := range []measure.Workload{measure.SeqWrite, measure.RandWrite, measure.Fsync} {
			if old {
				add(r, w)
			} else {
				n++
				add(n, w)
			}
		}
	}
	e.Rounds = n
	if old {
		e.Rounds = 0
		e.LayoutBytes = 0
	}
	e.Results = measure.Summarize(e.Samples, confidence)
	if old {
		// The earlier method reported the median with the sign-test
		// interval.
		for i, r := range e.Results {
			if r.Target == "host" {
				continue
			}
			var logs []float64
			for _, o := range roundsOf(0, e.Samples) {
				if o.Target == string(r.Target) && o.Workload == string(r.Workload) {
					logs = append(logs, math.Log(o.Value/o.Host))
				}
			}
			m := headlineOf(string(r.Workload))
			so := stats.FromLogInterval(stats.MedianCI(logs, confidence), measure.MetricDirection(m))
			e.Results[i].Overhead[m] = measure.Overhead{Ratio: so.Ratio, CILow: so.CILow, CIHigh: so.CIHigh, N: so.N}
		}
	}
	for _, s := range e.Samples {
		e.BytesWritten += s.BytesWritten
	}
	e.BytesWritten += e.LayoutBytes
	run.BytesWritten = e.BytesWritten
	run.Engines = []report.Engine{e}
	return run
}

func TestUnitRunDocReproducesTheRun(t *testing.T) {
	for _, old := range []bool{false, true} {
		binary := map[bool]string{false: "new", true: "old"}[old]
		run := syntheticRun(12, old, 7)
		d := docOf(binary, []string{"run"}, "", nil, run)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back runDoc
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := checkRecorded(&back); err != nil {
			t.Errorf("%s: %v", binary, err)
		}
		// Only this tree's binary lays out bind's files apart from the
		// host's; the old binary's runs, like those recorded before the
		// field, read as shared.
		if back.BindOwnFiles != !old {
			t.Errorf("%s: bind_own_files %v after a round trip", binary, back.BindOwnFiles)
		}
		if len(back.Reported) != 6 {
			t.Errorf("%s: %d reported estimates, want 6 (container and bind, three workloads)", binary, len(back.Reported))
		}
		// A change to the recorded figures must show.
		back.Executions[1].V[4] *= 3
		back.Executions[1].V[0] /= 3
		if old {
			back.Executions[4].V[1] /= 3
		}
		for i := range back.Executions {
			if back.Executions[i].Target == "container" && back.Executions[i].Round <= 6 {
				for k := range back.Executions[i].V {
					back.Executions[i].V[k] *= 5
				}
			}
		}
		if err := checkRecorded(&back); err == nil {
			t.Errorf("%s: changed executions still reproduce the run", binary)
		}
	}
}

func TestUnitFnumNull(t *testing.T) {
	b, err := json.Marshal([]fnum{fnum(math.NaN()), fnum(math.Inf(1)), 1.5, 123456789})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "[null,null,1.5,1.234568e+08]" {
		t.Errorf("encoded %s", b)
	}
	var back []fnum
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back[0])) || back[2] != 1.5 {
		t.Errorf("decoded %v", back)
	}
}

func TestUnitPrecisionCurve(t *testing.T) {
	for _, old := range []bool{false, true} {
		binary := map[bool]string{false: "new", true: "old"}[old]
		run := syntheticRun(30, old, 3)
		d := docOf(binary, nil, "", nil, run)
		c := precisionCurve(d, "container", "fsync")
		if len(c) != 30-stats.MinN(confidence)+1 || c[0].Rounds != stats.MinN(confidence) {
			t.Fatalf("%s: %d points from %d rounds, want %d from round 6", binary, len(c), c[0].Rounds, 25)
		}
		for i := 1; i < len(c); i++ {
			if c[i].Bytes <= c[i-1].Bytes {
				t.Errorf("%s: bytes not increasing at %d: %d after %d", binary, i, c[i].Bytes, c[i-1].Bytes)
			}
		}
		// Every round writes 3 executions of 8 MiB but for the failed
		// ones in round 3 (one workload of it, or all three in an earlier
		// method's round); the adaptive run's fsync round k is its 3k-th
		// round overall, after the layout.
		k := c[len(c)-1]
		failed := map[bool]int{false: 1, true: 3}[old]
		want := int64((k.Rounds*3*3-failed)*8<<20) + d.LayoutBytes
		if k.Bytes != want {
			t.Errorf("%s: %d bytes after %d rounds, want %d", binary, k.Bytes, k.Rounds, want)
		}
		// The full curve's last point is the run's own estimate.
		e, _ := estimateOf(d, "container", "fsync")
		if math.Abs(k.HW-e.halfWidthPP()) > 1e-9 {
			t.Errorf("%s: last point ±%.3f pp, the run's estimate ±%.3f pp", binary, k.HW, e.halfWidthPP())
		}
		if c[0].HW <= k.HW {
			t.Errorf("%s: 6 rounds ±%.2f pp not wider than 30 rounds ±%.2f pp", binary, c[0].HW, k.HW)
		}
	}
}

func TestUnitShareOf(t *testing.T) {
	// Clopper–Pearson for 0 of 10: the upper bound solves (1-p)^10 = 0.025.
	s := shareOf(0, 10)
	if s.Low != 0 || math.Abs(s.High-(1-math.Pow(0.025, 0.1))) > 1e-9 {
		t.Errorf("0/10: [%v, %v]", s.Low, s.High)
	}
	s = shareOf(10, 10)
	if s.High != 1 || math.Abs(s.Low-math.Pow(0.025, 0.1)) > 1e-9 {
		t.Errorf("10/10: [%v, %v]", s.Low, s.High)
	}
	s = shareOf(37, 40)
	if !(s.Low < 0.925 && 0.925 < s.High) || s.Low < 0.75 || s.High > 0.99 {
		t.Errorf("37/40: [%v, %v]", s.Low, s.High)
	}
	if !math.IsNaN(shareOf(0, 0).value()) || shareOf(0, 0).String() != "–" {
		t.Error("0/0 is not undefined")
	}
}

func TestUnitWidening(t *testing.T) {
	es := []est{{Ratio: 0.1, Low: 0.05, High: 0.15}, {Ratio: -0.1, Low: -0.2, High: 0}, {Ratio: 0.02, Low: -0.01, High: 0.04}}
	// Distances to 0 over the half-width on 0's side: 2, 1 (on the
	// bound), 0.67; the 93% quantile of three is the largest.
	if f := widening(es, func(int) float64 { return 0 }, 0.93); math.Abs(f-2) > 1e-9 {
		t.Errorf("widening %v, want 2", f)
	}
	if f := widening(es, func(int) float64 { return 0 }, 0.5); math.Abs(f-1) > 1e-9 {
		t.Errorf("median widening %v, want 1", f)
	}
	if f := widening(es, func(int) float64 { return 0 }, 0.2); math.Abs(f-2.0/3) > 1e-9 {
		t.Errorf("20%% widening %v, want 2/3", f)
	}
}

func normalSources(rng *rand.Rand, sigma float64, n, per int) aaSources {
	var src aaSources
	for range n {
		xs := make([]float64, per)
		for i := range xs {
			xs[i] = sigma * rng.NormFloat64()
		}
		src = append(src, xs)
	}
	return src
}

func TestUnitReplay(t *testing.T) {
	p := detectorParams()
	src := normalSources(rand.New(rand.NewPCG(1, 2)), 0.05, 40, 30)
	fa := replayFalseAlarms(p, src, 6, 5, 200, 11)
	if fa.Cycles != 1000 || fa.Rounds != 1200 || fa.Block != 6 {
		t.Fatalf("replay %+v", fa)
	}
	if fa.Confirmations > 1 {
		t.Errorf("%d false confirmations in 1000 cycles of iid N(0, 0.05²) rounds", fa.Confirmations)
	}
	big := replayShift(p, src, 6, 2, 200, 6, 11)
	if big.within(1) < 0.95 {
		t.Errorf("2x flagged within one cycle in %.2f of trials", big.within(1))
	}
	none := replayShift(p, src, 6, 1, 200, 6, 11)
	if none.within(6) > 0.02 {
		t.Errorf("no shift flagged in %.2f of trials", none.within(6))
	}
	for c := 2; c <= 6; c++ {
		if big.within(c) < big.within(c-1) {
			t.Errorf("within(%d) %v below within(%d) %v", c, big.within(c), c-1, big.within(c-1))
		}
	}
}

func TestUnitResamplerBlocksStayInOneSource(t *testing.T) {
	src := aaSources{{1, 2, 3}, {10, 20, 30, 40, 50}}
	rs := newResampler(src, rand.New(rand.NewPCG(3, 4)))
	for range 200 {
		b := rs.block(4)
		inFirst := b[0] < 10
		for i, x := range b {
			if (x < 10) != inFirst {
				t.Fatalf("block %v mixes sources", b)
			}
			if i > 0 && !(x > b[i-1] || (inFirst && x == 1) || (!inFirst && x == 10)) {
				t.Fatalf("block %v is not consecutive (wrapping) rounds", b)
			}
		}
	}
}

func TestUnitSettings(t *testing.T) {
	runs := map[string]int{"overlay2": 40, "btrfs": 12}
	if err := parseRuns("overlay2=10", runs); err != nil || runs["overlay2"] != 10 || runs["btrfs"] != 12 {
		t.Errorf("overlay2=10: %v %v", runs, err)
	}
	if err := parseRuns("7", runs); err != nil || runs["overlay2"] != 7 || runs["btrfs"] != 7 {
		t.Errorf("7: %v %v", runs, err)
	}
	for _, bad := range []string{"0", "zfs=3", "overlay2=", "overlay2=x", "-1"} {
		if err := parseRuns(bad, runs); err == nil || !strings.Contains(err.Error(), "BENCH_COVERAGE_RUNS") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	s := settings{only: map[string]bool{"defaults": true, "btrfs": true, "detection": true}}
	for name, want := range map[string]bool{"defaults-overlay2": true, "old-btrfs": true, "old-overlay2": false,
		"detection": true, "footprint": false} {
		if s.selects(name) != want {
			t.Errorf("BENCH_ONLY=defaults,btrfs,detection selects %s: %v, want %v", name, !want, want)
		}
	}
	s = settings{only: map[string]bool{"cgroupv2": true}}
	if !s.selects("cgroupv2") || s.selects("cgroupv2-before") {
		t.Errorf("BENCH_ONLY=cgroupv2 selects cgroupv2 %v, cgroupv2-before %v; want the first alone", s.selects("cgroupv2"), s.selects("cgroupv2-before"))
	}
}

func TestUnitInterleave(t *testing.T) {
	if got := interleave(40, 6); !slices.Equal(got, []int{4, 11, 17, 24, 31, 37}) {
		t.Errorf("interleave(40, 6) = %v, want the reference runs spread evenly: [4 11 17 24 31 37]", got)
	}
	if got := interleave(40, 0); len(got) != 0 {
		t.Errorf("interleave(40, 0) = %v, want none", got)
	}
	for _, c := range [][2]int{{1, 6}, {2, 2}, {3, 7}, {12, 6}, {5, 1}} {
		got := interleave(c[0], c[1])
		if len(got) != c[1] || !slices.IsSorted(got) || got[0] < 1 || got[len(got)-1] > c[0] {
			t.Errorf("interleave(%d, %d) = %v: want %d sorted places among default runs 1..%d", c[0], c[1], got, c[1], c[0])
		}
	}
	// The reference's runs sample the default runs' hours: their mean
	// place is the default runs' mean place.
	got := interleave(12, 6)
	mean := 0.0
	for _, v := range got {
		mean += float64(v - 1) // starts before run v: after v-1 default runs
	}
	if mean /= float64(len(got)); math.Abs(mean-6) > 0.5 {
		t.Errorf("interleave(12, 6) = %v: mean place %.2f, want about 6 (the middle of the default runs)", got, mean)
	}
}

// A section resumed after 12 default and 1 reference runs of 20 and 6
// (interleave: references before runs 2, 6, 9, 12, 16, 19) first makes the
// references it missed (2 and 3, placed before runs 6 and 9), then goes
// on as a fresh one would; a fresh section makes each just before its run.
func TestUnitDueReferences(t *testing.T) {
	at := interleave(20, 6)
	if !slices.Equal(at, []int{2, 6, 9, 12, 16, 19}) {
		t.Fatalf("interleave(20, 6) = %v", at)
	}
	tried := map[int]bool{}
	var got [][]int
	for i := 13; i <= 20; i++ {
		got = append(got, dueReferences(at, i, 1, tried))
	}
	want := [][]int{{1, 2, 3}, nil, nil, {4}, nil, nil, {5}, nil}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed at default run 13 with 1 reference kept: %v, want %v", got, want)
	}
	tried = map[int]bool{}
	got = nil
	for i := 1; i <= 20; i++ {
		if d := dueReferences(at, i, 0, tried); d != nil {
			got = append(got, []int{i, d[0], len(d)})
		}
	}
	if fmt.Sprint(got) != "[[2 0 1] [6 1 1] [9 2 1] [12 3 1] [16 4 1] [19 5 1]]" {
		t.Errorf("fresh section: (default run, reference, count) %v, want each reference alone before its run", got)
	}
}

func TestUnitReferenceTiming(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	at := func(min ...int) []runDoc {
		var out []runDoc
		for _, m := range min {
			out = append(out, runDoc{StartedAt: t0.Add(time.Duration(m) * time.Minute), Seconds: 120})
		}
		return out
	}
	for _, c := range []struct {
		refs, defaults []runDoc
		want           string
		apart          bool
	}{
		{at(10, 30), at(0, 5, 20, 40), "overlay2: reference 2 runs 27 Nov 03:10–03:32 UTC, default 4 runs 27 Nov 03:00–03:42 UTC, interleaved", false},
		{at(100), at(0, 5), "the reference 1 h 33 min after them", true},
		{at(0), at(100, 200), "the reference 1 h 38 min before them", true},
		{at(0, 300), at(100), "the reference before and after them", true},
		{at(0, 150), at(100, 200), "overlapping in part", true},
		{nil, at(0), "", false},
	} {
		got, apart := referenceTiming(driverResult{Driver: "overlay2", References: c.refs, Defaults: c.defaults})
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("referenceTiming: %q, want it to contain %q", got, c.want)
		}
		if apart != c.apart {
			t.Errorf("referenceTiming %q: apart %v, want %v", got, apart, c.apart)
		}
	}
}

func TestUnitForgetSection(t *testing.T) {
	r := &results{Errors: []string{"reference-btrfs+defaults-btrfs: 1 of 12 default runs failed", "defaults-overlay2: x", "detection: y"},
		SectionSeconds: map[string]float64{"reference-btrfs+defaults-btrfs": 1, "reference-btrfs": 2, "defaults-overlay2": 3},
		Carried:        []carried{{Section: "reference-btrfs"}, {Section: "footprint"}}}
	r.forget("reference-btrfs")
	if len(r.Carried) != 1 || r.carriedOf("footprint") == nil {
		t.Errorf("carried sections after forgetting reference-btrfs: %+v, want footprint's only", r.Carried)
	}
	if !slices.Equal(r.Errors, []string{"defaults-overlay2: x", "detection: y"}) {
		t.Errorf("errors after forgetting reference-btrfs: %q", r.Errors)
	}
	if _, ok := r.SectionSeconds["reference-btrfs+defaults-btrfs"]; ok || len(r.SectionSeconds) != 1 {
		t.Errorf("wall times after forgetting reference-btrfs: %v, want defaults-overlay2's only", r.SectionSeconds)
	}
}

func TestUnitReducedSizes(t *testing.T) {
	full := fullSizes()
	if reduced(&full, fullSizes()) {
		t.Error("the full sizes count as reduced")
	}
	z := fullSizes()
	z.CoverageRuns["btrfs"] = 6
	if !reduced(&z, fullSizes()) {
		t.Error("6 btrfs default runs of 12 do not count as reduced")
	}
	z = fullSizes()
	z.UnperturbedCycles = 15
	if !reduced(&z, fullSizes()) {
		t.Error("15 unperturbed cycles of 100 do not count as reduced")
	}
}

func TestUnitSizesEnvRepeatsSettings(t *testing.T) {
	t.Setenv("BENCH_FLEET_SIZES", "1000x30")
	t.Setenv("BENCH_CGROUPV2_RERUN", "")
	z := settings{only: map[string]bool{"fleet": true}, defaultRuns: map[string]int{"overlay2": 40}}.sizes()
	env := sizesEnv(z)
	if !strings.HasPrefix(env, "BENCH_ONLY=fleet ") || !strings.HasSuffix(env, " BENCH_FLEET_SIZES=1000x30") || strings.Contains(env, "CGROUPV2") {
		t.Errorf("the rerun's command %q does not repeat BENCH_FLEET_SIZES alone", env)
	}
}

func TestUnitReducedReferenceRuns(t *testing.T) {
	z := fullSizes()
	z.ReferenceRuns = 1
	if !reduced(&z, fullSizes()) {
		t.Error("1 reference run of 6 does not count as reduced")
	}
}

// runEst is a run's estimate with a symmetric interval on the signed log
// scale: true value mu plus noise of standard error se.
func runEst(mu, se float64, rng *rand.Rand, workload string) est {
	x := mu + se*rng.NormFloat64()
	h := zOf(confidence) * se
	return est{Ratio: shiftRatio(0, x, workload), Low: shiftRatio(0, x-h, workload), High: shiftRatio(0, x+h, workload), N: 8}
}

// The combined interval covers the truth about as often as it promises,
// both when the runs agree and when each run carries an error of its own
// that its interval does not show (which pooling the rounds would hide).
func TestUnitCombineRunsCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, c := range []struct {
		name    string
		tau     float64 // per-run error the runs' intervals do not show
		runs    int
		atLeast float64
	}{{"runs agree", 0, 6, 0.93}, {"an error fixed within each run", 0.04, 6, 0.93}, {"two runs", 0.02, 2, 0.93}} {
		for _, workload := range []string{"fsync", "randwrite"} {
			const trials = 4000
			truth, covered := 0.05, 0
			var width float64
			for range trials {
				var each []est
				for range c.runs {
					each = append(each, runEst(truth+c.tau*rng.NormFloat64(), 0.03, rng, workload))
				}
				got, ok := combineRuns(each, workload)
				if !ok || got.Runs != c.runs {
					t.Fatalf("%s %s: combined %d runs (ok %v), want %d", c.name, workload, got.Runs, ok, c.runs)
				}
				if got.covers(shiftRatio(0, truth, workload)) {
					covered++
				}
				width += signedLog(got.High, workload) - signedLog(got.Low, workload)
			}
			cov := float64(covered) / trials
			t.Logf("%s, %s: coverage %.3f, mean width %.3f", c.name, workload, cov, width/trials)
			if cov < c.atLeast {
				t.Errorf("%s, %s: coverage %.3f, want ≥ %.2f", c.name, workload, cov, c.atLeast)
			}
		}
	}
	// A run-fixed error the intervals do not show: pooling as if the runs
	// agreed (the fixed-effect interval) would cover far less often.
	var fixedCovered, trials = 0, 2000
	for range trials {
		var sw, swt float64
		for range 6 {
			e := runEst(0.05+0.04*rng.NormFloat64(), 0.03, rng, "fsync")
			se := (signedLog(e.High, "fsync") - signedLog(e.Low, "fsync")) / (2 * zOf(confidence))
			sw, swt = sw+1/(se*se), swt+signedLog(e.Ratio, "fsync")/(se*se)
		}
		if math.Abs(swt/sw-0.05) <= zOf(confidence)/math.Sqrt(sw) {
			fixedCovered++
		}
	}
	if got := float64(fixedCovered) / float64(trials); got > 0.85 {
		t.Errorf("the fixed-effect interval covers %.3f with a per-run error: the case does not test what combineRuns adds", got)
	}
}

func TestUnitCombineRunsEdges(t *testing.T) {
	nan := math.NaN()
	if _, ok := combineRuns(nil, "fsync"); ok {
		t.Error("no runs gave an estimate")
	}
	if _, ok := combineRuns([]est{{Ratio: nan, Low: nan, High: nan}}, "fsync"); ok {
		t.Error("a run without an estimate (NaN) gave one")
	}
	one := est{Ratio: 0.04, Low: 0.01, High: 0.08, N: 8}
	got, ok := combineRuns([]est{{Ratio: nan, Low: nan, High: nan}, one}, "fsync")
	if !ok || got.est != one || got.Runs != 1 {
		t.Errorf("one run beside a NaN one: %+v %v, want that run as it is", got, ok)
	}
	// Equal runs: the mean is theirs, no spread between them, and an
	// interval from their own, not of width 0.
	got, ok = combineRuns([]est{one, one, one}, "fsync")
	if !ok || got.Runs != 3 || got.SD != 0 || math.Abs(got.Ratio-one.Ratio) > 1e-12 || !got.ok() || got.halfWidthPP() < 0.5 {
		t.Fatalf("three equal runs: %+v %v", got, ok)
	}
	// Runs that disagree beyond their intervals: the spread, not their
	// narrow intervals, sets the width.
	got, _ = combineRuns([]est{{Ratio: 0, Low: -0.01, High: 0.01}, {Ratio: 0.1, Low: 0.09, High: 0.11}, {Ratio: 0.05, Low: 0.04, High: 0.06}}, "fsync")
	if got.SD < 0.04 || got.halfWidthPP() < 5 {
		t.Errorf("disagreeing runs: sd %.3f, half-width %.1f pp, want the spread to show", got.SD, got.halfWidthPP())
	}
	// Throughputs: a run that read the target at no throughput at all
	// (an overhead of 100%, infinite on the log scale) is left out.
	if got, ok := combineRuns([]est{{Ratio: 1, Low: 0.5, High: 1}, one}, "randwrite"); !ok || got.Runs != 1 {
		t.Errorf("a throughput overhead of 100%%: %+v %v, want the other run alone", got, ok)
	}
}

func TestUnitResultsVersion2Reference(t *testing.T) {
	path := t.TempDir() + "/results.json"
	old := `{"version": 2, "drivers": [{"driver": "overlay2", "reference": {"profile": "long", "rounds": 24}}, {"driver": "btrfs"}]}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != resultsVersion || len(r.Drivers[0].References) != 1 || r.Drivers[0].References[0].Rounds != 24 ||
		r.Drivers[0].Reference != nil || len(r.Drivers[1].References) != 0 {
		t.Errorf("version 2's reference read as %+v", r.Drivers)
	}
	if err := os.WriteFile(path, []byte(`{"version": 1}`), 0o644); err == nil {
		if _, err := readResults(path); err == nil || !strings.Contains(err.Error(), "results version 1") {
			t.Errorf("version 1: %v", err)
		}
	}
}

// The report has one median: of an even sample, the mean of the two middle
// values, whether asked as median or as quantile 0.5 (gonum's LinInterp
// would give the lower middle value, the 10th of 20).
func TestUnitOneMedian(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	if got := median(xs); got != 2.5 {
		t.Errorf("median(%v) = %v, want 2.5", xs, got)
	}
	if got := quantile(xs, 0.5); got != 2.5 {
		t.Errorf("quantile(%v, 0.5) = %v, want 2.5 (the median)", xs, got)
	}
	if got := quantile(xs, 0.25); got != 1 {
		t.Errorf("quantile(%v, 0.25) = %v, want 1 (type 4)", xs, got)
	}
}

func TestUnitCgroupV2Rerun(t *testing.T) {
	if _, err := rerunSkip("systemd,kubelet"); err == nil || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("rerunSkip with an unknown deployment: %v", err)
	}
	skip, err := rerunSkip("systemd")
	if err != nil || !slices.Equal(skip, []string{"deb", "compose", "daemonset"}) {
		t.Errorf("rerunSkip(systemd) = %v, %v", skip, err)
	}
	prev := &cgroupV2Pass{Label: "fix", Rev: "aaa", Deployments: []cgroupV2Deployment{
		{Name: "systemd", Error: "no verdict"}, {Name: "deb"}, {Name: "compose"}, {Name: "daemonset"}}}
	got := mergeCgroupV2(prev, &cgroupV2Pass{Label: "fix", Rev: "bbb", Deployments: []cgroupV2Deployment{{Name: "systemd", Seconds: 1}}})
	if got.Rev != "aaa" || len(got.Deployments) != 4 || got.Deployments[0].Name != "systemd" ||
		got.Deployments[0].Error != "" || got.Deployments[0].Rev != "bbb" || got.Deployments[1].Rev != "" {
		t.Errorf("merged pass: %+v", got)
	}
	if prev.Deployments[0].Error != "no verdict" {
		t.Error("the merge changed the recorded pass")
	}
	if mergeCgroupV2(nil, got) != got {
		t.Error("no recorded pass: the rerun is the pass")
	}
}
