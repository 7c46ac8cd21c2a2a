package fio

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// rawFio is an independent, deliberately simple reading of a captured fio
// JSON document, used to compute what Parse should report.
type rawFio map[string]any

func readRaw(t *testing.T, stdout []byte) rawFio {
	t.Helper()
	s := string(stdout)
	start := strings.Index(s, "\n{\n")
	if strings.HasPrefix(s, "{\n") {
		start = 0
	} else if start < 0 {
		t.Fatal("no JSON document in capture")
	} else {
		start++
	}
	end := strings.LastIndex(s, "\n}")
	if end < start {
		t.Fatal("no end of JSON document in capture")
	}
	body := regexp.MustCompile(`: (-?nan|-?inf)\b`).ReplaceAllString(s[start:end+2], ": null")
	var doc rawFio
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("decode capture: %v", err)
	}
	return doc
}

func (r rawFio) jobs() []map[string]any {
	var out []map[string]any
	for _, j := range r["jobs"].([]any) {
		out = append(out, j.(map[string]any))
	}
	return out
}

func num(v any) float64 {
	f, ok := v.(float64)
	if !ok {
		return math.NaN()
	}
	return f
}

func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

// latOf returns the latency object Parse should use for a direction and
// its unit in seconds.
func latOf(dir map[string]any) (map[string]any, float64) {
	for _, c := range []struct {
		key   string
		scale float64
	}{{"clat_ns", 1e-9}, {"lat_ns", 1e-9}, {"clat", 1e-6}, {"lat", 1e-6}} {
		if l := obj(dir, c.key); l != nil && obj(l, "percentile") != nil {
			return l, c.scale
		}
	}
	for _, c := range []struct {
		key   string
		scale float64
	}{{"clat_ns", 1e-9}, {"clat", 1e-6}} {
		if l := obj(dir, c.key); l != nil {
			return l, c.scale
		}
	}
	return nil, 1
}

// expectOp computes the summed figures and the per-job latency figures of
// one op ("read", "write" or "sync") from the raw document.
type rawOp struct {
	ios, bytes, iops, bw float64
	means, ns            []float64
	p50, p99, p999       []float64
}

func expectOp(r rawFio, op string) rawOp {
	var e rawOp
	for _, j := range r.jobs() {
		if op == "sync" {
			s := obj(j, "sync")
			if s == nil {
				continue
			}
			ios := num(s["total_ios"])
			e.ios += ios
			rt := math.Max(num(obj(j, "read")["runtime"]), num(obj(j, "write")["runtime"]))
			if ios > 0 && rt > 0 {
				e.iops += ios / (rt / 1000)
			}
			if l := obj(s, "lat_ns"); l != nil && num(l["N"]) > 0 {
				e.addLat(l, 1e-9, num(l["N"]))
			}
			continue
		}
		d := obj(j, op)
		e.ios += num(d["total_ios"])
		if _, ok := d["io_kbytes"]; ok {
			e.bytes += num(d["io_bytes"])
		} else {
			e.bytes += num(d["io_bytes"]) * 1024
		}
		e.iops += num(d["iops"])
		if bw, ok := d["bw_bytes"]; ok {
			e.bw += num(bw)
		} else {
			e.bw += num(d["bw"]) * 1024
		}
		if l, scale := latOf(d); l != nil {
			n := num(l["N"])
			if _, ok := l["N"]; !ok {
				n = num(d["total_ios"])
			}
			if n > 0 {
				e.addLat(l, scale, n)
			}
		}
	}
	return e
}

func (e *rawOp) addLat(l map[string]any, scale, n float64) {
	e.ns = append(e.ns, n)
	e.means = append(e.means, num(l["mean"])*scale)
	p := obj(l, "percentile")
	if p == nil {
		return
	}
	e.p50 = append(e.p50, num(p["50.000000"])*scale)
	e.p99 = append(e.p99, num(p["99.000000"])*scale)
	e.p999 = append(e.p999, num(p["99.900000"])*scale)
}

func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// checkOp asserts op against the raw figures: sums exactly, latency mean
// as the N-weighted mean, percentiles exactly for one job and within the
// per-job range for several.
func checkOp(t *testing.T, name string, got measure.Op, want rawOp) {
	t.Helper()
	if float64(got.IOs) != want.ios || float64(got.Bytes) != want.bytes {
		t.Errorf("%s: ios=%d bytes=%d, want %v %v", name, got.IOs, got.Bytes, want.ios, want.bytes)
	}
	if !near(got.IOPS, want.iops) || !near(got.BandwidthBytes, want.bw) {
		t.Errorf("%s: iops=%v bw=%v, want %v %v", name, got.IOPS, got.BandwidthBytes, want.iops, want.bw)
	}
	wantMean := math.NaN()
	var sw, s float64
	for i, n := range want.ns {
		if !math.IsNaN(want.means[i]) {
			sw += n
			s += n * want.means[i]
		}
	}
	if sw > 0 {
		wantMean = s / sw
	}
	if !near(got.LatencyMeanSec, wantMean) {
		t.Errorf("%s: mean latency %v, want %v", name, got.LatencyMeanSec, wantMean)
	}
	for _, c := range []struct {
		q    string
		got  float64
		want []float64
	}{{"p50", got.LatencyP50Sec, want.p50}, {"p99", got.LatencyP99Sec, want.p99}, {"p99.9", got.LatencyP999Sec, want.p999}} {
		switch len(c.want) {
		case 0:
			if !math.IsNaN(c.got) {
				t.Errorf("%s: %s = %v, want NaN (no percentiles)", name, c.q, c.got)
			}
		case 1:
			if !near(c.got, c.want[0]) {
				t.Errorf("%s: %s = %v, want %v", name, c.q, c.got, c.want[0])
			}
		default:
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, v := range c.want {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			if !(c.got >= lo && c.got <= hi) {
				t.Errorf("%s: %s = %v, want within per-job range [%v, %v]", name, c.q, c.got, lo, hi)
			}
		}
	}
}

type parseCase struct {
	name       string // testdata file stem (or derived file name)
	job        Job
	wantReason measure.Reason // "" for success
	wantMsg    []string
	check      func(t *testing.T, res measure.JobResult)
}

func loadCapture(t *testing.T, name string) (stdout, stderr []byte, exit int) {
	t.Helper()
	if strings.HasPrefix(name, "derived-") {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b, nil, 0
	}
	var err error
	if stdout, err = os.ReadFile(filepath.Join("testdata", name+".stdout")); err != nil {
		t.Fatal(err)
	}
	if stderr, err = os.ReadFile(filepath.Join("testdata", name+".stderr")); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(filepath.Join("testdata", name+".exit"))
	if err != nil {
		t.Fatal(err)
	}
	if exit, err = strconv.Atoi(strings.TrimSpace(string(code))); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, exit
}

func parseCases(t *testing.T) []parseCase {
	jobs := map[string]Job{}
	for _, c := range captureCases(t) {
		jobs[c.name] = c.job
	}
	return []parseCase{
		{name: "quick-seqwrite", job: jobs["quick-seqwrite"], check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs != 32 || res.Write.Bytes != 32*mib {
				t.Errorf("write ios=%d bytes=%d, want 32 x 1 MiB", res.Write.IOs, res.Write.Bytes)
			}
			if res.BytesWritten != 32*mib {
				t.Errorf("BytesWritten = %d, want 32 MiB (no layout for a pure write job)", res.BytesWritten)
			}
			if res.Read.IOs != 0 || !math.IsNaN(res.Read.LatencyP99Sec) || res.Sync.IOs != 0 || !math.IsNaN(res.Sync.LatencyP99Sec) {
				t.Errorf("read/sync should be empty with NaN latencies: %+v %+v", res.Read, res.Sync)
			}
		}},
		{name: "quick-randwrite", job: jobs["quick-randwrite"], check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs != 4000 || res.Write.Bytes != 4000*4096 {
				t.Errorf("write ios=%d bytes=%d, want 4000 x 4 KiB", res.Write.IOs, res.Write.Bytes)
			}
		}},
		{name: "quick-fsync", job: jobs["quick-fsync"], check: func(t *testing.T, res measure.JobResult) {
			if res.Read.IOs+res.Write.IOs != 4000 {
				t.Errorf("read+write ios = %d, want 4000", res.Read.IOs+res.Write.IOs)
			}
			if want := res.Write.Bytes + 8*mib; res.BytesWritten != want {
				t.Errorf("BytesWritten = %d, want write bytes + 8 MiB layout = %d", res.BytesWritten, want)
			}
			if res.Sync.IOs == 0 || res.Sync.IOPS <= 0 || !(res.Sync.LatencyP99Sec > 0) {
				t.Errorf("sync figures missing: %+v", res.Sync)
			}
		}},
		{name: "psync-iodepth", job: jobs["psync-iodepth"], check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs != 500 {
				t.Errorf("write ios = %d, want 500", res.Write.IOs)
			}
		}},
		{name: "enospc", job: jobs["enospc"], wantReason: measure.ReasonNoSpace, wantMsg: []string{"errno 28", "No space left on device"}, check: func(t *testing.T, res measure.JobResult) {
			if res.BytesWritten != 8*mib {
				t.Errorf("BytesWritten = %d, want the 8 MiB written before ENOSPC", res.BytesWritten)
			}
		}},
		{name: "odirect-ramfs", job: jobs["odirect-ramfs"], wantReason: measure.ReasonODirectUnsupported, wantMsg: []string{"errno 22", "does not support O_DIRECT"}},
		{name: "baddir-missing", job: jobs["baddir-missing"], wantReason: measure.ReasonFioError, wantMsg: []string{"exited with code 1", "is not a directory"}},
		{name: "baddir-immutable", job: jobs["baddir-immutable"], wantReason: measure.ReasonFioError, wantMsg: []string{"errno 1 ", "Operation not permitted"}},
		{name: "numjobs4", job: jobs["numjobs4"], check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs != 4000 {
				t.Errorf("write ios = %d, want 4 x 1000", res.Write.IOs)
			}
		}},
		{name: "numjobs4-group", job: jobs["numjobs4-group"], check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs != 4000 {
				t.Errorf("write ios = %d, want 4 x 1000", res.Write.IOs)
			}
			// job_runtime is summed over the clones; Runtime must be the
			// direction runtime (wall time).
			if res.Runtime > 200*time.Millisecond {
				t.Errorf("Runtime = %v, want the ~60 ms direction runtime, not summed job_runtime", res.Runtime)
			}
		}},
		{name: "killed", job: jobs["killed"], wantReason: measure.ReasonCrashed, wantMsg: []string{"killed by a signal", "no JSON"}},
		{name: "sigterm", job: jobs["sigterm"], wantReason: measure.ReasonCrashed, wantMsg: []string{"interrupted", "terminating on signal 15"}, check: func(t *testing.T, res measure.JobResult) {
			if res.Write.IOs == 0 || res.BytesWritten == 0 {
				t.Errorf("partial figures should be kept: %+v", res.Write)
			}
		}},
		{name: "derived-fio31.json", job: jobs["quick-fsync"], check: func(t *testing.T, res measure.JobResult) {
			if res.FioVersion != "fio-3.1" {
				t.Errorf("FioVersion = %q", res.FioVersion)
			}
			if res.Sync.IOs != 0 || !math.IsNaN(res.Sync.LatencyP99Sec) {
				t.Errorf("no sync section: want empty Sync, got %+v", res.Sync)
			}
			orig := Parse(jobs["quick-fsync"], mustRead(t, "quick-fsync.stdout"), nil, 0)
			// bw fallback: bw (KiB/s, truncated) * 1024 is within 1 KiB/s.
			if d := math.Abs(res.Write.BandwidthBytes - orig.Write.BandwidthBytes); d >= 1024 {
				t.Errorf("bw fallback = %v, bw_bytes = %v", res.Write.BandwidthBytes, orig.Write.BandwidthBytes)
			}
			if res.Runtime != orig.Runtime {
				t.Errorf("Runtime = %v, want %v (direction runtime, no job_runtime needed)", res.Runtime, orig.Runtime)
			}
		}},
		{name: "derived-nan.json", job: jobs["quick-fsync"], check: func(t *testing.T, res measure.JobResult) {
			if !math.IsNaN(res.Read.LatencyMeanSec) || !math.IsNaN(res.Sync.LatencyMeanSec) {
				t.Errorf("nan means should read as NaN: read %v sync %v", res.Read.LatencyMeanSec, res.Sync.LatencyMeanSec)
			}
			orig := Parse(jobs["quick-fsync"], mustRead(t, "quick-fsync.stdout"), nil, 0)
			if res.Read.LatencyP99Sec != orig.Read.LatencyP99Sec || res.Write.LatencyMeanSec != orig.Write.LatencyMeanSec || res.Sync.LatencyP99Sec != orig.Sync.LatencyP99Sec {
				t.Errorf("figures next to nan tokens changed: %+v vs %+v", res, orig)
			}
		}},
		{name: "derived-nopercentiles.json", job: jobs["quick-fsync"], check: func(t *testing.T, res measure.JobResult) {
			for _, op := range []measure.Op{res.Read, res.Write, res.Sync} {
				if !math.IsNaN(op.LatencyP50Sec) || !math.IsNaN(op.LatencyP99Sec) || !math.IsNaN(op.LatencyP999Sec) {
					t.Errorf("percentiles should be NaN: %+v", op)
				}
				if !(op.LatencyMeanSec > 0) {
					t.Errorf("mean should survive: %+v", op)
				}
			}
		}},
		{name: "derived-fio2.json", job: jobs["quick-randwrite"], check: func(t *testing.T, res measure.JobResult) {
			orig := Parse(jobs["quick-randwrite"], mustRead(t, "quick-randwrite.stdout"), nil, 0)
			if res.Write.Bytes != orig.Write.Bytes || res.Write.IOs != orig.Write.IOs {
				t.Errorf("fio 2 io_bytes (KiB): bytes=%d ios=%d, want %d %d", res.Write.Bytes, res.Write.IOs, orig.Write.Bytes, orig.Write.IOs)
			}
			// Percentiles were truncated to whole microseconds.
			if d := orig.Write.LatencyP99Sec - res.Write.LatencyP99Sec; d < 0 || d >= 1e-6 {
				t.Errorf("fio 2 clat p99 = %v, fio 3 clat_ns p99 = %v", res.Write.LatencyP99Sec, orig.Write.LatencyP99Sec)
			}
			if !near(res.Write.LatencyMeanSec, orig.Write.LatencyMeanSec) {
				t.Errorf("fio 2 clat mean = %v, want %v", res.Write.LatencyMeanSec, orig.Write.LatencyMeanSec)
			}
		}},
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCaptured(t *testing.T) {
	for _, c := range parseCases(t) {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, exit := loadCapture(t, c.name)
			res := Parse(c.job, stdout, stderr, exit)
			if res.Workload != c.job.Workload {
				t.Errorf("Workload = %q, want %q", res.Workload, c.job.Workload)
			}
			if c.wantReason == "" {
				if res.Failure != nil {
					t.Fatalf("Parse failed: %v", res.Failure)
				}
			} else {
				if res.Failure == nil || res.Failure.Reason != c.wantReason {
					t.Fatalf("Failure = %v, want reason %q", res.Failure, c.wantReason)
				}
				for _, m := range c.wantMsg {
					if !strings.Contains(res.Failure.Message, m) {
						t.Errorf("Failure.Message = %q, want it to contain %q", res.Failure.Message, m)
					}
				}
				if len(res.Failure.Message) > maxMessage {
					t.Errorf("Failure.Message is %d bytes, want <= %d", len(res.Failure.Message), maxMessage)
				}
			}
			if bytes.Contains(stdout, []byte(`"jobs"`)) {
				raw := readRaw(t, stdout)
				if v, _ := raw["fio version"].(string); res.FioVersion != v {
					t.Errorf("FioVersion = %q, want %q", res.FioVersion, v)
				}
				checkOp(t, "read", res.Read, expectOp(raw, "read"))
				checkOp(t, "write", res.Write, expectOp(raw, "write"))
				checkOp(t, "sync", res.Sync, expectOp(raw, "sync"))
				var wantRT float64
				for _, j := range raw.jobs() {
					wantRT = math.Max(wantRT, math.Max(num(obj(j, "read")["runtime"]), num(obj(j, "write")["runtime"])))
				}
				if res.Runtime != time.Duration(wantRT)*time.Millisecond {
					t.Errorf("Runtime = %v, want %v ms", res.Runtime, wantRT)
				}
				wantBW := int64(expectOp(raw, "write").bytes)
				if jobReads(c.job) {
					wantBW += c.job.FileBytes
				}
				if res.BytesWritten != wantBW {
					t.Errorf("BytesWritten = %d, want %d", res.BytesWritten, wantBW)
				}
			}
			if res.OK() {
				for _, op := range []measure.Op{res.Read, res.Write, res.Sync} {
					if !finiteNonNeg(op.IOPS) || !finiteNonNeg(op.BandwidthBytes) {
						t.Errorf("non-finite figures in a successful result: %+v", op)
					}
				}
				if res.Write.IOPS <= 0 {
					t.Errorf("write IOPS = %v, want > 0", res.Write.IOPS)
				}
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

// minimal is a small, valid fio 3 document with one job.
func minimal(errno int, extra string) string {
	return `{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "randwrite",
      "error" : ` + strconv.Itoa(errno) + `,` + extra + `
      "write" : {
        "io_bytes" : 4096000, "io_kbytes" : 4000, "bw_bytes" : 2048000, "bw" : 2000,
        "iops" : 500.000000, "runtime" : 2000, "total_ios" : 1000,
        "clat_ns" : { "min" : 1, "max" : 9000, "mean" : 2000.000000, "stddev" : 1.0, "N" : 1000,
          "percentile" : { "50.000000" : 1000, "99.000000" : 5000, "99.900000" : 8000 } }
      },
      "job_runtime" : 2000
    }
  ]
}
`
}

// zeroIOs is what fio prints for a steady execution whose byte cap ran out
// within its ramp: a clean exit, a runtime, and nothing counted.
var zeroIOs = strings.NewReplacer(
	`"io_bytes" : 4096000`, `"io_bytes" : 0`,
	`"bw_bytes" : 2048000`, `"bw_bytes" : 0`,
	`"iops" : 500.000000`, `"iops" : 0.000000`,
	`"total_ios" : 1000`, `"total_ios" : 0`,
	`"N" : 1000`, `"N" : 0`,
).Replace(minimal(0, ""))

// rampOnly is what fio 3.33 prints for a random job whose byte cap ran
// out within its ramp: the ramp's I/O and rate, and not one latency sample.
var rampOnly = strings.NewReplacer(
	`"min" : 1, "max" : 9000, "mean" : 2000.000000, "stddev" : 1.0, "N" : 1000,`, `"min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0, "N" : 0`,
	`"percentile" : { "50.000000" : 1000, "99.000000" : 5000, "99.900000" : 8000 } }`, `}`,
).Replace(minimal(0, ""))

func TestParseEdgeCases(t *testing.T) {
	direct := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite", "direct=1"}}
	buffered := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite"}}
	ramped := buffered
	ramped.Ramp = 20 * time.Millisecond
	long := strings.Repeat("fio: io_u error on file /x: No space left on device: write offset=1\n", 1) +
		strings.Repeat("é", 2000)
	for _, c := range []struct {
		name           string
		job            Job
		stdout, stderr string
		exit           int
		want           measure.Reason // "" = success
		wantMsg        string
	}{
		{name: "ok", job: buffered, stdout: minimal(0, "")},
		{name: "notes before and after", job: buffered, stdout: "note: something {odd}\n" + "{ not json\n" + minimal(0, "") + "fio: trailing note\n"},
		{name: "indented json", job: buffered, stdout: "  " + minimal(0, "")},
		{name: "crlf", job: buffered, stdout: strings.ReplaceAll(minimal(0, ""), "\n", "\r\n")},
		{name: "empty exit 0", job: buffered, want: measure.ReasonParse, wantMsg: "no JSON"},
		{name: "garbage exit 0", job: buffered, stdout: "hello\nworld\n", want: measure.ReasonParse},
		{name: "truncated exit 0", job: buffered, stdout: minimal(0, "")[:200], want: measure.ReasonParse, wantMsg: "truncated"},
		{name: "truncated killed", job: buffered, stdout: minimal(0, "")[:200], exit: -1, want: measure.ReasonCrashed},
		{name: "no json sigkill 137", job: buffered, exit: 137, want: measure.ReasonCrashed, wantMsg: "signal killed"},
		{name: "exec 127", job: buffered, stderr: "exec: \"fio\": executable file not found in $PATH", exit: 127, want: measure.ReasonFioMissing},
		{name: "option error", job: buffered, stderr: "fio: failed parsing bs=x\n", exit: 1, want: measure.ReasonFioError, wantMsg: "failed parsing"},
		{name: "no json but enospc text", job: buffered, stdout: "fio: pid=1, err=28/file:io_u.c:1, func=io_u error, error=No space left on device\n", exit: 1, want: measure.ReasonNoSpace},
		{name: "edquot", job: buffered, stdout: minimal(122, ""), exit: 1, want: measure.ReasonNoSpace, wantMsg: "errno 122"},
		{name: "einval buffered", job: buffered, stdout: minimal(22, ""), exit: 1, want: measure.ReasonFioError},
		{name: "einval direct", job: direct, stdout: minimal(22, ""), exit: 1, want: measure.ReasonODirectUnsupported},
		{name: "einval direct from job options", job: buffered, stdout: minimal(22, `"job options" : { "direct" : "1" },`), exit: 1, want: measure.ReasonODirectUnsupported},
		{name: "first direct io errored", job: buffered, stdout: "fio: first direct IO errored. File system may not support direct IO, or iomem_align= is bad, or invalid block size. Try setting direct=0.\n" + minimal(5, ""), exit: 1, want: measure.ReasonODirectUnsupported},
		{name: "error with exit 0", job: buffered, stdout: minimal(5, ""), want: measure.ReasonFioError, wantMsg: "input/output error"},
		{name: "exit 1 without job error", job: buffered, stdout: minimal(0, ""), exit: 1, want: measure.ReasonFioError},
		{name: "interrupted with json", job: buffered, stdout: minimal(0, ""), exit: 128, want: measure.ReasonCrashed},
		{name: "nan iops", job: buffered, stdout: strings.Replace(minimal(0, ""), "500.000000", "-nan", 1), want: measure.ReasonParse, wantMsg: "invalid write"},
		{name: "inf bw", job: buffered, stdout: strings.Replace(minimal(0, ""), `"bw_bytes" : 2048000`, `"bw_bytes" : inf`, 1), want: measure.ReasonParse},
		{name: "negative iops", job: buffered, stdout: strings.Replace(minimal(0, ""), "500.000000", "-5", 1), want: measure.ReasonParse},
		{name: "no jobs", job: buffered, stdout: `{"fio version" : "fio-3.33", "jobs" : []}`, want: measure.ReasonParse},
		{name: "wrong types", job: buffered, stdout: `{"fio version" : 3, "jobs" : "x"}`, want: measure.ReasonParse},
		{name: "long message", job: buffered, stdout: minimal(28, ""), stderr: long, exit: 1, want: measure.ReasonNoSpace},
		{name: "invalid utf8", job: buffered, stdout: minimal(5, ""), stderr: "fio: \xff\xfe bad\n", exit: 1, want: measure.ReasonFioError},
		{name: "nothing measured", job: buffered, stdout: zeroIOs, want: measure.ReasonNoIO, wantMsg: "no measured I/O"},
		{name: "ended within the ramp", job: ramped, stdout: rampOnly, want: measure.ReasonNoIO, wantMsg: "within the ramp"},
		// A ramped execution with latency samples was measured.
		{name: "ramped and measured", job: ramped, stdout: minimal(0, "")},
		{name: "nan in string untouched", job: buffered, stdout: strings.Replace(minimal(0, ""), `"randwrite"`, `"nan inf -nan"`, 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Parse(c.job, []byte(c.stdout), []byte(c.stderr), c.exit)
			if c.want == "" {
				if res.Failure != nil {
					t.Fatalf("Failure = %v, want success", res.Failure)
				}
				if res.Write.IOs != 1000 || res.Write.Bytes != 4096000 || res.Write.IOPS != 500 || res.Write.BandwidthBytes != 2048000 {
					t.Errorf("write = %+v", res.Write)
				}
				if res.Write.LatencyP99Sec != 5e-6 || res.Write.LatencyP999Sec != 8e-6 || res.Write.LatencyP50Sec != 1e-6 || res.Write.LatencyMeanSec != 2e-6 {
					t.Errorf("write latencies = %+v", res.Write)
				}
				if res.Runtime != 2*time.Second || res.FioVersion != "fio-3.33" {
					t.Errorf("Runtime = %v, FioVersion = %q", res.Runtime, res.FioVersion)
				}
				return
			}
			if res.Failure == nil || res.Failure.Reason != c.want {
				t.Fatalf("Failure = %v, want reason %q", res.Failure, c.want)
			}
			if !strings.Contains(res.Failure.Message, c.wantMsg) {
				t.Errorf("Message = %q, want it to contain %q", res.Failure.Message, c.wantMsg)
			}
			if len(res.Failure.Message) > maxMessage || !utf8Valid(res.Failure.Message) {
				t.Errorf("Message is %d bytes / invalid UTF-8: %q", len(res.Failure.Message), res.Failure.Message)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func TestSanitizeJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a" : nan, "b" : -nan, "c" : inf, "d" : -inf, "e" : NaN, "f" : Infinity}`: `{"a" : null, "b" : null, "c" : null, "d" : null, "e" : null, "f" : null}`,
		`{"s" : "nan \"inf\" -nan", "t" : true, "f" : false, "n" : null}`:           `{"s" : "nan \"inf\" -nan", "t" : true, "f" : false, "n" : null}`,
		`[1e5, -2.5E-3, nan]`: `[1e5, -2.5E-3, null]`,
	} {
		if got := string(sanitizeJSON([]byte(in))); got != want {
			t.Errorf("sanitizeJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestMixtureQuantile(t *testing.T) {
	table := func(n float64, vals ...float64) latStat {
		ps := []float64{50, 90, 99, 99.9}
		s := latStat{n: n}
		for i, v := range vals {
			s.pct = append(s.pct, pctPoint{p: ps[i], v: v})
		}
		return s
	}
	a := table(100, 1, 2, 3, 4)
	b := table(100, 10, 20, 30, 40)
	for _, c := range []struct {
		name  string
		stats []latStat
		q     float64
		want  float64
	}{
		{"single job is exact", []latStat{a}, 99, 3},
		{"single job p99.9", []latStat{a}, 99.9, 4},
		{"identical jobs", []latStat{a, a}, 99, 3},
		// The step CDF puts job a at 99.9% (not 100%) at its largest
		// value 4, so the mixture reaches 50% only at b's p50: the
		// estimate errs high by one listed step, never low.
		{"two jobs p50", []latStat{a, b}, 50, 10},
		// p99 needs (99.9 + F_b)/2 >= 99, i.e. F_b >= 98.1: b's p99.
		{"two jobs p99", []latStat{a, b}, 99, 30},
		// A heavy job dominates: its p99.9 value, one step above its p99
		// because the light job's 1-in-a-million weight tips the sum.
		{"weighted", []latStat{table(1e6, 1, 2, 3, 4), table(1, 10, 20, 30, 40)}, 99, 4},
		{"weighted p90", []latStat{table(1e6, 1, 2, 3, 4), table(1, 10, 20, 30, 40)}, 50, 2},
		{"job without table ignored", []latStat{a, {n: 1e9}}, 99, 3},
		{"no tables", []latStat{{n: 5}}, 99, math.NaN()},
		{"none", nil, 99, math.NaN()},
		{"q above list", []latStat{table(10, 1, 2)}, 99.9, 2},
	} {
		if got := mixtureQuantile(c.stats, c.q); !near(got, c.want) {
			t.Errorf("%s: mixtureQuantile(q=%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	res := Parse(quickJob(t, measure.SeqWrite), mustRead(t, "quick-seqwrite.stdout"), nil, 0)
	if !math.IsNaN(res.Read.LatencyP99Sec) {
		t.Fatal("want a NaN latency in the fixture")
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if !bytes.Contains(b, []byte(`"latency_p99_seconds":null`)) || !bytes.Contains(b, []byte(`"bandwidth_bytes_per_second":`)) {
		t.Errorf("JSON = %s", b)
	}
	var back measure.JobResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	back.Runtime = res.Runtime // not serialized (json:"-")
	for _, p := range []struct {
		name      string
		got, want measure.Op
	}{{"read", back.Read, res.Read}, {"write", back.Write, res.Write}, {"sync", back.Sync, res.Sync}} {
		if !opEqual(p.got, p.want) {
			t.Errorf("%s round trip: %+v, want %+v", p.name, p.got, p.want)
		}
	}
	back.Read, back.Write, back.Sync = res.Read, res.Write, res.Sync
	if back.Workload != res.Workload || back.FioVersion != res.FioVersion || back.BytesWritten != res.BytesWritten || back.Failure != nil {
		t.Errorf("round trip: %+v, want %+v", back, res)
	}

	failed := measure.JobResult{Workload: measure.Fsync, Failure: &measure.Failure{Reason: measure.ReasonNoSpace, Message: "x"}, Sync: measure.Op{LatencyMeanSec: math.Inf(1)}}
	b, err = json.Marshal(failed)
	if err != nil {
		t.Fatalf("Marshal failed result: %v", err)
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Failure == nil || *back.Failure != *failed.Failure || !math.IsNaN(back.Sync.LatencyMeanSec) {
		t.Errorf("failed result round trip: %s -> %+v, %v", b, back, err)
	}
}

func opEqual(a, b measure.Op) bool {
	return a.IOs == b.IOs && a.Bytes == b.Bytes && near(a.IOPS, b.IOPS) && near(a.BandwidthBytes, b.BandwidthBytes) &&
		near(a.LatencyMeanSec, b.LatencyMeanSec) && near(a.LatencyP50Sec, b.LatencyP50Sec) &&
		near(a.LatencyP99Sec, b.LatencyP99Sec) && near(a.LatencyP999Sec, b.LatencyP999Sec)
}

func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".stdout") && !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(nil), 0)
		f.Add(b, []byte("fio: err=28\n"), 1)
	}
	f.Add([]byte(minimal(0, "")), []byte(nil), 0)
	f.Add([]byte("{\n"), []byte(nil), -1)
	job := Job{Workload: measure.Fsync, Options: []string{"rw=randrw", "direct=1"}, FileBytes: 16 * mib}
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int) {
		res := Parse(job, stdout, stderr, exit)
		if res.Workload != job.Workload {
			t.Fatalf("Workload = %q", res.Workload)
		}
		if res.Failure != nil {
			if res.Failure.Reason == "" || len(res.Failure.Message) > maxMessage {
				t.Fatalf("bad failure %+v", res.Failure)
			}
			return
		}
		for _, op := range []measure.Op{res.Read, res.Write, res.Sync} {
			if !finiteNonNeg(op.IOPS) || !finiteNonNeg(op.BandwidthBytes) || op.IOs < 0 || op.Bytes < 0 {
				t.Fatalf("successful result with invalid figures: %+v", op)
			}
		}
		if res.BytesWritten < 0 || res.Runtime < 0 {
			t.Fatalf("negative BytesWritten/Runtime: %+v", res)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("Marshal: %v", err)
		}
	})
}

// TestInFlightRate: a one-thread, queue-depth-1 write job's rate is its
// bytes over the summed latency of its writes, not over fio's
// whole-millisecond runtime, unless that latency cannot have been one write
// at a time.
func TestInFlightRate(t *testing.T) {
	// 8 writes of 1 MiB, each 1.2 ms in flight (9.6 ms in all); fio
	// reports 10 ms and 838860800 B/s from it.
	doc := func(meanNS string) []byte {
		return []byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "seqwrite", "error": 0,
  "write": {"io_bytes": 8388608, "io_kbytes": 8192, "bw_bytes": 838860800, "bw": 819200, "iops": 800.0,
    "runtime": 10, "total_ios": 8,
    "lat_ns": {"min": 1000000, "max": 1400000, "mean": ` + meanNS + `, "stddev": 1.0, "N": 8},
    "clat_ns": {"min": 1000000, "max": 1400000, "mean": 1190000, "stddev": 1.0, "N": 8,
      "percentile": {"50.000000": 1200000, "99.000000": 1400000}}},
  "job_runtime": 10}]}`)
	}
	job := quickJob(t, measure.SeqWrite)
	if !job.InFlightRate {
		t.Fatal("quick's sequential job should rate its writes by their time in flight")
	}
	res := ParseExecution(job, Steady, doc("1200000"), nil, 0)
	if !res.OK() {
		t.Fatalf("failed: %v", res.Failure)
	}
	if want := 8388608 / 0.0096; math.Abs(res.Write.BandwidthBytes-want) > 1 {
		t.Errorf("bandwidth %v, want %v (bytes over 9.6 ms in flight)", res.Write.BandwidthBytes, want)
	}
	if want := 8 / 0.0096; math.Abs(res.Write.IOPS-want) > 1e-6 {
		t.Errorf("iops %v, want %v", res.Write.IOPS, want)
	}
	if res.Runtime != 9600*time.Microsecond {
		t.Errorf("runtime %v, want 9.6ms", res.Runtime)
	}

	// Without the option, and when the summed latency exceeds the runtime
	// (more than one write in flight), fio's own figures stand.
	plain := job
	plain.InFlightRate = false
	for name, r := range map[string]measure.JobResult{
		"option off":     ParseExecution(plain, Steady, doc("1200000"), nil, 0),
		"several queued": ParseExecution(job, Steady, doc("2000000"), nil, 0),
	} {
		if r.Write.BandwidthBytes != 838860800 || r.Write.IOPS != 800 || r.Runtime != 10*time.Millisecond {
			t.Errorf("%s: bandwidth %v iops %v runtime %v, want fio's 838860800, 800, 10ms", name, r.Write.BandwidthBytes, r.Write.IOPS, r.Runtime)
		}
	}
}
