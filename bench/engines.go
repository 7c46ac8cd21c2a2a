//go:build bench

package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// engineCase is one engine and storage driver of the engines section.
type engineCase struct {
	name, label string
	opts        testdaemon.Options
}

// engineCases are what the engines section measures, one after another,
// each on a private daemon of its own: every engine and driver this machine
// can run (README, "Engines and storage drivers").
var engineCases = []engineCase{
	{"overlay2-ext4", "Docker, overlay2 on ext4", testdaemon.Options{Driver: "overlay2"}},
	{"btrfs", "Docker, btrfs driver on btrfs (loop file)", testdaemon.Options{Driver: "btrfs", SizeMiB: btrfsLoopMiB}},
	{"overlay2-xfs", "Docker, overlay2 on xfs (reflink, loop file)", testdaemon.Options{Driver: "overlay2", Backing: "xfs", SizeMiB: btrfsLoopMiB}},
	{"fuse-overlayfs", "Docker, fuse-overlayfs on ext4", testdaemon.Options{Driver: "fuse-overlayfs"}},
	{"podman-overlay", "Podman, overlay on ext4", testdaemon.Options{Engine: testdaemon.EnginePodman}},
	{"containerd-overlayfs", "containerd, overlayfs snapshotter on ext4", testdaemon.Options{Engine: testdaemon.EngineContainerd, Driver: "overlayfs"}},
	// vfs copies the image for every container: the driver whose start-up
	// grows with the image.
	{"vfs-ext4", "Docker, vfs on ext4", testdaemon.Options{Driver: "vfs"}},
}

// engineRun is one `layerprobe run --mode both` on one engine at default
// settings.
type engineRun struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	// Runtime, EngineVersion, Driver and BackingFS are as the run reported
	// them.
	Runtime       string `json:"runtime,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	Driver        string `json:"driver,omitempty"`
	BackingFS     string `json:"backing_fs,omitempty"`
	// Steady is the steady-state measurement (its executions and headline
	// overheads); BytesWritten and Seconds are the whole run's, cold
	// included.
	Steady       *runDoc `json:"steady,omitempty"`
	BytesWritten int64   `json:"bytes_written"`
	Seconds      float64 `json:"duration_seconds"`
	// Cold is the cold probe's summary and copy-up samples.
	Cold *coldDoc `json:"cold,omitempty"`
	// Startup is the container start-up cost from a second run
	// (startupArgs), without its samples: the default run's steady state
	// spends the byte budget that the start-up images would need.
	Startup *measure.Startup `json:"startup,omitempty"`
	// Table is what `layerprobe run` prints for this run (without
	// --output json): the page shows it whole.
	Table string `json:"table,omitempty"`
	// Error is why the run, or a part of it, failed; what it measured
	// before is kept.
	Error string `json:"error,omitempty"`
}

// coldDoc keeps a run's cold measurement without its samples' latency
// histograms, and its lookups' summaries without their samples.
type coldDoc struct {
	Results []measure.Result        `json:"results"`
	CopyUp  measure.CopyUp          `json:"copy_up"`
	Lookup  []measure.LookupSummary `json:"lookup,omitempty"`
}

// engineArgs are the arguments of every engine's run: the default profile
// and budgets, steady state and the cold probe.
var engineArgs = []string{"--mode", "both"}

// startupArgs are the arguments of every engine's second run: the cold
// probe alone with the start-up images, and room for them (vfs writes two
// copies of the largest image at every start).
var startupArgs = []string{"--mode", "cold", "--rounds", "3", "--startup-images", "10MiB,100MiB,500MiB", "--max-bytes", "16GiB"}

// measureEngines runs engineCases, one private daemon at a time; an engine
// that fails is recorded and the others still run.
func measureEngines(ctx context.Context, t *testing.T, p *progress, bin, work, lockFile string, short bool) ([]engineRun, error) {
	args := engineArgs
	if short {
		args = append([]string{"--profile", "smoke"}, args...)
	}
	var out []engineRun
	var failed []string
	for _, c := range engineCases {
		er := engineRun{Name: c.name, Label: c.label}
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			if short && opts.SizeMiB > 0 {
				opts.SizeMiB = 4096
			}
			var d *testdaemon.Daemon
			config := ""
			if opts.Engine == testdaemon.EngineContainerd {
				d = testdaemon.StartContainerd(t, opts)
				// containerd is named in the configuration (DOCKER_HOST
				// does not reach it).
				config = fmt.Sprintf("engines:\n  - name: node\n    type: containerd\n    host: %s\n    snapshotter: %s\n", d.Host, opts.Driver)
			} else {
				d = testdaemon.Start(t, opts)
			}
			l := lpRun{binary: "new", bin: bin, host: d.Host, lockFile: lockFile, workDir: filepath.Join(work, "engine-"+c.name),
				config: config, args: args, timeout: 30 * time.Minute}
			p.logf("engines: %s: layerprobe run %s", c.name, strings.Join(args, " "))
			stop := p.ticker("engines "+c.name, 5*time.Minute, 5*time.Minute)
			o, err := l.execute(ctx)
			stop()
			if err != nil {
				er.Error = err.Error()
				return
			}
			er.fill(o, config)
			p.logf("engines: %s: %s written in %s", c.name, gib(er.BytesWritten), dur(er.Seconds))
			sargs := startupArgs
			if short {
				sargs = []string{"--profile", "smoke", "--mode", "cold", "--rounds", "1", "--startup-images", "10MiB", "--max-bytes", "1GiB"}
			}
			l.args, l.workDir = sargs, filepath.Join(work, "engine-startup-"+c.name)
			p.logf("engines: %s: layerprobe run %s", c.name, strings.Join(sargs, " "))
			so, err := l.execute(ctx)
			if err == nil && (len(so.doc.Engines) == 0 || so.doc.Engines[0].Cold == nil || so.doc.Engines[0].Cold.Startup == nil) {
				err = fmt.Errorf("no start-up section (stderr: %s)", so.stderr)
			}
			if err != nil {
				er.Error = strings.TrimPrefix(er.Error+"; start-up run: "+err.Error(), "; ")
				return
			}
			st := *so.doc.Engines[0].Cold.Startup
			st.Samples = nil
			er.Startup = &st
		})
		if er.Error != "" {
			failed = append(failed, c.name+": "+er.Error)
		}
		out = append(out, er)
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("engines: %s", strings.Join(failed, "; "))
	}
	return out, nil
}

// fill takes what the run's document says of its one engine; config is
// the YAML the run was given.
func (er *engineRun) fill(o lpOutput, config string) {
	e := o.doc.Engines[0]
	er.Runtime, er.EngineVersion, er.Driver, er.BackingFS = e.Runtime, e.EngineVersion, e.Driver, e.BackingFS
	er.BytesWritten, er.Seconds = o.doc.BytesWritten, o.doc.DurationSeconds
	if len(e.Results) > 0 {
		er.Steady = docOf("new", o.recorded, config, nil, o.doc)
	}
	if e.Cold != nil {
		er.Cold = &coldDoc{Results: e.Cold.Results, CopyUp: e.Cold.CopyUp}
		if e.Cold.Lookup != nil {
			er.Cold.Lookup = e.Cold.Lookup.Summaries
		}
	}
	var msgs []string
	var b strings.Builder
	if err := report.WriteTable(&b, *o.doc); err != nil {
		msgs = append(msgs, err.Error())
	}
	er.Table = b.String()
	if e.Error != nil {
		msgs = append(msgs, fmt.Sprintf("engine error %s: %s", e.Error.Code, e.Error.Message))
	}
	if o.exitErr != nil {
		msgs = append(msgs, fmt.Sprintf("%v; stderr: %s", o.exitErr, o.stderr))
	}
	er.Error = strings.Join(msgs, "; ")
}

// percentOfHost renders an overhead as `layerprobe run` prints it: the
// target's speed in percent of the host's, "96% [89–123]".
func percentOfHost(o measure.Overhead, ok bool) string {
	if !ok || o.N == 0 || math.IsNaN(o.PercentOfHost) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%% [%.0f–%.0f]", o.PercentOfHost, o.PercentLow, o.PercentHigh)
}

// coldFsync is the cold probe's container fsync p99 overhead.
func (c *coldDoc) coldFsync() (measure.Overhead, bool) {
	if c == nil {
		return measure.Overhead{}, false
	}
	for _, r := range c.Results {
		if r.Target == measure.TargetContainer && r.Workload == measure.Fsync {
			o, ok := r.Overhead[measure.MetricFsyncP99]
			return o, ok
		}
	}
	return measure.Overhead{}, false
}

// lookupExtra renders what a lookup op took more in the fresh container
// than on the host, with its interval: "+13.1 ms [10.9, 16.2]".
func (c *coldDoc) lookupExtra(op string) string {
	if c == nil {
		return "n/a"
	}
	for _, l := range c.Lookup {
		if l.Op != op || l.Rounds == 0 {
			continue
		}
		ci := ""
		if !math.IsNaN(l.ExtraCILow) && !math.IsNaN(l.ExtraCIHigh) && !l.Withheld {
			ci = fmt.Sprintf(" [%s, %s]", msSigned(l.ExtraCILow), msSigned(l.ExtraCIHigh))
		}
		return fmt.Sprintf("%s%s (host %s)", msSigned(l.ExtraSeconds), ci, report.FormatLatency(l.HostSeconds))
	}
	return "n/a"
}

// msSigned renders seconds as signed milliseconds: "+13.1 ms", "-0.004 ms".
func msSigned(s float64) string {
	ms := s * 1e3
	if math.Abs(ms) >= 1 {
		return fmt.Sprintf("%+.1f ms", ms)
	}
	return fmt.Sprintf("%+.3f ms", ms)
}

// startupCells renders the start-up times per image size ("0.35 / 0.34 /
// 0.41 s"), the bytes a start wrote per size ("3 / 12 / 9 MiB") and the
// slope of the bytes over the image's size.
func startupCells(st *measure.Startup) (times, written, slope string) {
	if st == nil || len(st.Sizes) == 0 {
		return "n/a", "n/a", "n/a"
	}
	var ts, ws, sizes []string
	for _, z := range st.Sizes {
		sizes = append(sizes, fmt.Sprintf("%d", z.ImageBytes>>20))
		if z.Rounds == 0 {
			ts, ws = append(ts, "–"), append(ws, "–")
			continue
		}
		ts = append(ts, fmt.Sprintf("%.2f", z.Seconds))
		ws = append(ws, fmt.Sprintf("%.0f", z.DeviceBytes/(1<<20)))
	}
	times = strings.Join(ts, " / ") + " s (" + strings.Join(sizes, " / ") + " MiB)"
	written = strings.Join(ws, " / ") + " MiB"
	slope = "n/a"
	if b := st.BytesPerImageByte; b != nil {
		// A fit that rounds to zero is no slope, whichever side of it:
		// "-0.00" read as a start-up that shrinks an image.
		slope = fmt.Sprintf("%.2f B per image byte", math.Round(*b*100)/100+0)
	}
	return times, written, slope
}

// copyUpAt renders the median first write + fsync of a file size, host /
// container.
func (c *coldDoc) copyUpAt(size int64) string {
	if c == nil {
		return "n/a"
	}
	for _, s := range c.CopyUp.Sizes {
		if s.SizeBytes == size && s.Rounds > 0 {
			return report.FormatLatency(s.HostSeconds) + " / " + report.FormatLatency(s.ContainerSeconds)
		}
	}
	return "n/a"
}

func writeEngines(w *mdWriter, r *results) {
	w.p("## 7. Engines and storage drivers")
	if len(r.Engines) == 0 {
		w.p("Not measured in this run.")
		return
	}
	first, last := time.Time{}, time.Time{}
	for _, e := range r.Engines {
		if e.Steady == nil {
			continue
		}
		if first.IsZero() || e.Steady.StartedAt.Before(first) {
			first = e.Steady.StartedAt
		}
		if end := e.Steady.StartedAt.Add(time.Duration(e.Seconds * float64(time.Second))); end.After(last) {
			last = end
		}
	}
	when := ""
	if !first.IsZero() {
		when = fmt.Sprintf(", %s–%s", first.Format("2 Jan 15:04"), last.Format("15:04 MST"))
	}
	w.p("What a default `layerprobe run %s` reads on every engine and storage driver this machine can run: one "+
		"run each, one after another%s, each on a private daemon of its own (loop files are sparse files on the "+
		"same disk). A run's figures are a measurement of its minutes on a shared disk: sections 2–4 show how far "+
		"one run's estimate strays, and each interval below is that run's own. Percent of the host's speed, as "+
		"`layerprobe run` prints it (below 100%%: slower than the host).", strings.Join(engineArgs, " "), when)
	var rows [][]string
	for _, e := range r.Engines {
		get := func(target, workload string) string {
			o, ok := e.Steady.reported(target, workload)
			return percentOfHost(o, ok)
		}
		run := "–"
		if e.Steady != nil {
			run = fmt.Sprintf("%d, %s; %s in %s", e.Steady.Rounds, e.Steady.StopReason, gib(e.BytesWritten), dur(e.Seconds))
		}
		small := get("container", "smallfiles") + " · " + get("bind", "smallfiles") + " · " + get("volume", "smallfiles")
		rows = append(rows, []string{e.Label, get("container", "fsync"), get("container", "randwrite"),
			get("container", "seqwrite"), small, get("bind", "fsync"), run})
	}
	w.p("Steady state, the container's writable layer against the host (bind: the A/A control):")
	w.table([]string{"engine and driver", "fsync p99", "randwrite IOPS", "seqwrite bandwidth",
		"smallfiles ops/s: container · bind · volume", "bind fsync p99", "rounds, stopped by; written in"}, rows)
	rows = nil
	for _, e := range r.Engines {
		cost, reflink := "n/a", "n/a"
		if e.Cold != nil {
			if c := e.Cold.CopyUp.CostSecondsPerMiB; c != nil {
				cost = report.FormatLatency(*c)
			}
			if f := e.Cold.CopyUp.Reflink; f != nil {
				reflink = "no"
				if *f {
					reflink = "yes"
				}
			}
		}
		o, ok := e.Cold.coldFsync()
		rows = append(rows, []string{e.Label, percentOfHost(o, ok), e.Cold.copyUpAt(1 << 20), e.Cold.copyUpAt(64 << 20), cost, reflink})
	}
	w.p("Cold: a fresh container per round, its fsync workload in its first seconds; copy-up, the first 4 KiB write + " +
		"fsync to a file of the image against the same write to an equal file on the host (medians over the " +
		"rounds), and the implied cost per MiB of file:")
	w.table([]string{"engine and driver", "cold fsync p99", "first write + fsync, 1 MiB file: host / container",
		"64 MiB file: host / container", "copy-up per MiB", "reflink"}, rows)
	rows = nil
	for _, e := range r.Engines {
		times, written, slope := startupCells(e.Startup)
		rows = append(rows, []string{e.Label, times, written, slope, e.Cold.lookupExtra(measure.LookupWalk), e.Cold.lookupExtra(measure.LookupDirCreate)})
	}
	w.p("Container start-up, create + start + first exec + remove from images with 10, 100 and 500 MiB of files "+
		"added (medians over the rounds of a second run on the same daemon, `layerprobe run %s`: the default run's "+
		"steady state spends the byte budget the start-up images need), the bytes each start wrote to the data "+
		"root's device and their slope over the image's size (about 1 per copy of the image a start makes); and, "+
		"from the default run, the lookups in the cold image's tree of 2000 small files in three image layers, what "+
		"they took more in the fresh container than on the host: a stat walk of the whole tree, and the first "+
		"create in a directory of each depth (its copy-up):", strings.Join(startupArgs, " "))
	w.table([]string{"engine and driver", "start-up", "written per start", "written per image byte",
		"stat walk of the tree, extra", "first create in an image directory, extra"}, rows)
	for _, e := range r.Engines {
		if e.Error != "" {
			w.line("- %s: %s", e.Label, strings.ReplaceAll(strings.TrimSpace(e.Error), "\n", " "))
		}
	}
	w.WriteString("\n")
	for _, e := range r.Engines {
		if e.Table == "" {
			continue
		}
		w.p("%s, as `layerprobe run %s` printed it:", e.Label, strings.Join(engineArgs, " "))
		w.p("```\n%s\n```", strings.TrimRight(e.Table, "\n"))
	}
}
