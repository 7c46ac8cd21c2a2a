// Package enginetest is a fake container engine for the tests of what
// drives one (internal/probe, internal/agent). It answers like a Docker
// engine holding layerprobe's probe containers but runs nothing: every fio
// job executed "in a container" prints fio's JSON output at once, with a
// speed set per target, and FakeFio is the host side of the same.
package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/helper"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// FioVersion is what the fake fio on both sides prints for --version.
const FioVersion = "fio-3.33"

// ErrGone is the error of an Exec in a probe container that was removed.
var ErrGone = errors.New("no such container")

// Job identifies one fio job the fake ran in a probe container.
type Job struct {
	Target   measure.Target
	Workload measure.Workload
	Mode     measure.Mode // of the container it ran in
	Layout   bool         // the job's file being laid out, not a measurement
	File     string       // the job's file (fio's --filename), empty for a fresh file
	// IOSize is fio's --io_size, the byte cap of each of the job's
	// clones (0: none given).
	IOSize int64
}

// Engine is the fake engine. The zero value is not usable: use New.
type Engine struct {
	mu       sync.Mutex
	info     engine.Info
	infoErr  error
	startErr error
	churn    int
	upper    string
	volume   string
	slow     map[measure.Target]float64
	fail     func(Job) *engine.ExecResult
	live     map[string]engine.ProbeSpec // container ID -> spec
	started  map[measure.Mode]int
	jobs     []Job
	calls    []string
	nextID   int
	users    []engine.Container // the user's containers, beside the probes
	sizes    map[string]int64   // their writable layers' sizes, by ID
}

// New returns a fake engine with its data root at dataRoot: an overlay2
// engine on the data root's real file system.
func New(dataRoot string) *Engine {
	return &Engine{
		info: engine.Info{Name: "fake", Endpoint: "unix:///fake.sock", ServerVersion: "29.0.0", APIVersion: "1.52",
			Driver: "overlay2", DriverClass: engine.DriverSupported, BackingFS: "extfs", DataRoot: dataRoot,
			ImageStore: "graphdriver", KernelVersion: localKernel(), OS: "Fake Linux"},
		slow:    map[measure.Target]float64{},
		live:    map[string]engine.ProbeSpec{},
		started: map[measure.Mode]int{},
	}
}

// SetInfoErr makes Info fail with err (nil: answer again).
func (f *Engine) SetInfoErr(err error) { f.mu.Lock(); f.infoErr = err; f.mu.Unlock() }

// UpdateInfo changes what Info answers, e.g. another driver.
func (f *Engine) UpdateInfo(update func(*engine.Info)) { f.mu.Lock(); update(&f.info); f.mu.Unlock() }

// SetStartErr makes StartProbe fail with err (nil: start again).
func (f *Engine) SetStartErr(err error) { f.mu.Lock(); f.startErr = err; f.mu.Unlock() }

// SetChurn sets how many container start/stop events ContainerChurn
// reports.
func (f *Engine) SetChurn(n int) { f.mu.Lock(); f.churn = n; f.mu.Unlock() }

// SetProbePaths sets where the probe containers' writable layer and
// volume are on the host ("": the engine does not say).
func (f *Engine) SetProbePaths(upperDir, volumePath string) {
	f.mu.Lock()
	f.upper, f.volume = upperDir, volumePath
	f.mu.Unlock()
}

// SetSlowdown makes the fio jobs on target slower than the host's by
// factor: throughput divided by it, latencies multiplied.
func (f *Engine) SetSlowdown(target measure.Target, factor float64) {
	f.mu.Lock()
	f.slow[target] = factor
	f.mu.Unlock()
}

// SetFail lets fail answer fio jobs in probe containers instead of the
// fake: a non-nil result is returned as the job's outcome.
func (f *Engine) SetFail(fail func(Job) *engine.ExecResult) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

// SetContainers sets the user's running containers the engine lists, and
// the writable-layer sizes it reports for them by ID.
func (f *Engine) SetContainers(cs []engine.Container, sizes map[string]int64) {
	f.mu.Lock()
	f.users, f.sizes = slices.Clone(cs), sizes
	f.mu.Unlock()
}

// Containers implements advisor.Engine: the containers SetContainers set.
func (f *Engine) Containers(context.Context, []string) ([]engine.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Containers")
	if f.infoErr != nil {
		return nil, f.infoErr
	}
	return slices.Clone(f.users), nil
}

// ContainerLayerSize implements advisor.Engine.
func (f *Engine) ContainerLayerSize(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.sizes[id]
	if !ok {
		return 0, fmt.Errorf("no such container: %s", id)
	}
	return n, nil
}

// RemoveAll removes every probe container, as someone else might.
func (f *Engine) RemoveAll() { f.mu.Lock(); clear(f.live); f.mu.Unlock() }

// Live returns how many probe containers run now.
func (f *Engine) Live() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.live) }

// Started returns how many probe containers of mode were started.
func (f *Engine) Started(mode measure.Mode) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started[mode]
}

// Jobs returns the fio jobs run in probe containers so far, in order.
func (f *Engine) Jobs() []Job { f.mu.Lock(); defer f.mu.Unlock(); return slices.Clone(f.jobs) }

// Calls returns the engine operations so far, e.g. "StartProbe steady",
// "Exec clean /lp/layer", "RemoveProbe", "Sweep images".
func (f *Engine) Calls() []string { f.mu.Lock(); defer f.mu.Unlock(); return slices.Clone(f.calls) }

func (f *Engine) record(call string) { f.calls = append(f.calls, call) }

// Endpoint implements probe.Engine.
func (f *Engine) Endpoint() string { return f.info.Endpoint }

// Close implements agent.Engine.
func (f *Engine) Close() error { return nil }

// Info implements probe.Engine.
func (f *Engine) Info(context.Context) (engine.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Info")
	if f.infoErr != nil {
		return engine.Info{}, f.infoErr
	}
	return f.info, nil
}

// ContainerChurn implements agent.Engine.
func (f *Engine) ContainerChurn(context.Context, time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.churn, nil
}

// EnsureImage implements probe.Engine.
func (f *Engine) EnsureImage(_ context.Context, im *probeimage.Image, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("EnsureImage")
	return "sha256:fake", nil
}

// CheckImage implements probe.Engine: every image exists.
func (f *Engine) CheckImage(context.Context, string) error { return nil }

// StartProbe implements probe.Engine.
func (f *Engine) StartProbe(_ context.Context, spec engine.ProbeSpec) (*engine.Probe, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("StartProbe " + string(spec.Mode))
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.nextID++
	id := fmt.Sprintf("fake%04d", f.nextID)
	f.live[id] = spec
	f.started[spec.Mode]++
	p := &engine.Probe{ContainerID: id, Name: "layerprobe-probe-" + id, Image: spec.Image, LayerDir: f.upper}
	if !spec.WritableLayerOnly {
		p.VolumeName, p.VolumeHostPath = p.Name, f.volume
	}
	return p, nil
}

// RemoveProbe implements probe.Engine.
func (f *Engine) RemoveProbe(_ context.Context, p *engine.Probe) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("RemoveProbe " + string(f.live[p.ContainerID].Mode))
	delete(f.live, p.ContainerID)
	return nil
}

// Sweep implements probe.Engine; there is never anything to sweep.
func (f *Engine) Sweep(_ context.Context, _ func(string) bool, includeImages bool) (engine.SweepReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if includeImages {
		f.record("Sweep images")
	} else {
		f.record("Sweep")
	}
	return engine.SweepReport{}, nil
}

// SweepStale implements probe.Engine.
func (f *Engine) SweepStale(context.Context, func(string) bool, string, string) (engine.SweepReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("SweepStale")
	return engine.SweepReport{}, nil
}

// Exec implements probe.Engine: fio --version, fio jobs and the helper's
// clean, copyup, lookup and smallfiles verbs, in a probe container that still exists.
func (f *Engine) Exec(ctx context.Context, p *engine.Probe, argv []string) (engine.ExecResult, error) {
	f.mu.Lock()
	spec, ok := f.live[p.ContainerID]
	fail := f.fail
	if !ok {
		f.mu.Unlock()
		return engine.ExecResult{ExitCode: -1}, fmt.Errorf("exec in %s: %w", p.Name, ErrGone)
	}
	switch {
	case len(argv) == 2 && argv[0] == engine.ContainerFio && argv[1] == "--version":
		f.mu.Unlock()
		return engine.ExecResult{Stdout: []byte(FioVersion + "\n")}, nil
	case len(argv) > 3 && argv[0] == engine.ContainerHelper && argv[2] == "clean":
		f.record("Exec clean " + argv[3])
		f.mu.Unlock()
		return engine.ExecResult{}, nil
	case len(argv) > 2 && argv[0] == engine.ContainerHelper && argv[2] == "lookup":
		slow := f.slow[measure.TargetContainer]
		f.mu.Unlock()
		return engine.ExecResult{Stdout: lookupOutput(argv[3:], max(slow, 1))}, nil
	case len(argv) > 3 && argv[0] == engine.ContainerHelper && argv[2] == "copyup":
		f.mu.Unlock()
		return engine.ExecResult{Stdout: copyUpLines(argv[3:], f.slowdown(measure.TargetContainer))}, nil
	case argv[0] == engine.ContainerFio || (len(argv) > 2 && argv[0] == engine.ContainerHelper && argv[2] == "smallfiles"):
		// The helper's smallfiles verb takes fio's --name and
		// --directory and prints fio's JSON: the fake answers it as a
		// fio job.
		name, layout := strings.CutSuffix(argValue(argv, "--name"), "-layout")
		job := Job{Target: targetOf(argValue(argv, "--directory")), Workload: measure.Workload(name), Mode: spec.Mode, Layout: layout,
			File: argValue(argv, "--filename")}
		job.IOSize, _ = strconv.ParseInt(argValue(argv, "--io_size"), 10, 64)
		f.jobs = append(f.jobs, job)
		slow := f.slow[job.Target]
		f.mu.Unlock()
		if fail != nil {
			if res := fail(job); res != nil {
				return *res, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return engine.ExecResult{ExitCode: -1}, err
		}
		return engine.ExecResult{Stdout: FioOutput(job.Workload, max(slow, 1))}, nil
	}
	f.mu.Unlock()
	return engine.ExecResult{ExitCode: 127, Stderr: []byte("fake engine: unknown command " + strings.Join(argv, " "))}, nil
}

func (f *Engine) slowdown(t measure.Target) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.slow[t], 1)
}

// targetOf maps a job directory in the probe container to its target.
func targetOf(dir string) measure.Target {
	switch {
	case dir == engine.ContainerLayer:
		return measure.TargetContainer
	case dir == engine.ContainerVolume:
		return measure.TargetVolume
	case strings.HasPrefix(dir, engine.ContainerBind+"/"):
		return measure.TargetBind
	}
	return measure.Target("unknown:" + dir)
}

func argValue(argv []string, flag string) string {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// copyUpLines is what the helper's copyup verb prints: one JSON line per
// file, the first write taking longer the larger the file.
func copyUpLines(paths []string, slow float64) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for i, p := range paths {
		_ = enc.Encode(helper.CopyUpLine{Path: p, Seconds: slow * 0.001 * float64(i+1)})
	}
	return []byte(b.String())
}

// lookupOutput is what the helper's lookup verb prints: a walk and a
// create in each directory, slow times slower than a host's would be.
func lookupOutput(dirs []string, slow float64) []byte {
	res := helper.LookupResult{WalkSeconds: 0.02 * slow, Entries: 2400}
	for _, d := range dirs {
		res.Creates = append(res.Creates, helper.LookupCreate{Dir: d, Seconds: 0.0002 * slow})
	}
	b, _ := json.Marshal(res)
	return b
}

// FioOutput is the JSON fio prints for one job of workload w, slow times
// slower than a host job (1): the figures Parse reads, no more.
func FioOutput(w measure.Workload, slow float64) []byte {
	lat := func(meanSec float64, n int) map[string]any {
		return map[string]any{"N": n, "mean": meanSec * 1e9 * slow, "max": 3 * meanSec * 1e9 * slow,
			"percentile": map[string]float64{"50.000000": meanSec * 1e9 * slow, "99.000000": 2 * meanSec * 1e9 * slow,
				"99.900000": 2.5 * meanSec * 1e9 * slow}}
	}
	dir := func(ios int, bs float64, meanSec float64) map[string]any {
		if ios == 0 {
			return map[string]any{"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "iops": 0, "runtime": 0, "total_ios": 0}
		}
		runtimeMS := 1000.0 * slow
		return map[string]any{"io_bytes": float64(ios) * bs, "io_kbytes": float64(ios) * bs / 1024,
			"bw_bytes": float64(ios) * bs / (runtimeMS / 1000), "iops": float64(ios) / (runtimeMS / 1000),
			"runtime": runtimeMS, "total_ios": ios, "clat_ns": lat(meanSec, ios)}
	}
	job := map[string]any{"jobname": string(w), "error": 0, "job_runtime": 1000 * slow}
	switch w {
	case measure.SeqWrite:
		job["read"], job["write"] = dir(0, 0, 0), dir(32, 1<<20, 0.01)
	case measure.RandWrite:
		job["read"], job["write"] = dir(0, 0, 0), dir(4000, 4096, 0.0005)
	case measure.SmallFiles:
		job["read"], job["write"] = dir(0, 0, 0), dir(6800, 1000, 0.00003)
	default:
		job["read"], job["write"] = dir(200, 4096, 0.0001), dir(200, 4096, 0.0002)
		job["sync"] = map[string]any{"total_ios": 200, "lat_ns": lat(0.002, 200)}
	}
	b, _ := json.Marshal(map[string]any{"fio version": FioVersion, "jobs": []any{job}})
	return b
}

// FakeFio writes an executable fio into a fresh directory: it prints
// FioVersion for --version and, for a job, the host's FioOutput of the
// workload its --name names.
func FakeFio(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, w := range measure.Workloads {
		if err := os.WriteFile(filepath.Join(dir, string(w)+".json"), FioOutput(w, 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `#!/bin/sh
dir=$(dirname "$0")
for a; do
	case "$a" in
	--version) echo ` + FioVersion + `; exit 0 ;;
	--name=*) name=${a#--name=}; name=${name%-layout} ;;
	esac
done
exec cat "$dir/$name.json"
`
	bin := filepath.Join(dir, "fio")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// The fake answers everything a real engine client does.
var _ engine.Client = (*Engine)(nil)

// localKernel is this host's kernel release: the fake engine is a local
// one, and an engine that answers from another kernel is a VM's.
func localKernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
