package fio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// maxMessage bounds Failure.Message: fio can print one error line per
// failed I/O, and the message ends up in logs, the store and the API.
const maxMessage = 512

// maxCandidates bounds how many lines starting with '{' Parse tries as the
// start of the JSON document, so hostile output cannot make it quadratic.
const maxCandidates = 16

// Parse turns what one fio execution printed into a measure.JobResult. It
// never panics and never returns an error: anything that went wrong is a
// JobResult with Failure set.
//
// stdout may hold informational lines before and after the JSON document
// (fio writes notes such as "note: both iodepth >= 1 and synchronous I/O
// engine are selected" and "fio: pid=0, err=28/..." to the same stream);
// they are skipped and, like stderr, kept as fio's own error text in
// Failure.Message. fio prints floats with printf("%f"), so nan, -nan and inf
// can appear as bare tokens; they are read as "not reported" (NaN).
//
// exitCode is the process exit status, negative when the process was killed
// by a signal (as os.ProcessState.ExitCode reports it). fio exits with the
// number of jobs that failed and still prints JSON with a per-job errno, so
// both are checked.
//
// Classification (the measure.Reason* values): errno 28 (ENOSPC) or 122
// (EDQUOT) is ReasonNoSpace; EINVAL on a direct=1 job, or fio saying the
// destination does not support O_DIRECT or that the first direct I/O
// errored, is ReasonODirectUnsupported; any other job error is
// ReasonFioError. No JSON with exitCode < 0 or >= 128 (signal, crash,
// killed) is ReasonCrashed, as is JSON with such an exit code (fio was
// interrupted and its figures are partial); exit code 126 or 127 without
// JSON (the shell or container runtime could not run fio) is
// ReasonFioMissing; other output without a complete JSON document is
// ReasonParse or, when fio exited non-zero, ReasonFioError. A caller whose
// context ended (timeout, cancel) should prefer FailureFromRunError(ctx.Err()).
//
// Figures: IOPS, bandwidth, I/O counts and bytes are summed over the jobs in
// the output (numjobs>1 without group_reporting gives one entry per clone).
// Latency means are weighted by sample count. Percentiles cannot be merged
// exactly from per-job percentile tables; for several jobs Parse computes
// the quantile of the sample-weighted mixture of the jobs' step CDFs read
// from their tables (see mixtureQuantile), which is exact for one job and
// lies between the smallest and largest per-job value otherwise. Read and
// write latencies are completion latencies (clat_ns; lat_ns when clat has no
// percentiles; fio 2's clat in microseconds); Sync latencies are
// sync.lat_ns (fio >= 3.4). Sync.IOPS is fsyncs per second of runtime.
// Runtime is the longest read/write runtime fio reports (its job_runtime is
// summed over clones under group_reporting, so it is only a fallback).
//
// When Failure is set the figures are still filled with what fio reported
// (BytesWritten in particular counts against the write budget) but they are
// not measurements and must not be used as such.
func Parse(job Job, stdout, stderr []byte, exitCode int) measure.JobResult {
	return ParseExecution(job, Fresh, stdout, stderr, exitCode)
}

// ParseExecution is Parse for a command built with Command(..., how, k): it
// differs only in what counts as written. A Fresh execution of a job that
// reads writes its file first; a Steady one reuses its file but writes
// during its ramp, which fio does not report: that part is estimated from
// the measured write rate over the ramp, bounded by the execution's byte
// cap. A Layout writes exactly what it reports.
func ParseExecution(job Job, how Execution, stdout, stderr []byte, exitCode int) (res measure.JobResult) {
	res = measure.JobResult{Workload: job.Workload}
	nan := math.NaN()
	for _, op := range []*measure.Op{&res.Read, &res.Write, &res.Sync} {
		*op = measure.Op{LatencyMeanSec: nan, LatencyP50Sec: nan, LatencyP99Sec: nan, LatencyP999Sec: nan}
	}
	defer func() {
		// Parse must never take its caller down, whatever fio printed.
		if r := recover(); r != nil {
			res.Failure = &measure.Failure{Reason: measure.ReasonParse, Message: trimMessage(fmt.Sprintf("internal error parsing fio output: %v", r))}
		}
	}()

	doc, start, end, state := extractJSON(stdout)
	var notes []byte
	if state == jsonFound {
		notes = append(append(slices.Clip(stdout[:start]), '\n'), stdout[end:]...)
	} else {
		notes = stdout
	}
	text := fioText(notes, stderr)

	if state != jsonFound {
		res.Failure = noJSONFailure(state, exitCode, text)
		return res
	}

	res.FioVersion = doc.Version
	fill(&res, job, how, doc)

	if f := jobErrorFailure(job, doc, text); f != nil {
		res.Failure = f
		return res
	}
	if exitCode != 0 {
		res.Failure = exitFailure(exitCode, text)
		return res
	}
	if len(doc.Jobs) == 0 {
		res.Failure = &measure.Failure{Reason: measure.ReasonParse, Message: withText("fio output has no jobs", text)}
		return res
	}
	for _, c := range []struct {
		name string
		op   measure.Op
	}{{"read", res.Read}, {"write", res.Write}, {"sync", res.Sync}} {
		if !finiteNonNeg(c.op.IOPS) || !finiteNonNeg(c.op.BandwidthBytes) || c.op.IOs < 0 || c.op.Bytes < 0 {
			res.Failure = &measure.Failure{Reason: measure.ReasonParse, Message: trimMessage(fmt.Sprintf(
				"fio reported invalid %s figures: iops=%v bandwidth=%v ios=%d bytes=%d",
				c.name, c.op.IOPS, c.op.BandwidthBytes, c.op.IOs, c.op.Bytes))}
			return res
		}
	}
	if res.Read.IOs == 0 && res.Write.IOs == 0 {
		// A clean exit with nothing measured is not a zero-rate result:
		// the figures would read as an infinitely slow target. It happens
		// when a steady execution's byte cap is used up within its ramp
		// (fio counts ramp I/O towards io_size) on a very fast device.
		res.Failure = &measure.Failure{Reason: measure.ReasonNoIO, Message: trimMessage(fmt.Sprintf(
			"fio completed no measured I/O (ramp %v, byte cap %d): the device finished the execution's bytes before measuring began",
			job.Ramp, job.IOBytes))}
		return res
	}
	if job.Ramp > 0 && endedInRamp(doc) {
		res.Failure = &measure.Failure{Reason: measure.ReasonNoIO, Message: trimMessage(fmt.Sprintf(
			"fio completed no measured I/O (ramp %v, byte cap %d): the device finished the execution's bytes within the ramp, "+
				"and fio reported the ramp's I/O, start-up included, without latencies",
			job.Ramp, job.IOBytes))}
		return res
	}
	return res
}

// endedInRamp reports whether an execution's I/O all happened within its
// ramp. fio 3.33 ends a random job whose byte cap runs out during the ramp
// and reports the ramp's I/O and rate, with no completion latency sample at
// all (clat N = 0, no percentiles): figures of the start-up, not a
// measurement. A direction that did I/O but kept no latency sample is
// that case; output without the sample count (fio 2) is taken as measured.
func endedInRamp(doc *fioOutput) bool {
	unmeasured := false
	for i := range doc.Jobs {
		for _, d := range []*fioDir{doc.Jobs[i].Read, doc.Jobs[i].Write} {
			if d == nil || d.TotalIOs.int64() == 0 && d.IOBytes.int64() == 0 {
				continue
			}
			lat := d.ClatNS
			if lat == nil {
				lat = d.LatNS
			}
			if lat == nil || !lat.N.present || lat.N.int64() > 0 || len(lat.Percentile) > 0 {
				return false
			}
			unmeasured = true
		}
	}
	return unmeasured
}

func finiteNonNeg(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// --- locating and decoding the JSON document -------------------------------

type extractState int

const (
	jsonNone      extractState = iota // no line starts with '{'
	jsonTruncated                     // a '{' line, but no complete fio document
	jsonFound
)

// extractJSON finds fio's JSON document in stdout: the first line starting
// with '{' whose balanced object decodes into a document with a "jobs" or
// "fio version" member. start and end delimit it in stdout.
func extractJSON(stdout []byte) (doc *fioOutput, start, end int, state extractState) {
	state = jsonNone
	tried := 0
	for off := 0; off < len(stdout) && tried < maxCandidates; {
		nl := bytes.IndexByte(stdout[off:], '\n')
		lineEnd := len(stdout)
		if nl >= 0 {
			lineEnd = off + nl
		}
		line := bytes.TrimLeft(stdout[off:lineEnd], " \t\r")
		if len(line) > 0 && line[0] == '{' {
			tried++
			state = jsonTruncated
			s := lineEnd - len(line)
			if e, ok := objectEnd(stdout, s); ok {
				if d, ok := decodeDoc(stdout[s:e]); ok {
					return d, s, e, jsonFound
				}
			}
		}
		if nl < 0 {
			break
		}
		off = lineEnd + 1
	}
	return nil, 0, 0, state
}

// objectEnd returns the index just past the JSON object starting at b[s]
// ('{'), found by balancing braces and brackets outside strings.
func objectEnd(b []byte, s int) (int, bool) {
	depth := 0
	var str jsonString
	for i := s; i < len(b); i++ {
		if str.holds(b[i]) {
			continue
		}
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
			if depth < 0 {
				return 0, false
			}
		}
	}
	return 0, false
}

// jsonString follows JSON text byte by byte and tells which bytes belong to
// a string literal, so that braces and words inside strings are left alone.
type jsonString struct{ in, escaped bool }

// holds reports whether c, the next byte, is part of a string literal
// (its quotes included).
func (s *jsonString) holds(c byte) bool {
	switch {
	case !s.in:
		s.in = c == '"'
	case s.escaped:
		s.escaped = false
	case c == '\\':
		s.escaped = true
	case c == '"':
		s.in = false
		return true
	}
	return s.in
}

// sanitizeJSON replaces the bare non-finite tokens fio's printf("%f") can
// produce (nan, -nan, inf, -inf, infinity, any case) outside strings with
// null, which fioNum reads as NaN.
func sanitizeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	var str jsonString
	for i := 0; i < len(b); {
		c := b[i]
		if str.holds(c) {
			out = append(out, c)
			i++
			continue
		}
		j := i
		if c == '-' || c == '+' {
			j++
		}
		k := j
		for k < len(b) && isLetter(b[k]) {
			k++
		}
		if k > j {
			word := strings.ToLower(string(b[j:k]))
			if word == "nan" || word == "inf" || word == "infinity" {
				out = append(out, "null"...)
				i = k
				continue
			}
			if j == i {
				// true, false, null or garbage: copy the word unchanged.
				out = append(out, b[i:k]...)
				i = k
				continue
			}
		}
		out = append(out, c)
		i++
	}
	return out
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func decodeDoc(raw []byte) (*fioOutput, bool) {
	var probe map[string]json.RawMessage
	clean := sanitizeJSON(raw)
	if err := json.Unmarshal(clean, &probe); err != nil {
		return nil, false
	}
	if _, ok := probe["jobs"]; !ok {
		if _, ok := probe["fio version"]; !ok {
			return nil, false
		}
	}
	var d fioOutput
	if err := json.Unmarshal(clean, &d); err != nil {
		return nil, false
	}
	return &d, true
}

// fioNum is a number in fio's JSON. present tells an absent member from
// one that is there; null (a sanitized nan/inf) is present and NaN.
type fioNum struct {
	v       float64
	present bool
}

func (n *fioNum) UnmarshalJSON(b []byte) error {
	n.present = true
	if bytes.Equal(b, []byte("null")) {
		n.v = math.NaN()
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Out of range: ParseFloat returns ±Inf with a range error; keep
		// it (validation rejects it) rather than failing the document.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			n.v = v
			return nil
		}
		return err
	}
	n.v = v
	return nil
}

// f returns the value, NaN when absent.
func (n fioNum) f() float64 {
	if !n.present {
		return math.NaN()
	}
	return n.v
}

// int64 returns n as a non-negative count, 0 when absent or not finite.
func (n fioNum) int64() int64 {
	v := n.f()
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

type fioOutput struct {
	Version string   `json:"fio version"`
	Jobs    []fioJob `json:"jobs"`
}

type fioJob struct {
	Name       string            `json:"jobname"`
	Error      fioNum            `json:"error"`
	Options    map[string]string `json:"job options"`
	JobRuntime fioNum            `json:"job_runtime"` // ms, summed over clones with group_reporting
	Read       *fioDir           `json:"read"`
	Write      *fioDir           `json:"write"`
	Sync       *fioSync          `json:"sync"` // fio >= 3.4
}

type fioDir struct {
	IOBytes  fioNum  `json:"io_bytes"`  // bytes; KiB before io_kbytes existed (fio 2)
	IOKBytes fioNum  `json:"io_kbytes"` // KiB
	BWBytes  fioNum  `json:"bw_bytes"`  // bytes/s, fio >= 3.2
	BW       fioNum  `json:"bw"`        // KiB/s (kb_base=1024)
	IOPS     fioNum  `json:"iops"`
	Runtime  fioNum  `json:"runtime"` // ms
	TotalIOs fioNum  `json:"total_ios"`
	ClatNS   *fioLat `json:"clat_ns"`
	LatNS    *fioLat `json:"lat_ns"`
	Clat     *fioLat `json:"clat"` // microseconds, fio 2
	Lat      *fioLat `json:"lat"`  // microseconds, fio 2
}

type fioSync struct {
	TotalIOs fioNum  `json:"total_ios"`
	LatNS    *fioLat `json:"lat_ns"`
}

type fioLat struct {
	Max        fioNum            `json:"max"`
	Mean       fioNum            `json:"mean"`
	N          fioNum            `json:"N"`
	Percentile map[string]fioNum `json:"percentile"`
	// Bins is the latency histogram (--output-format=json+): bucket
	// latency in ns to count.
	Bins map[string]fioNum `json:"bins"`
}

// --- figures ----------------------------------------------------------------

// latStat is one job's latency statistic for one op, in seconds.
type latStat struct {
	n    float64 // sample count (weight)
	mean float64
	pct  []pctPoint       // ascending by percent; empty when fio printed none
	bins map[int64]uint64 // ns -> count; nil when fio printed none
}

type pctPoint struct{ p, v float64 } // percent (0..100], seconds

func fill(res *measure.JobResult, job Job, how Execution, doc *fioOutput) {
	var readLat, writeLat, syncLat []latStat
	var runtimeMS float64
	for i := range doc.Jobs {
		j := &doc.Jobs[i]
		// The entry's wall time in ms: the longest direction runtime. Not
		// job_runtime, which group_reporting sums over the clones (4
		// clones of ~50 ms report ~200 ms); it serves only when no
		// direction ran.
		var rt float64
		for _, d := range []*fioDir{j.Read, j.Write} {
			if d != nil && d.Runtime.f() > rt {
				rt = d.Runtime.f()
			}
		}
		if jr := j.JobRuntime.f(); rt == 0 && jr > 0 {
			rt = jr
		}
		if rt > runtimeMS {
			runtimeMS = rt
		}
		if s := addDir(&res.Read, j.Read); s != nil {
			readLat = append(readLat, *s)
		}
		if s := addDir(&res.Write, j.Write); s != nil {
			writeLat = append(writeLat, *s)
		}
		if j.Sync != nil {
			ios := j.Sync.TotalIOs.int64()
			if !j.Sync.TotalIOs.present && j.Sync.LatNS != nil {
				ios = j.Sync.LatNS.N.int64()
			}
			res.Sync.IOs = satAdd(res.Sync.IOs, ios)
			if rt > 0 && ios > 0 {
				res.Sync.IOPS += float64(ios) / (rt / 1000)
			}
			if s := latFrom(j.Sync.LatNS, 1e9, float64(ios)); s != nil {
				syncLat = append(syncLat, *s)
			}
		}
	}
	if !math.IsNaN(runtimeMS) && runtimeMS > 0 && runtimeMS < float64(math.MaxInt64/int64(time.Millisecond)) {
		res.Runtime = time.Duration(runtimeMS * float64(time.Millisecond))
	}
	setLat(&res.Read, readLat)
	setLat(&res.Write, writeLat)
	setLat(&res.Sync, syncLat)
	if job.InFlightRate && len(doc.Jobs) == 1 {
		inFlightRate(res, doc.Jobs[0].Write, runtimeMS)
	}

	res.BytesWritten = res.Write.Bytes
	switch how {
	case Fresh:
		if jobReads(job) {
			res.BytesWritten = satAdd(res.BytesWritten, max(job.FileBytes, 0))
		}
	case Steady:
		res.BytesWritten = satAdd(res.BytesWritten, rampBytes(job, res))
	}
}

// inFlightRate replaces the write rate and the runtime of a one-thread,
// queue-depth-1 write job by its bytes and I/Os over the summed latency of
// its writes (Job.InFlightRate), when fio reported that latency and it
// fits in fio's whole-millisecond runtime (plus the millisecond fio may
// have cut off).
func inFlightRate(res *measure.JobResult, d *fioDir, runtimeMS float64) {
	if d == nil || d.LatNS == nil || res.Read.IOs != 0 || res.Write.IOs <= 0 {
		return
	}
	n, mean := d.LatNS.N.f(), d.LatNS.Mean.f()
	busy := n * mean / 1e9 // seconds
	if n != float64(res.Write.IOs) || !(busy > 0) || math.IsInf(busy, 0) || busy*1000 > runtimeMS+1 {
		return
	}
	res.Write.IOPS = float64(res.Write.IOs) / busy
	res.Write.BandwidthBytes = float64(res.Write.Bytes) / busy
	res.Runtime = time.Duration(busy * float64(time.Second))
}

// rampBytes estimates what a steady execution wrote during its ramp: the
// measured write rate over the ramp time, but never more than the part of
// the byte cap the measured I/O left (fio counts ramp I/O towards io_size).
func rampBytes(job Job, res *measure.JobResult) int64 {
	if job.Ramp <= 0 || res.Write.Bytes <= 0 || !finiteNonNeg(res.Write.BandwidthBytes) {
		return 0
	}
	est := res.Write.BandwidthBytes * job.Ramp.Seconds()
	if job.IOBytes > 0 {
		total := float64(res.Read.Bytes + res.Write.Bytes)
		share := float64(res.Write.Bytes) / total
		if room := float64(job.IOBytes)*share - float64(res.Write.Bytes); room < est {
			est = max(room, 0)
		}
	}
	if est >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(est)
}

// addDir adds one job's direction to op and returns its latency statistic.
func addDir(op *measure.Op, d *fioDir) *latStat {
	if d == nil {
		return nil
	}
	ios := d.TotalIOs.int64()
	op.IOs = satAdd(op.IOs, ios)
	bytesDone := d.IOBytes.int64()
	if !d.IOKBytes.present && !d.BWBytes.present {
		// fio 2 printed io_bytes in KiB and had no io_kbytes.
		bytesDone = satMul(bytesDone, 1024)
	}
	op.Bytes = satAdd(op.Bytes, bytesDone)
	op.IOPS += d.IOPS.f()
	if d.BWBytes.present {
		op.BandwidthBytes += d.BWBytes.f()
	} else {
		op.BandwidthBytes += d.BW.f() * 1024
	}
	// Completion latency, falling back to total latency, then fio 2's µs.
	for _, c := range []struct {
		l   *fioLat
		div float64
	}{{d.ClatNS, 1e9}, {d.LatNS, 1e9}, {d.Clat, 1e6}, {d.Lat, 1e6}} {
		if s := latFrom(c.l, c.div, float64(ios)); s != nil && len(s.pct) > 0 {
			return s
		}
	}
	for _, c := range []struct {
		l   *fioLat
		div float64
	}{{d.ClatNS, 1e9}, {d.LatNS, 1e9}, {d.Clat, 1e6}, {d.Lat, 1e6}} {
		if s := latFrom(c.l, c.div, float64(ios)); s != nil {
			return s
		}
	}
	return nil
}

// latFrom reads a latency object; nil when it has no samples. ios is the
// weight to use when the object has no N (fio 2).
func latFrom(l *fioLat, div, ios float64) *latStat {
	if l == nil {
		return nil
	}
	n := l.N.f()
	if !l.N.present {
		n = ios
	}
	if math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return nil
	}
	s := &latStat{n: n, mean: l.Mean.f() / div}
	if div == 1e9 && len(l.Bins) > 0 {
		// Only the nanosecond objects of fio 3 carry bins worth reading.
		s.bins = make(map[int64]uint64, len(l.Bins))
		for k, v := range l.Bins {
			ns, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
			c := v.int64()
			if err != nil || ns <= 0 || c <= 0 {
				continue
			}
			s.bins[ns] += uint64(c)
		}
	}
	for k, v := range l.Percentile {
		p, err := strconv.ParseFloat(strings.TrimSpace(k), 64)
		val := v.f() / div
		// fio 2 pads the object with "0.00": 0 entries.
		if err != nil || !(p > 0 && p <= 100) || math.IsNaN(val) || math.IsInf(val, 0) || val < 0 {
			continue
		}
		s.pct = append(s.pct, pctPoint{p: p, v: val})
	}
	slices.SortFunc(s.pct, func(a, b pctPoint) int {
		if a.p != b.p {
			if a.p < b.p {
				return -1
			}
			return 1
		}
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	return s
}

func setLat(op *measure.Op, stats []latStat) {
	var w, sum float64
	for _, s := range stats {
		if math.IsNaN(s.mean) || math.IsInf(s.mean, 0) {
			continue
		}
		w += s.n
		sum += s.n * s.mean
	}
	if w > 0 {
		op.LatencyMeanSec = sum / w
	}
	if h, ok := mergedBins(stats); ok {
		// The histogram holds every sample: its quantiles are exact for
		// several jobs too, and equal fio's own for one job.
		op.Histogram = &h
		op.LatencyP50Sec = h.Quantile(0.50)
		op.LatencyP99Sec = h.Quantile(0.99)
		op.LatencyP999Sec = h.Quantile(0.999)
		return
	}
	op.LatencyP50Sec = mixtureQuantile(stats, 50)
	op.LatencyP99Sec = mixtureQuantile(stats, 99)
	op.LatencyP999Sec = mixtureQuantile(stats, 99.9)
}

// mergedBins merges the jobs' histograms; ok is false unless every job
// with samples printed one.
func mergedBins(stats []latStat) (measure.Histogram, bool) {
	if len(stats) == 0 {
		return measure.Histogram{}, false
	}
	all := map[int64]uint64{}
	for _, s := range stats {
		if len(s.bins) == 0 {
			return measure.Histogram{}, false
		}
		for ns, c := range s.bins {
			all[ns] += c
		}
	}
	h := measure.NewHistogram(all)
	return h, !h.Empty()
}

// mixtureQuantile returns the q-th percentile (0 < q <= 100) of the
// sample-weighted mixture of the jobs' latency distributions, each known
// only through its percentile table.
//
// Each job's CDF is read as a step function from its table:
// F_j(x) = the largest listed percent p with value(p) <= x. That is a lower
// bound of the true CDF at x, so the result errs high (towards the slower
// value) by at most the spacing of fio's percentile list. The answer is the
// smallest listed value x with sum_j n_j*F_j(x) / sum_j n_j >= q. For a
// single job this is exactly fio's own value for q when q is in its list,
// and for several jobs it lies between their smallest and largest values
// for q. It is NaN when no job has a table.
func mixtureQuantile(stats []latStat, q float64) float64 {
	const eps = 1e-9
	var candidates []float64
	var total float64
	for _, s := range stats {
		if len(s.pct) == 0 {
			continue
		}
		total += s.n
		for _, pt := range s.pct {
			candidates = append(candidates, pt.v)
		}
	}
	if total <= 0 || len(candidates) == 0 {
		return math.NaN()
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	for _, x := range candidates {
		var f float64
		for _, s := range stats {
			if len(s.pct) == 0 {
				continue
			}
			var fj float64
			for _, pt := range s.pct {
				if pt.v <= x && pt.p > fj {
					fj = pt.p
				}
			}
			f += s.n * fj
		}
		if f/total >= q-eps {
			return x
		}
	}
	// q lies above every listed percent (e.g. 99.9 with a custom
	// percentile_list ending at 99): the largest known value is the best
	// lower bound fio gave us.
	return candidates[len(candidates)-1]
}

// jobReads reports whether fio lays the job's files out with real writes
// before the measured I/O: it does for any job that reads.
func jobReads(job Job) bool {
	v := rwMode(job)
	return strings.Contains(v, "read") || strings.Contains(v, "rw")
}

// rwMode is the job's rw (or readwrite) option, "" when it has none.
func rwMode(job Job) string {
	for _, o := range job.Options {
		k, v, ok := strings.Cut(o, "=")
		if ok && (k == "rw" || k == "readwrite") {
			return v
		}
	}
	return ""
}

// jobDirect reports whether the job (or fio's echo of its options) asks for
// O_DIRECT.
func jobDirect(job Job, j *fioJob) bool {
	isOn := func(v string) bool { v = strings.TrimSpace(v); return v == "1" || v == "true" || v == "on" }
	for _, o := range job.Options {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			continue
		}
		if (k == "direct" && isOn(v)) || (k == "buffered" && !isOn(v)) {
			return true
		}
	}
	if j != nil {
		if isOn(j.Options["direct"]) {
			return true
		}
		if v, ok := j.Options["buffered"]; ok && !isOn(v) {
			return true
		}
	}
	return false
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// --- classification -----------------------------------------------------------

const (
	errnoEINVAL = 22
	errnoENOSPC = 28
	errnoEDQUOT = 122
)

var (
	oDirectText = []string{
		"does not support o_direct",
		"first direct io errored",
		"does not support direct=1",
	}
	noSpaceText = []string{
		"no space left on device",
		"disk quota exceeded",
	}
	// "fio: pid=0, err=28/file:filesetup.c:..."
	errnoInText = regexp.MustCompile(`\berr=\s*(\d{1,4})\b`)
)

// classifyErrno maps a job's errno (0 when unknown) and fio's text to a
// reason.
func classifyErrno(errno int, direct bool, text string) measure.Reason {
	lower := strings.ToLower(text)
	switch {
	case errno == errnoENOSPC || errno == errnoEDQUOT:
		return measure.ReasonNoSpace
	case containsAny(lower, oDirectText):
		return measure.ReasonODirectUnsupported
	case errno == errnoEINVAL && direct:
		return measure.ReasonODirectUnsupported
	case errno == 0 && containsAny(lower, noSpaceText):
		return measure.ReasonNoSpace
	}
	if errno == 0 {
		if m := errnoInText.FindStringSubmatch(text); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n != 0 {
				return classifyErrno(n, direct, text)
			}
		}
	}
	return measure.ReasonFioError
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// jobErrorFailure reports the first job with a non-zero errno.
func jobErrorFailure(job Job, doc *fioOutput, text string) *measure.Failure {
	for i := range doc.Jobs {
		j := &doc.Jobs[i]
		e := j.Error.f()
		if math.IsNaN(e) || e == 0 {
			continue
		}
		errno := int(e)
		if e < 0 || e > 1<<20 {
			errno = -1
		}
		reason := classifyErrno(max(errno, 0), jobDirect(job, j), text)
		head := fmt.Sprintf("fio job %q failed: errno %d", j.Name, errno)
		if errno > 0 {
			head += " (" + syscall.Errno(errno).Error() + ")"
		}
		return &measure.Failure{Reason: reason, Message: withText(head, text)}
	}
	return nil
}

func noJSONFailure(state extractState, exitCode int, text string) *measure.Failure {
	what := "no JSON in fio output"
	if state == jsonTruncated {
		what = "truncated or invalid JSON in fio output"
	}
	switch {
	case exitCode < 0 || exitCode >= 128:
		return &measure.Failure{Reason: measure.ReasonCrashed, Message: withText(fmt.Sprintf("fio died (%s) with %s", exitDescription(exitCode), what), text)}
	case exitCode == 126 || exitCode == 127:
		return &measure.Failure{Reason: measure.ReasonFioMissing, Message: withText(fmt.Sprintf("fio could not be run (exit code %d)", exitCode), text)}
	case exitCode == 0:
		return &measure.Failure{Reason: measure.ReasonParse, Message: withText(what, text)}
	}
	reason := classifyErrno(0, false, text)
	return &measure.Failure{Reason: reason, Message: withText(fmt.Sprintf("fio exited with code %d and %s", exitCode, what), text)}
}

func exitFailure(exitCode int, text string) *measure.Failure {
	if exitCode < 0 || exitCode >= 128 {
		return &measure.Failure{Reason: measure.ReasonCrashed, Message: withText(fmt.Sprintf("fio was interrupted (%s); its figures are partial", exitDescription(exitCode)), text)}
	}
	return &measure.Failure{Reason: classifyErrno(0, false, text), Message: withText(fmt.Sprintf("fio exited with code %d", exitCode), text)}
}

func exitDescription(exitCode int) string {
	switch {
	case exitCode < 0:
		return "killed by a signal"
	case exitCode > 128 && exitCode < 128+65:
		return fmt.Sprintf("exit code %d, signal %s", exitCode, syscall.Signal(exitCode-128))
	}
	return fmt.Sprintf("exit code %d", exitCode)
}

// fioText is fio's own text: the non-JSON lines of stdout, then stderr,
// with blank and repeated lines dropped.
func fioText(notes, stderr []byte) string {
	var lines []string
	seen := map[string]bool{}
	total := 0
	for _, src := range [][]byte{notes, stderr} {
		for line := range strings.SplitSeq(string(src), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || seen[line] {
				continue
			}
			seen[line] = true
			lines = append(lines, line)
			total += len(line) + 1
			if total > 4*maxMessage {
				return strings.Join(lines, "\n")
			}
		}
	}
	return strings.Join(lines, "\n")
}

func withText(head, text string) string {
	if text == "" {
		return trimMessage(head)
	}
	return trimMessage(head + ": " + text)
}

// trimMessage bounds s to maxMessage bytes on a UTF-8 boundary and drops
// invalid UTF-8.
func trimMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxMessage {
		return s
	}
	const ellipsis = "..."
	cut := maxMessage - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
