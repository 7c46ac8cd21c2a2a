package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/measure/measuretest"
)

// tableRun builds a run whose table figures can be worked out by hand.
//
// container seqwrite: per-round bandwidth ratios 0.86 0.88 0.90 0.92 0.94
// 0.96 over 6 rounds -> median ratio √(0.90·0.92) = 0.90995 ("91%"), and
// with 6 rounds the 95% interval is (min, max) = [86–96].
// container fsync: latency 1.25x host every round -> 80% of host.
// volume randwrite: only 4 rounds -> interval below 95% coverage, marked.
func tableRun() Run {
	ratios := []float64{0.94, 0.86, 0.96, 0.90, 0.88, 0.92} // shuffled over rounds
	var samples []measure.Sample
	for r := 1; r <= 6; r++ {
		for _, job := range measure.Workloads {
			h := measuretest.HostFig(r)
			samples = append(samples, measuretest.Sample(r, measure.TargetHost, job, h))
			c := h.Scaled(ratios[r-1], 1.25)
			if job == measure.RandWrite && r == 4 {
				c = measuretest.Fig{Failed: measure.ReasonODirectUnsupported, Detail: "fio: O_DIRECT\nnot supported here"}
			}
			samples = append(samples, measuretest.Sample(r, measure.TargetContainer, job, c))
			if job == measure.RandWrite && r <= 4 {
				samples = append(samples, measuretest.Sample(r, measure.TargetVolume, job, h.Scaled(0.5, 2)))
			}
		}
	}
	start := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	return Run{
		SchemaVersion: SchemaVersion, LayerprobeVersion: "v0.1.0", Profile: "quick", Mode: "steady",
		Rounds: 6, Confidence: 0.95, StartedAt: start, FinishedAt: start.Add(83 * time.Second),
		DurationSeconds: 83, BytesWritten: 3 << 30,
		Engines: []Engine{
			{
				Name: "default", Endpoint: "unix:///var/run/docker.sock", EngineFacts: measure.EngineFacts{EngineVersion: "27.3.1",
					Driver: "overlay2", DriverClass: "supported", BackingFS: "extfs", DataRoot: "/var/lib/docker",
					ImageStore: "graphdriver", FioVersion: "fio-3.33"},
				Warnings:     []string{"the host was busy during round 2"},
				BytesWritten: 3 << 30, DurationSeconds: 83,
				Results: measure.Summarize(samples, 0.95), Samples: samples,
			},
			{
				Name: "btrfs", Endpoint: "unix:///run/btrfs.sock",
				Error:    &Error{Code: "unreachable", Message: "cannot connect to the Docker daemon"},
				Warnings: []string{}, Results: []measure.Result{}, Samples: []measure.Sample{},
			},
		},
	}
}

// rowOf returns the table line for target and job.
func rowOf(t *testing.T, out, target, job string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == target && f[1] == job {
			return line
		}
	}
	t.Fatalf("no row %s %s in\n%s", target, job, out)
	return ""
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, tableRun()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log("\n" + out)

	for _, want := range []string{
		"v0.1.0", "profile quick", "6 rounds", "1m23s", "3.0 GiB written", // run
		"Engine default (unix:///var/run/docker.sock)", "overlay2 on extfs", "/var/lib/docker",
		"27.3.1", "fio-3.33", "the host was busy during round 2", // engine header
		"bandwidth for seqwrite, IOPS for randwrite, fsync p99 latency for fsync", // headline footnote
		"fewer than 6 paired rounds", // low-coverage footnote
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}

	if row := rowOf(t, out, "container", "seqwrite"); !strings.Contains(row, "91% [86–96]") || strings.Contains(row, "[86–96]*") {
		t.Errorf("container seqwrite row %q, want 91%% [86–96] unmarked", row)
	}
	if row := rowOf(t, out, "container", "fsync"); !strings.Contains(row, "80% [80–80]") {
		t.Errorf("container fsync row %q, want 80%% of host (latency 1.25x)", row)
	}
	// randwrite uses IOPS; round 4 failed, 5 pairs: their range would
	// cover less than 95%, so no interval is shown, only the estimate,
	// marked.
	if row := rowOf(t, out, "container", "randwrite"); !strings.Contains(row, "91% [no interval]*") || strings.Contains(row, "86") || !strings.Contains(row, "5/1") {
		t.Errorf("container randwrite row %q, want 91%% [no interval]* and 5/1 rounds", row)
	}
	if row := rowOf(t, out, "volume", "randwrite"); !strings.Contains(row, "50% [no interval]*") || !strings.Contains(row, "4/0") {
		t.Errorf("volume randwrite row %q, want 50%% [no interval]* (4 rounds) and 4/0", row)
	}
	host := rowOf(t, out, "host", "fsync")
	// Host fsync: scales over rounds 1..6 are 3 5 2 4 1 3 -> median 3:
	// iops 3000, 300e6 B/s = 286.1 MiB/s, write p99 4/3 ms, fsync p99 8/3 ms.
	for _, want := range []string{"baseline", "3000", "286.1 MiB/s", "1.33 ms", "2.67 ms", "6/0"} {
		if !strings.Contains(host, want) {
			t.Errorf("host fsync row %q lacks %q", host, want)
		}
	}
	if row := rowOf(t, out, "host", "seqwrite"); strings.Count(row, " - ") < 1 {
		t.Errorf("host seqwrite row %q: fsync p99 should be '-'", row)
	}

	// Rows are grouped by job, host first.
	iHost, iCont := strings.Index(out, rowOf(t, out, "host", "randwrite")), strings.Index(out, rowOf(t, out, "container", "randwrite"))
	iFsync := strings.Index(out, rowOf(t, out, "host", "fsync"))
	if !(iHost < iCont && iCont < iFsync) {
		t.Errorf("rows not grouped by job with host first")
	}

	// Failures, one line each even for a multi-line message.
	if !strings.Contains(out, "round 4, container randwrite: odirect_unsupported: fio: O_DIRECT not supported here") {
		t.Errorf("failure line missing or malformed")
	}
	// The unreachable engine is reported, without a table.
	if !strings.Contains(out, "ERROR: this engine could not be measured: cannot connect to the Docker daemon (unreachable)") {
		t.Errorf("engine error missing")
	}
	if strings.Count(out, "TARGET") != 1 {
		t.Errorf("want exactly one table (the failed engine has none), got %d", strings.Count(out, "TARGET"))
	}
}

func TestWriteTableNoMarkerWithEnoughRounds(t *testing.T) {
	r := tableRun()
	e := &r.Engines[0]
	var kept []measure.Sample
	for _, s := range e.Samples {
		if s.Target != measure.TargetVolume && !(s.Workload == measure.RandWrite && s.Target == measure.TargetContainer) {
			kept = append(kept, s)
		}
	}
	e.Results = measure.Summarize(kept, 0.95)
	var buf bytes.Buffer
	if err := WriteTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "]*") || strings.Contains(buf.String(), "fewer than") {
		t.Errorf("marker or footnote without an under-covered interval:\n%s", buf.String())
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	for _, n := range []int{0, 3} {
		if err := WriteTable(&failingWriter{n: n}, tableRun()); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("WriteTable to a failing writer (after %d writes) = %v, want the write error", n, err)
		}
	}
	if err := WriteJSON(&failingWriter{}, tableRun()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteJSON to a failing writer = %v, want the write error", err)
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	run := tableRun()
	// Make sure NaN reaches every nullable place: a missing raw figure,
	// an overhead without pairs, a sample latency fio did not report.
	e := &run.Engines[0]
	e.Results = append(e.Results, measure.Result{
		Target: measure.TargetBind, Workload: "seqwrite", RoundsFailed: 1,
		Raw:      measure.Raw{IOPS: math.NaN(), BandwidthBytes: math.Inf(1), LatencyP50: math.NaN(), LatencyP99: math.NaN(), FsyncP99: math.NaN()},
		Overhead: map[string]measure.Overhead{measure.MetricIOPS: fromStatsNaN()},
		Failures: []measure.FailedRound{{Round: 1, Reason: "timeout", Message: "killed"}},
	})

	var buf bytes.Buffer
	if err := WriteJSON(&buf, run); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	text := buf.String()
	for _, want := range []string{`"schema_version": 2`, `"iops": null`, `"bandwidth_bytes_per_second": null`,
		`"ratio": null`, `"coverage": null`, `"fsync_p99_seconds": null`, `"latency_p99_seconds": null`,
		`"warnings": []`, `"samples": []`, `"percent_of_host": 80`, `"workload": "fsync"`, `"round": 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if strings.Contains(text, "NaN") || strings.Contains(text, "Inf") {
		t.Errorf("JSON contains NaN or Inf literals")
	}

	var back Run
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("decode: %v", err)
	}
	got := back.Engines[0].Results[len(back.Engines[0].Results)-1]
	if !math.IsNaN(got.Raw.IOPS) || !math.IsNaN(got.Raw.BandwidthBytes) || !math.IsNaN(got.Overhead[measure.MetricIOPS].Ratio) {
		t.Errorf("null did not read back as NaN: %+v", got)
	}
	i := len(measure.Workloads) // container seqwrite, after host's workloads
	c := back.Engines[0].Results[i]
	want := run.Engines[0].Results[i].Overhead[measure.MetricBandwidth].PercentOfHost
	if c.Target != measure.TargetContainer || c.Workload != "seqwrite" || math.IsNaN(want) || math.Abs(c.Overhead[measure.MetricBandwidth].PercentOfHost-want) > 1e-9 {
		t.Errorf("decoded container seqwrite = %+v", c)
	}
	s := back.Engines[0].Samples[0]
	if s.Round != 1 || s.Target != measure.TargetHost || s.Workload != measure.SeqWrite || !s.StartedAt.Equal(run.Engines[0].Samples[0].StartedAt) {
		t.Errorf("decoded sample %+v, want round 1 host seqwrite", s)
	}
	if !math.IsNaN(s.Read.LatencyP99Sec) {
		t.Errorf("sample read p99 = %v, want NaN back from null", s.Read.LatencyP99Sec)
	}

	// Writing the decoded document again gives the same bytes: nothing is
	// lost or changed by a round trip.
	var again bytes.Buffer
	if err := WriteJSON(&again, back); err != nil {
		t.Fatal(err)
	}
	if again.String() != text {
		t.Errorf("round trip changed the document")
	}
}

func fromStatsNaN() measure.Overhead {
	nan := math.NaN()
	return measure.Overhead{Ratio: nan, CILow: nan, CIHigh: nan, PercentOfHost: nan, PercentLow: nan, PercentHigh: nan, Coverage: nan}
}

func TestWriteJSONEmptyLists(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, Run{SchemaVersion: SchemaVersion, Engines: []Engine{{Name: "x"}}}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	eng := doc["engines"].([]any)[0].(map[string]any)
	for _, k := range []string{"warnings", "results", "samples"} {
		if _, ok := eng[k].([]any); !ok {
			t.Errorf("%s = %v, want an empty array", k, eng[k])
		}
	}
	if _, ok := eng["error"]; ok {
		t.Errorf("error present without an error")
	}
	buf.Reset()
	if err := WriteJSON(&buf, Run{}); err != nil || !strings.Contains(buf.String(), `"engines": []`) {
		t.Errorf("WriteJSON(Run{}) = %q, %v; want engines []", buf.String(), err)
	}
}

// A host arm outside the probe container's CPU cgroups is said above the
// table, in capitals, with its reason; a joined one adds nothing.
func TestWriteTableHostArmOutside(t *testing.T) {
	for _, c := range []struct {
		state string
		loud  bool
	}{{"outside", true}, {"joined", false}, {"", false}} {
		r := tableRun()
		r.Engines[0].HostArmCgroup = c.state
		if c.loud {
			r.Engines[0].HostArmCgroupError = "join cgroup /sys/fs/cgroup/cpu/docker/x: read-only file system"
		}
		var buf bytes.Buffer
		if err := WriteTable(&buf, r); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		loud := strings.Contains(out, "HOST ARM NOT IN THE PROBE CONTAINER'S CPU CGROUPS: join cgroup /sys/fs/cgroup/cpu/docker/x: read-only file system")
		if loud != c.loud {
			t.Errorf("host arm %q: capital warning %v, want %v:\n%s", c.state, loud, c.loud, out)
		}
		if c.loud && strings.Index(out, "HOST ARM") > strings.Index(out, "% of host") {
			t.Errorf("the warning comes after the table:\n%s", out)
		}
	}
}
