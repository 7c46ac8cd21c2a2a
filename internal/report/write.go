package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// WriteJSON writes r as an indented JSON document (see docs/output.md).
// Absent lists are written as [] rather than null, so consumers can iterate
// without checks.
func WriteJSON(w io.Writer, r Run) error {
	r.Engines = slices.Clone(r.Engines)
	if r.Engines == nil {
		r.Engines = []Engine{}
	}
	for i := range r.Engines {
		e := &r.Engines[i]
		if e.Warnings == nil {
			e.Warnings = []string{}
		}
		if e.Results == nil {
			e.Results = []measure.Result{}
		}
		if e.Samples == nil {
			e.Samples = []measure.Sample{}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write run report as JSON: %w", err)
	}
	return nil
}

// ciMarker flags an interval whose coverage is below the run's confidence.
const ciMarker = "*"

// WriteTable writes r for a human: per engine a header describing what was
// measured and a table in the spirit of the seed article ("overlay2 92% of
// host"), with the interval, raw figures, round counts and footnotes, then
// the failures.
func WriteTable(w io.Writer, r Run) error {
	ew := &errWriter{w: w}
	conf := r.Confidence
	if !(conf > 0 && conf < 1) {
		conf = measure.DefaultConfidence
	}
	ew.printf("layerprobe %s: profile %s, %s, %s, %s, %s written\n",
		orDash(r.LayerprobeVersion), orDash(r.Profile), roundsText(r.Rounds), modeText(r.Mode),
		formatDuration(r.DurationSeconds), formatBytes(r.BytesWritten))
	for _, e := range r.Engines {
		ew.printf("\n")
		writeEngine(ew, r, e, conf)
	}
	if ew.err != nil {
		return fmt.Errorf("write run report table: %w", ew.err)
	}
	return nil
}

func writeEngine(ew *errWriter, r Run, e Engine, conf float64) {
	writeEngineInfo(ew, e)
	if len(e.Results) > 0 || e.BytesWritten > 0 {
		rounds := roundsText(r.Rounds)
		if r.Rounds == 0 && e.Rounds > 0 {
			rounds = fmt.Sprintf("%d rounds (adaptive, stopped by %s)", e.Rounds, orDash(string(e.StopReason)))
		}
		ew.printf("  measurement:  profile %s, %s, %s, %s written\n",
			orDash(r.Profile), rounds, formatDuration(e.DurationSeconds), formatBytes(e.BytesWritten))
	}
	steady := ""
	if e.Cold != nil {
		steady = "Steady state (one long-lived probe container):"
	}
	writeEngineBody(ew, e, conf, steady, "Cold (a fresh container per round, fsync job in its first seconds):")
}

// writeEngineInfo writes the engine's heading and, when the engine was
// reached, its driver, engine and fio lines.
func writeEngineInfo(ew *errWriter, e Engine) {
	ew.printf("Engine %s (%s)\n", e.Name, orDash(e.Endpoint))
	if e.Driver == "" {
		return
	}
	driver := e.Driver
	if e.DriverClass != "" && e.DriverClass != "supported" {
		driver += " (" + e.DriverClass + ")"
	}
	ew.printf("  driver:       %s on %s, data root %s, image store %s\n",
		driver, orDash(e.BackingFS), orDash(e.DataRoot), orDash(e.ImageStore))
	if e.DriverNote != "" {
		ew.printf("                %s\n", e.DriverNote)
	}
	rootless := ""
	if e.Rootless {
		rootless = ", rootless"
	}
	ew.printf("  engine:       %s%s%s\n", runtimeName(e.Runtime), orDash(e.EngineVersion), rootless)
	if e.HostFioVersion != "" {
		ew.printf("  fio:          %s in the probe image, %s on the host: the arms run different fio builds\n", orDash(e.FioVersion), e.HostFioVersion)
	} else {
		ew.printf("  fio:          %s\n", orDash(e.FioVersion))
	}
	if e.Topology == "vm" {
		vm := "a VM"
		if e.VM != "" {
			vm = e.VM + "'s VM"
		}
		ew.printf("  topology:     vm: the engine runs in %s; every ratio below is against the NATIVE HOST DISK, not a same-disk overhead\n", vm)
		ew.printf("                host = this host's disk, bind = host directory through the VM's %s share, volume and container = the VM's disk\n", orDash(e.Share))
	}
}

// writeEngineBody writes the host arm's cgroup alarm, the warnings, the
// error and the results: the steady table under steadyTitle ("" for none)
// and the cold block under coldTitle, then the footnotes and failures.
func writeEngineBody(ew *errWriter, e Engine, conf float64, steadyTitle, coldTitle string) {
	if e.HostArmCgroup == "outside" {
		// Louder than a warning: on a busy host the numbers below are
		// then off by a factor, not a few percent.
		ew.printf("  !!! HOST ARM NOT IN THE PROBE CONTAINER'S CPU CGROUPS: %s\n", e.HostArmCgroupError)
		ew.printf("  !!! With busy CPUs, CPU contention reads as storage overhead below; docs/security.md says what access the join needs.\n")
	}
	for _, warn := range e.Warnings {
		ew.printf("  warning:      %s\n", warn)
	}
	if e.Error != nil {
		ew.printf("  ERROR: this engine could not be measured: %s (%s)\n", e.Error.Message, e.Error.Code)
	}
	if len(e.Results) == 0 && e.Cold == nil {
		if e.Error == nil {
			ew.printf("  no results\n")
		}
		return
	}
	lowCoverage := false
	if len(e.Results) > 0 {
		ew.printf("\n")
		if steadyTitle != "" {
			ew.printf("  %s\n", steadyTitle)
		}
		lowCoverage = writeResults(ew, e.Results, conf)
	}
	if e.Cold != nil {
		lowCoverage = writeCold(ew, e.Cold, coldTitle, conf) || lowCoverage
	}

	ew.printf("\n  %% of host: the target's speed relative to the host's in the same round, Hodges-Lehmann\n")
	ew.printf("  estimate over rounds with its %s confidence interval; 100%% = as fast as the host, below = slower.\n", formatPercentPlain(100*conf))
	ew.printf("  Metric: %s;\n", headlineFootnote())
	ew.printf("  for a latency the speed is host latency / target latency.\n")
	if lowCoverage {
		ew.printf("  %s fewer than %d paired rounds: no %s interval exists yet (the range of the rounds would cover\n",
			ciMarker, stats.MinN(conf), formatPercentPlain(100*conf))
		ew.printf("    less), so none is shown; the estimate alone is no firm result. Run more rounds.\n")
	}
	writeFailures(ew, e.Results)
	if e.Cold != nil {
		writeFailures(ew, e.Cold.Results)
		writeCopyUpFailures(ew, e.Cold.CopyUp.Samples)
	}
}

// writeCold writes the cold fsync rows and the copy-up table.
func writeCold(ew *errWriter, c *Cold, title string, conf float64) bool {
	ew.printf("\n  %s\n", title)
	low := false
	if len(c.Results) > 0 {
		low = writeResults(ew, c.Results, conf)
	} else {
		ew.printf("  no results\n")
	}
	if c.noCopyUp {
		return low
	}
	reflink := "unknown"
	if c.CopyUp.Reflink != nil {
		reflink = map[bool]string{true: "yes (copy-up can clone extents)", false: "no (copy-up copies every byte)"}[*c.CopyUp.Reflink]
	}
	ew.printf("\n  Copy-up: first 4 KiB write + fsync to a file in the image layer vs an equal host file; reflink: %s\n", reflink)
	if len(c.CopyUp.Sizes) == 0 {
		ew.printf("  no copy-up results\n")
		return low
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  FILE SIZE\tHOST\tCONTAINER\tEXTRA [%s CI]\tROUNDS\n", formatPercentPlain(100*conf))
	for _, sz := range c.CopyUp.Sizes {
		extra := fmt.Sprintf("%s [%s–%s]", formatLatency(sz.ExtraSeconds), formatLatency(sz.ExtraCILow), formatLatency(sz.ExtraCIHigh))
		if sz.Withheld || sz.Coverage < conf {
			extra, low = formatLatency(sz.ExtraSeconds)+" [no interval]"+ciMarker, true
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", formatBytes(sz.SizeBytes),
			formatLatency(sz.HostSeconds), formatLatency(sz.ContainerSeconds), extra, sz.Rounds)
	}
	_ = tw.Flush()
	if c.CopyUp.CostSecondsPerMiB != nil {
		ew.printf("  copy-up cost: %s per MiB of file (Theil-Sen slope of the extra latency over the size)\n",
			formatLatency(*c.CopyUp.CostSecondsPerMiB))
	}
	low = writeLookup(ew, c.Lookup, conf) || low
	writeStartup(ew, c.Startup)
	return low
}

// writeLookup writes the lookup table: the fresh container's stat walk of
// the image's tree and its first creates in the tree's directories,
// against the same on the host's copy.
func writeLookup(ew *errWriter, l *measure.Lookup, conf float64) bool {
	if l == nil {
		return false
	}
	ew.printf("\n  Lookups in the image's own tree (2000 small files in 400 directories): stat walk, and first create in a directory (its copy-up), vs the host's copy\n")
	if len(l.Summaries) == 0 {
		ew.printf("  no lookup results\n")
		return false
	}
	low := false
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  OPERATION\tHOST\tCONTAINER\tEXTRA [%s CI]\tROUNDS\n", formatPercentPlain(100*conf))
	for _, s := range l.Summaries {
		extra := fmt.Sprintf("%s [%s–%s]", formatLatency(s.ExtraSeconds), formatLatency(s.ExtraCILow), formatLatency(s.ExtraCIHigh))
		if s.Withheld || s.Coverage < conf {
			extra, low = formatLatency(s.ExtraSeconds)+" [no interval]"+ciMarker, true
		}
		name := map[string]string{measure.LookupWalk: "stat walk", measure.LookupDirCreate: "first create in a directory"}[s.Op]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", name, formatLatency(s.HostSeconds), formatLatency(s.ContainerSeconds), extra, s.Rounds)
	}
	_ = tw.Flush()
	return low
}

// writeStartup writes the start-up table: per image size the median time
// of create + start + first exec + remove and the bytes a start wrote to
// the data root's device, with the slopes over the size.
func writeStartup(ew *errWriter, st *measure.Startup) {
	if st == nil {
		return
	}
	ew.printf("\n  Container start-up: create + start + first exec + remove, by files in the image; bytes written to %s per start\n", st.Device)
	if len(st.Sizes) == 0 {
		ew.printf("  no start-up results\n")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  IMAGE FILES\tTIME\tDEVICE BYTES\tROUNDS\n")
		for _, sz := range st.Sizes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", formatBytes(sz.ImageBytes), formatLatency(sz.Seconds), formatBytes(int64(sz.DeviceBytes)), sz.Rounds)
		}
		_ = tw.Flush()
	}
	if st.SecondsPerMiB != nil && st.BytesPerImageByte != nil {
		ew.printf("  start-up slope: %s and %.2f bytes written per MiB / byte of image (Theil-Sen; about 1 byte per byte for each copy of the image a start makes)\n",
			formatLatency(*st.SecondsPerMiB), *st.BytesPerImageByte)
	}
	for _, s := range st.Samples {
		if s.Error != "" {
			ew.printf("    round %d, %s image: %s\n", s.Round, formatBytes(s.ImageBytes), oneLine(s.Error))
		}
	}
}

func writeCopyUpFailures(ew *errWriter, samples []measure.CopyUpSample) {
	var failed []measure.CopyUpSample
	for _, s := range samples {
		if s.Error != "" {
			failed = append(failed, s)
		}
	}
	if len(failed) == 0 {
		return
	}
	ew.printf("\n  Copy-up failures (%d):\n", len(failed))
	for _, s := range failed {
		ew.printf("    round %d, %s %s: %s\n", s.Round, s.Target, formatBytes(s.SizeBytes), oneLine(s.Error))
	}
}

// writeResults writes the table, grouped by workload with the host row first as
// the baseline of the rows below it. It reports whether any interval was
// marked as under-covered.
func writeResults(ew *errWriter, results []measure.Result, conf float64) bool {
	rows := slices.Clone(results)
	slices.SortStableFunc(rows, func(a, b measure.Result) int {
		return cmp.Or(
			measure.CompareWorkloads(a.Workload, b.Workload),
			measure.CompareTargets(a.Target, b.Target),
		)
	})
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  TARGET\tWORKLOAD\t%% OF HOST [%s CI]\tIOPS\tBANDWIDTH\tWRITE P99\tFSYNC P99\tROUNDS OK/FAILED\n",
		formatPercentPlain(100*conf))
	lowCoverage := false
	for _, res := range rows {
		pct := "baseline"
		if res.Target != measure.TargetHost {
			var low bool
			pct, low = formatOverhead(res.Overhead, measure.HeadlineMetric(res.Workload), conf)
			lowCoverage = lowCoverage || low
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\n",
			res.Target, res.Workload, pct,
			formatIOPS(res.Raw.IOPS), formatBandwidth(res.Raw.BandwidthBytes),
			formatLatency(res.Raw.LatencyP99), formatLatency(res.Raw.FsyncP99),
			res.RoundsOK, res.RoundsFailed)
	}
	// tabwriter only reports errors of the underlying writer, which
	// errWriter records.
	_ = tw.Flush()
	return lowCoverage
}

func writeFailures(ew *errWriter, results []measure.Result) {
	var n int
	for _, res := range results {
		n += len(res.Failures)
	}
	if n == 0 {
		return
	}
	ew.printf("\n  Failures (%d):\n", n)
	for _, res := range results {
		for _, f := range res.Failures {
			ew.printf("    round %d, %s %s: %s: %s\n", f.Round, res.Target, res.Workload, f.Reason, oneLine(f.Message))
		}
	}
}

// formatOverhead renders the headline overhead as "92% [88–95]", marked when
// the interval's coverage is below conf. It reports whether it marked it.
func formatOverhead(overhead map[string]measure.Overhead, metric string, conf float64) (string, bool) {
	o, ok := overhead[metric]
	if !ok || o.N == 0 || math.IsNaN(o.PercentOfHost) {
		return "n/a (no paired rounds)", false
	}
	if o.Withheld || o.Coverage < conf {
		return fmt.Sprintf("%s [no interval]%s", formatPercentPlain(o.PercentOfHost), ciMarker), true
	}
	return fmt.Sprintf("%s [%s–%s]", formatPercentPlain(o.PercentOfHost),
		formatNumber(o.PercentLow), formatNumber(o.PercentHigh)), false
}

func headlineFootnote() string {
	parts := make([]string, len(measure.Workloads))
	for i, w := range measure.Workloads {
		parts[i] = metricTitle(measure.HeadlineMetric(w)) + " for " + string(w)
	}
	return strings.Join(parts, ", ")
}

func metricTitle(metric string) string {
	switch metric {
	case measure.MetricIOPS:
		return "IOPS"
	case measure.MetricBandwidth:
		return "bandwidth"
	case measure.MetricLatencyP50:
		return "write p50 latency"
	case measure.MetricLatencyP99:
		return "write p99 latency"
	case measure.MetricFsyncP99:
		return "fsync p99 latency"
	}
	return metric
}

func modeText(mode measure.Mode) string {
	switch mode {
	case measure.ModeSteady:
		return "steady state"
	case measure.ModeCold:
		return "cold (fresh containers, copy-up)"
	case measure.ModeBoth:
		return "steady state and cold"
	case "":
		return "-"
	}
	return string(mode)
}

// formatPercentPlain renders a percentage without decimals: "92%". The
// seed article's precision; the intervals say how much more would be noise.
func formatPercentPlain(p float64) string { return formatNumber(p) + "%" }

func formatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	return fmt.Sprintf("%.0f", v)
}

func formatIOPS(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func formatBandwidth(bytesPerSecond float64) string {
	if math.IsNaN(bytesPerSecond) || math.IsInf(bytesPerSecond, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB/s", bytesPerSecond/(1<<20))
}

// formatLatency renders seconds in the unit that gives 1 to 999: "812 µs",
// "8.19 ms", with three significant digits.
func formatLatency(sec float64) string {
	if math.IsNaN(sec) || math.IsInf(sec, 0) {
		return "-"
	}
	if sec < 0 {
		// A cold extra latency can be negative (host slower that round).
		return "-" + formatLatency(-sec)
	}
	v, unit := sec, "s"
	switch {
	case sec < 1e-6:
		v, unit = sec*1e9, "ns"
	case sec < 1e-3:
		v, unit = sec*1e6, "µs"
	case sec < 1:
		v, unit = sec*1e3, "ms"
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// FormatBytes prints a byte count in binary units: "512 B", "64.0 MiB".
func FormatBytes(b int64) string { return formatBytes(b) }

// FormatLatency prints seconds in the unit that gives 1 to 999: "812 µs",
// "8.19 ms", "-1.20 s".
func FormatLatency(sec float64) string { return formatLatency(sec) }

// FormatExtraSeconds prints extra time with its sign: "+50.0 ms", "-226 ms".
func FormatExtraSeconds(s float64) string {
	if s > 0 {
		return "+" + formatLatency(s)
	}
	return formatLatency(s)
}

func formatBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v, exp := float64(b), 0
	for v >= unit && exp < 5 {
		v /= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[exp-1])
}

func formatDuration(sec float64) string {
	if math.IsNaN(sec) || sec < 0 {
		return "-"
	}
	d := time.Duration(sec * float64(time.Second))
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a multi-line fio message from breaking the list.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// errWriter remembers the first write error so the table code can write
// freely and check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (ew *errWriter) Write(p []byte) (int, error) {
	if ew.err != nil {
		return 0, ew.err
	}
	n, err := ew.w.Write(p)
	ew.err = err
	return n, err
}

func (ew *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(ew, format, args...)
}

// roundsText is the run's round count: fixed, or adaptive (0).
func roundsText(n int) string {
	if n == 0 {
		return "adaptive rounds"
	}
	return fmt.Sprintf("%d rounds", n)
}

// runtimeName names the engine in the table: "Podman 4.3.1", "Docker
// 20.10.24"; an output without a runtime (an older agent's) says "version".
func runtimeName(runtime string) string {
	switch runtime {
	case "docker":
		return "Docker "
	case "podman":
		return "Podman "
	}
	return "version "
}
