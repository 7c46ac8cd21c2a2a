// Package probe runs layerprobe's measurement rounds on one engine: it
// prepares the targets (host directory, probe container, bind mount, named
// volume, all on the data root's file system), runs every built-in fio job on
// every target in a fresh random order each round, and records each job's
// result, failed or not.
package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/layerprobe/layerprobe/internal/cgroup"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/topology"
)

// Engine is what a session needs from a container engine (engine.Client
// has it): a Docker engine (*docker.Client) or containerd
// (*containerd.Client). Both speak package engine's types; a probe without a named volume (containerd has none)
// leaves the volume target out.
type Engine interface {
	Endpoint() string
	Info(ctx context.Context) (engine.Info, error)
	EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error)
	CheckImage(ctx context.Context, ref string) error
	StartProbe(ctx context.Context, spec engine.ProbeSpec) (*engine.Probe, error)
	Exec(ctx context.Context, p *engine.Probe, argv []string) (engine.ExecResult, error)
	RemoveProbe(ctx context.Context, p *engine.Probe) error
	Sweep(ctx context.Context, alive func(owner string) bool, includeImages bool) (engine.SweepReport, error)
	SweepStale(ctx context.Context, alive func(owner string) bool, owner, engineName string) (engine.SweepReport, error)
}

// Options configure a session.
type Options struct {
	EngineName string
	FioBinary  string // host fio: name in PATH or absolute path
	ProbeImage string // user-named image; "" builds one from FioBinary
	ScratchDir string // "" = <data root>/layerprobe-scratch
	// Topology is the configured topology (engines[].topology): "host",
	// "vm" or "" to detect it (package topology).
	Topology string
	Targets  []measure.Target // non-host targets to measure
	Mode     measure.Mode     // "" is steady
	// Free-space guard on the data root's file system.
	MinFreeBytes int64
	MinFreeRatio float64
	// DeviceWriteIOPS throttles the probe container's writes (tests only).
	DeviceWriteIOPS uint64
	// KeepImage keeps the probe image when the session closes (the agent
	// reuses it across cycles); a one-shot run removes it.
	KeepImage bool
	// HelperBinary runs the host arm of the jobs fio cannot run
	// (fio.Job.Helper): "" is this program, whose probe-helper verbs the
	// probe image carries too. Tests of a binary other than layerprobe set
	// it.
	HelperBinary string
}

// Error is an engine-level failure: the engine could not be measured at all.
type Error struct {
	Code    string // unreachable, data_root_not_visible, different_filesystem, host_dir, fio_missing, image, probe, fio_version_mismatch, locked, timeout
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// AsError is err as an engine-level failure: the probe's Error in its
// chain, or else one with the code given and err's text. A run reports
// its code and message, an agent's cycle records them.
func AsError(err error, code string) *Error {
	var perr *Error
	if errors.As(err, &perr) {
		return perr
	}
	return &Error{Code: code, Message: err.Error(), Err: err}
}

func fail(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// Session is a prepared engine: its probe container runs and its targets
// are checked. Close removes what Prepare created.
type Session struct {
	eng    Engine
	opts   Options
	logger *slog.Logger
	owner  string

	Info       engine.Info
	FioVersion string
	Warnings   []string
	// HostArmCgroup says whether the host arm's fio runs in the probe
	// container's CPU cgroups: HostArmJoined, HostArmOutside (then
	// HostArmCgroupError says why) or "" when the engine did not tell the
	// probe container's process.
	HostArmCgroup      string
	HostArmCgroupError string

	// topo is the engine's topology; in a VM the same-file-system rule
	// does not apply, the host arm cannot join the probe container's
	// cgroups (they are the VM's), and bind goes through the VM's share.
	topo    topology.Result
	share   string // the VM's file sharing under the bind target
	hostFio string // the host arm's fio version when it differs from the image's

	fioPath string // resolved host fio
	// hostCgroups are the probe container's CPU cgroups, which the host
	// arm's fio joins (package cgroup says why), and the cgroup namespace
	// it enters to do so; empty when it cannot.
	hostCgroups cgroup.Target
	self        string // this binary, which joins them: probe-helper cgexec
	scratch     string // scratch root
	ownerDir    string // <scratch>/<owner>: this process's, removed at Close
	hostDir     string // <ownerDir>/host: the host target's files
	// bindDir is <ownerDir>/bind, the bind target's files seen from the
	// host (containerDir(bind) inside the probe container). bind has files
	// of its own, as every other target: a file measured twice in a round
	// reads differently the second time (docs/methodology.md).
	bindDir  string
	probe    *engine.Probe
	targets  []measure.Target // host first, then the measurable non-host targets
	imageRef string
	image    *probeimage.Image // the built probe image; nil for a user-named one
	coldRef  string            // the cold image, imported on first use
}

// Facts are the engine's facts with what the session found: the report's,
// the API's and the metrics' view of the engine.
func (s *Session) Facts() measure.EngineFacts {
	f := s.Info.Facts()
	f.FioVersion = s.FioVersion
	f.HostArmCgroup, f.HostArmCgroupError = s.HostArmCgroup, s.HostArmCgroupError
	if s.topo.Kind != "" {
		f.TopologyFacts = measure.TopologyFacts{Topology: string(s.topo.Kind), VM: s.topo.Product,
			Share: s.share, Baseline: topology.Baseline(s.topo.Kind), HostFioVersion: s.hostFio}
	}
	return f
}

// Prepare sweeps leftovers of dead layerprobe processes, checks the engine
// and the file systems, builds or checks the probe image and starts the probe
// container. On error nothing it created is left behind.
func Prepare(ctx context.Context, eng Engine, opts Options, logger *slog.Logger) (*Session, error) {
	owner, err := hostfs.Self()
	if err != nil {
		return nil, fail("host", err, "identify this process: %v", err)
	}
	if opts.Mode == "" {
		opts.Mode = measure.ModeSteady
	}
	s := &Session{eng: eng, opts: opts, logger: logger.With("engine", opts.EngineName), owner: owner.String()}

	info, err := eng.Info(ctx)
	if err != nil {
		return nil, fail("unreachable", err, "%v", err)
	}
	s.Info = info
	if info.DriverClass != engine.DriverSupported && info.DriverNote != "" {
		s.Warnings = append(s.Warnings, info.DriverNote)
	}
	if info.Rootless {
		s.Warnings = append(s.Warnings, "rootless engine: overheads are not comparable with a rootful engine's")
	}

	fi, statErr := os.Stat(info.DataRoot)
	visible := statErr == nil && fi.IsDir()
	s.topo = topology.Detect(topology.Input{Forced: topology.Kind(opts.Topology), Endpoint: eng.Endpoint(),
		OperatingSystem: info.OS, EngineHostname: info.Hostname, KernelVersion: info.KernelVersion,
		GOOS: runtime.GOOS, DataRootVisible: visible, LocalKernel: localKernel(), LocalHostname: localHostname()})
	s.logger.Info("engine topology", "topology", s.topo.Kind, "vm", s.topo.Product, "reason", s.topo.Reason)
	if s.topo.Kind == topology.VM {
		if err := s.prepareVMScratch(); err != nil {
			return nil, err
		}
	} else if err := s.prepareHostScratch(visible, statErr); err != nil {
		return nil, err
	}

	// Leftovers of killed layerprobe processes go before anything new
	// is created, so they cannot skew this run or fill the disk.
	s.sweep(ctx)

	ok := false
	defer func() {
		if !ok {
			s.Close(context.WithoutCancel(ctx))
		}
	}()
	s.ownerDir = filepath.Join(s.scratch, s.owner)
	s.hostDir, s.bindDir = filepath.Join(s.ownerDir, hostSubdir), filepath.Join(s.ownerDir, bindSubdir)
	for _, d := range []string{s.hostDir, s.bindDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fail("scratch", err, "create %s: %v", d, err)
		}
	}

	if err := s.prepareImage(ctx); err != nil {
		return nil, err
	}
	spec := engine.ProbeSpec{
		Engine: opts.EngineName, Image: s.imageRef, BindSource: s.scratch,
		Owner: s.owner, Mode: opts.Mode, Rootless: info.Rootless,
	}
	if opts.DeviceWriteIOPS > 0 && s.topo.Kind != topology.VM {
		dev, err := hostfs.DeviceOf(info.DataRoot)
		if err != nil {
			return nil, fail("probe", err, "find the data root's device for throttling: %v", err)
		}
		spec.DeviceWriteIOPS, spec.DevicePath = opts.DeviceWriteIOPS, dev
	}
	if s.topo.Kind != topology.VM {
		s.cgroupNamespace(&spec)
	}
	p, err := eng.StartProbe(ctx, spec)
	if err != nil {
		return nil, fail("probe", err, "start the probe container: %v", err)
	}
	s.probe = p
	if s.topo.Kind == topology.VM {
		s.HostArmCgroup = HostArmNotApplicable
		s.share = s.shareOf(ctx)
	} else {
		s.hostCgroups = s.cgroupsOf(p)
	}
	if err := s.checkFioVersions(ctx); err != nil {
		return nil, err
	}
	s.targets = s.checkTargets(opts.Targets)
	ok = true
	return s, nil
}

// prepareHostScratch is the rule for an engine on this host: its data root
// is visible, and the scratch directory (the host and bind targets) is on
// its file system, so that every ratio compares one device.
func (s *Session) prepareHostScratch(visible bool, statErr error) error {
	info := s.Info
	if !visible {
		return fail("data_root_not_visible", statErr,
			"the engine's data root %s is not visible here: layerprobe must run on the engine's host (or see the data root at the same path); for an engine in a VM set engines[].topology: vm and scratch_dir to a directory the VM shares", info.DataRoot)
	}
	s.scratch = s.opts.ScratchDir
	if s.scratch == "" {
		s.scratch = filepath.Join(info.DataRoot, "layerprobe-scratch")
	}
	if err := os.MkdirAll(s.scratch, 0o700); err != nil {
		return fail("scratch", err, "create scratch directory %s: %v", s.scratch, err)
	}
	same, err := s.onLayerStorage(s.scratch)
	if err != nil {
		return fail("scratch", err, "compare file systems of %s and %s: %v", s.scratch, info.DataRoot, err)
	}
	if !same && info.Zpool != "" {
		return fail("different_filesystem", nil,
			"scratch directory %s is not on a dataset of zpool %s, where the engine's zfs driver keeps its layers (parent dataset %s): the host target would measure another device; set scratch_dir to a directory on a dataset of that pool",
			s.scratch, info.Zpool, info.ZFSDataset)
	}
	if !same {
		return fail("different_filesystem", nil,
			"scratch directory %s is not on the file system of the engine's data root %s: the host target would measure another device; set scratch_dir to a directory on that file system",
			s.scratch, info.DataRoot)
	}
	return nil
}

func (s *Session) sweep(ctx context.Context) {
	// SweepStale: also this process's own probe of this engine, left by a
	// session that could not be closed while the engine was down.
	rep, err := s.eng.SweepStale(ctx, hostfs.Alive, s.owner, s.opts.EngineName)
	if err != nil {
		s.logger.Warn("sweep of leftover probe containers failed", "err", err)
	}
	dirs, err := hostfs.SweepScratch(s.scratch, hostfs.Alive)
	if err != nil {
		s.logger.Warn("sweep of leftover scratch directories failed", "err", err)
	}
	if n := len(rep.Containers) + len(rep.Volumes) + len(rep.Snapshots) + len(rep.Leases) + len(dirs); n > 0 {
		s.logger.Info("removed leftovers of a killed layerprobe or of an earlier probe session", "containers", len(rep.Containers), "volumes", len(rep.Volumes),
			"snapshots", len(rep.Snapshots), "leases", len(rep.Leases), "dirs", len(dirs))
	}
}

func (s *Session) prepareImage(ctx context.Context) error {
	fioPath, lookErr := exec.LookPath(s.opts.FioBinary)
	if lookErr == nil {
		s.fioPath = fioPath
	}
	if s.opts.ProbeImage != "" {
		if err := s.eng.CheckImage(ctx, s.opts.ProbeImage); err != nil {
			return fail("image", err, "probe image %s: %v", s.opts.ProbeImage, err)
		}
		s.imageRef = s.opts.ProbeImage
		return nil
	}
	if runtime.GOOS != "linux" {
		return fail("image", nil,
			"the probe image cannot be built on %s from the host's fio (not a Linux binary): name an image in the VM with engines[].probe_image (docs/workstations.md shows how to build it there)", runtime.GOOS)
	}
	if lookErr != nil {
		return fail("fio_missing", lookErr,
			"fio not found (%s): install it (apt-get install fio) or set fio.binary; the probe image is built from the host's fio so both sides run one binary", s.opts.FioBinary)
	}
	self, err := os.Executable()
	if err != nil {
		return fail("image", err, "locate the layerprobe binary: %v", err)
	}
	im, err := probeimage.Build(fioPath, self)
	if err != nil {
		return fail("image", err, "assemble the probe image: %v", err)
	}
	s.image = im
	ref, err := s.eng.EnsureImage(ctx, im, s.owner)
	if err != nil {
		return fail("image", err, "import the probe image: %v", err)
	}
	s.imageRef = ref
	return nil
}

// fioVersionTimeout bounds each arm's fio --version. A loaded host (busy
// containers, a guest under emulation) has needed more than 30 s to start
// fio; a version that does not come in time is a timeout (code "timeout"),
// not a missing fio, so that the operator looks at the load, not the
// install.
var fioVersionTimeout = 3 * time.Minute

// checkFioVersions makes sure both arms run the same fio: a different fio
// in the image would turn "overhead" into a comparison of two programs.
func (s *Session) checkFioVersions(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, fioVersionTimeout)
	defer cancel()
	res, err := s.eng.Exec(cctx, s.probe, []string{engine.ContainerFio, "--version"})
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return fail("timeout", err, "fio --version in the probe container did not answer within %s: the host is too loaded to start a cycle", fioVersionTimeout)
	}
	if err != nil || res.ExitCode != 0 {
		return fail("fio_missing", err, "fio does not run in the probe container (exit %d): %s", res.ExitCode, trim(res.Stderr))
	}
	inImage := trim(res.Stdout)
	s.FioVersion = inImage
	if s.fioPath == "" {
		return nil // host fio missing: host jobs record fio_missing
	}
	hctx, cancel := context.WithTimeout(ctx, fioVersionTimeout)
	defer cancel()
	onHost, err := fio.Version(hctx, s.fioPath)
	if err != nil && ctx.Err() == nil && hctx.Err() != nil {
		return fail("timeout", err, "host fio --version did not answer within %s: the host is too loaded to start a cycle", fioVersionTimeout)
	}
	if err != nil {
		return fail("fio_missing", err, "run host fio: %v", err)
	}
	if onHost != inImage && s.topo.Kind == topology.VM {
		// In a VM the image may carry the VM's fio (a user-named image,
		// or one built there); the run says so rather than refusing.
		s.hostFio = onHost
		s.Warnings = append(s.Warnings, fmt.Sprintf("fio versions differ: host arm %s (native), probe image %s (in the VM): the arms run different fio builds", onHost, inImage))
		return nil
	}
	if onHost != inImage {
		return fail("fio_version_mismatch", nil, "fio versions differ: host %s, probe image %s; both sides must run the same fio", onHost, inImage)
	}
	return nil
}

// checkTargets keeps the requested targets that live on the data root's file
// system. A volume or writable layer elsewhere would measure another device.
func (s *Session) checkTargets(requested []measure.Target) []measure.Target {
	targets := []measure.Target{measure.TargetHost}
	for _, t := range measure.Targets[1:] {
		if !slices.Contains(requested, t) {
			continue
		}
		var p string
		switch t {
		case measure.TargetVolume:
			if s.probe.VolumeName == "" {
				// containerd has no named volumes.
				s.Warnings = append(s.Warnings, fmt.Sprintf("target volume skipped: a %s engine has no named volumes", s.Info.Runtime))
				continue
			}
			p = s.probe.VolumeHostPath
		case measure.TargetContainer:
			p = s.probe.LayerDir
		}
		if p != "" && s.topo.Kind != topology.VM {
			same, err := s.onLayerStorage(p)
			if err == nil && !same {
				s.Warnings = append(s.Warnings, fmt.Sprintf("target %s skipped: %s is not on the data root's file system", t, p))
				continue
			}
		}
		targets = append(targets, t)
	}
	return targets
}

// onLayerStorage reports whether writes to path land where the engine's
// layers do: on the data root's file system or, for the zfs driver, on a
// dataset of its pool (each layer is a dataset with its own st_dev, and
// the data root itself may lie elsewhere).
func (s *Session) onLayerStorage(path string) (bool, error) {
	if s.Info.Zpool != "" {
		return hostfs.InZpool(path, s.Info.Zpool)
	}
	return hostfs.SameFilesystem(path, s.Info.DataRoot)
}

// Targets returns the targets this session measures, host first.
func (s *Session) Targets() []measure.Target { return s.targets }

// Close removes the probe container, its volume and this process's scratch
// directory. It uses its own timeout so it also works after cancellation.
func (s *Session) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if s.probe != nil {
		if err := s.eng.RemoveProbe(ctx, s.probe); err != nil {
			s.logger.Error("remove probe container", "container", s.probe.Name, "err", err)
		}
		s.probe = nil
	}
	if s.ownerDir != "" {
		if err := os.RemoveAll(s.ownerDir); err != nil {
			s.logger.Error("remove scratch directory", "dir", s.ownerDir, "err", err)
		}
		// The scratch root goes too once no other process uses it;
		// Remove fails harmlessly while it is not empty.
		_ = os.Remove(s.scratch)
		s.ownerDir, s.hostDir, s.bindDir = "", "", ""
	}
	if !s.opts.KeepImage && s.opts.ProbeImage == "" {
		// Removes the probe image this process imported (and leftovers of
		// dead owners). Sweep keeps images a container still uses, so an
		// agent running beside this run keeps the image it shares.
		notSelf := func(owner string) bool { return owner != s.owner && hostfs.Alive(owner) }
		if _, err := s.eng.Sweep(ctx, notSelf, true); err != nil {
			s.logger.Warn("remove the probe image", "err", err)
		}
	}
}

// runJob runs one job on one target (in container p unless the target is
// the host) and always returns a sample: failures are data.
func (s *Session) runJob(ctx context.Context, p *engine.Probe, round, order int, target measure.Target, job fio.Job, how fio.Execution, file int) measure.Sample {
	started := time.Now()
	res := s.execute(ctx, p, target, job, how, file)
	res.Workload = job.Workload
	if !res.OK() {
		s.logger.Warn("fio job failed", "target", target, "job", job.Workload, "round", round,
			"reason", res.Failure.Reason, "err", res.Failure.Message)
	}
	return measure.Sample{Round: round, Order: order, Target: target, StartedAt: started.UTC(),
		DurationSeconds: time.Since(started).Seconds(), JobResult: res}
}

// vmTimeoutFactor stretches every job's timeout on an engine in a VM. The
// timeout is there to end a hung job, not to bound a slow one: a VM's file
// sharing can serve small files at a small fraction of the host disk's
// rate (docs/workstations.md has what 9p did), and a job killed there
// would report a failure where the slowdown is the answer.
const vmTimeoutFactor = 5

// jobTimeout is the job's timeout on this session's engine.
func (s *Session) jobTimeout(job fio.Job) time.Duration {
	if s.topo.Kind == topology.VM {
		return vmTimeoutFactor * job.Timeout
	}
	return job.Timeout
}

// execute runs one fio command of the job on target, on the job's file
// number file (fio.RoundFileName).
func (s *Session) execute(ctx context.Context, p *engine.Probe, target measure.Target, job fio.Job, how fio.Execution, file int) measure.JobResult {
	if f := s.checkSpace(job); f != nil {
		return measure.JobResult{Failure: f}
	}
	if job.Helper() {
		return s.executeHelper(ctx, p, target, job, how)
	}
	jctx, cancel := context.WithTimeout(ctx, s.jobTimeout(job))
	defer cancel()

	var res measure.JobResult
	if target == measure.TargetHost {
		if s.fioPath == "" {
			return measure.JobResult{Failure: &measure.Failure{Reason: measure.ReasonFioMissing, Message: "fio not found on the host: " + s.opts.FioBinary}}
		}
		stdout, stderr, code, err := runHost(jctx, s.hostArgv(fio.Command(s.fioPath, job, s.hostDir, how, file)))
		res = resultOf(jctx, job, how, stdout, stderr, code, err)
		// A fresh execution that failed may leave its file behind. Steady
		// files stay until the measurement ends and removes them.
		if !res.OK() && how == fio.Fresh {
			if err := hostfs.ClearDir(s.hostDir); err != nil {
				s.logger.Error("remove files of a failed job", "dir", s.hostDir, "err", err)
			}
		}
		return res
	}
	dir := s.containerDir(target)
	out, err := s.eng.Exec(jctx, p, fio.Command(engine.ContainerFio, job, dir, how, file))
	res = resultOf(jctx, job, how, out.Stdout, out.Stderr, out.ExitCode, err)
	if !res.OK() && how == fio.Fresh {
		// fio unlinks its files when it finishes; a failed or killed
		// job may leave them, so empty the job directory.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		if r, err := s.eng.Exec(cctx, p, []string{engine.ContainerHelper, "probe-helper", "clean", dir}); err != nil || r.ExitCode != 0 {
			s.logger.Error("remove files of a failed job", "target", target, "err", err, "stderr", trim(r.Stderr))
		}
	}
	return res
}

// hostSubdir and bindSubdir hold the host's and bind's files under this
// process's directory in the scratch root; bind's is reached through the
// bind mount from inside the probe container.
const (
	hostSubdir = "host"
	bindSubdir = "bind"
)

func (s *Session) containerDir(target measure.Target) string {
	switch target {
	case measure.TargetContainer:
		return engine.ContainerLayer
	case measure.TargetBind:
		return path.Join(engine.ContainerBind, s.owner, bindSubdir)
	default:
		return engine.ContainerVolume
	}
}

// checkSpace refuses a job that would leave the data root's file system with
// less than the configured reserve: a monitoring tool must never fill the
// disk it watches.
func (s *Session) checkSpace(job fio.Job) *measure.Failure {
	where := s.Info.DataRoot
	if s.topo.Kind == topology.VM {
		// The data root is on the VM's disk, out of sight: guard the
		// host's, where host and bind write.
		where = s.scratch
	}
	sp, err := hostfs.FreeSpace(where)
	if err != nil {
		return &measure.Failure{Reason: measure.ReasonNoSpace, Message: "free-space check: " + err.Error()}
	}
	reserve := uint64(max(s.opts.MinFreeBytes, 0))
	if r := uint64(float64(sp.Total) * s.opts.MinFreeRatio); r > reserve {
		reserve = r
	}
	need := uint64(job.FileBytes) + uint64(job.FileBytes)/10
	if sp.Avail < need+reserve {
		return &measure.Failure{Reason: measure.ReasonNoSpace, Message: fmt.Sprintf(
			"free-space check refused the job: %d MiB free, the job needs %d MiB and %d MiB must stay free",
			sp.Avail>>20, need>>20, reserve>>20)}
	}
	return nil
}

func resultOf(ctx context.Context, job fio.Job, how fio.Execution, stdout, stderr []byte, code int, err error) measure.JobResult {
	switch {
	case ctx.Err() != nil:
		return measure.JobResult{Failure: fio.FailureFromRunError(ctx.Err())}
	case err != nil:
		return measure.JobResult{Failure: fio.FailureFromRunError(err)}
	}
	return fio.ParseExecution(job, how, stdout, stderr, code)
}

func trim(b []byte) string {
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}

// Healthy reports whether the probe container still answers; the agent
// rebuilds its session when it does not (container removed by someone
// else, engine restarted).
func (s *Session) Healthy(ctx context.Context) bool {
	if s.probe == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := s.eng.Exec(cctx, s.probe, []string{engine.ContainerFio, "--version"})
	return err == nil && res.ExitCode == 0
}
