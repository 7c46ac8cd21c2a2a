package containerd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/internal/engine"
)

const (
	probeIDPrefix = "layerprobe-probe-"
	killTimeout   = 10 * time.Second
	// taskDeleteTimeout bounds deleteTask's attempts at a task whose shim
	// keeps refusing the delete.
	taskDeleteTimeout = 30 * time.Second
	runningTimeout    = 10 * time.Second
	startTimeout      = 30 * time.Second // an exec's start, not cancelled with the exec
)

// StartProbe creates the probe container (with its own snapshot on the
// configured snapshotter, both labelled) and starts its task, the helper's
// idle process. The container is locked down like a Docker probe:
// containerd's default spec (its own network namespace with lo only, the
// usual masks, no device access), no capabilities, no new privileges,
// containerd's default seccomp profile, bounded pids, memory and open
// files, no terminal. The host scratch directory is bind-mounted unless
// spec.WritableLayerOnly; containerd has no named volumes, so the probe has
// none. On any failure what was created is removed again.
func (c *Client) StartProbe(ctx context.Context, spec engine.ProbeSpec) (p *engine.Probe, err error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("start probe: %w", err)
	}
	ctx = c.ns(ctx)
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("start probe: %w", err)
	}
	id := probeIDPrefix + hex.EncodeToString(suffix)
	managed := c.labels(spec.Owner, "probe", spec.Engine)
	managed[engine.LabelMode] = string(spec.Mode)
	// The probe's own labels win over spec.Labels: a caller cannot make a
	// probe look unmanaged or owned by someone else.
	labels := withLabels(managed, spec.Labels)
	p = &engine.Probe{ContainerID: id, Name: id, Image: spec.Image}

	defer func() {
		if err != nil {
			engine.RemoveHalfStarted(ctx, c.logger, id, func(ctx context.Context) error { return c.RemoveProbe(ctx, p) })
			p = nil
		}
	}()

	img, err := c.api.GetImage(ctx, spec.Image)
	if err != nil {
		return p, c.fail("get probe image "+spec.Image, err)
	}
	cont, err := c.newContainer(ctx, spec.Owner, id,
		ctd.WithImageName(img.Name()),
		ctd.WithSnapshotter(c.snapshotter),
		ctd.WithNewSnapshot(id, img, snapshots.WithLabels(labels)),
		ctd.WithRuntime(defaults.DefaultRuntime, nil),
		ctd.WithContainerLabels(labels),
		ctd.WithNewSpec(probeSpec(id, spec)...),
	)
	if err != nil {
		return p, c.fail("create probe container", err)
	}
	// The idle process writes nothing; its output goes nowhere.
	task, err := cont.NewTask(ctx, cio.NullIO)
	if err != nil {
		return p, c.fail("create probe task", err)
	}
	if err := task.Start(ctx); err != nil {
		return p, c.fail("start probe task", err)
	}
	if err := c.waitRunning(ctx, task); err != nil {
		return p, err
	}
	p.LayerDir = c.upperDirOf(ctx, c.snapshotter, id)
	// The task's PID is in containerd's PID namespace, the host's for a
	// containerd on the node; the probe session checks it against the
	// container's cgroup path (/<namespace>/<id> by default, which names
	// the container ID) before the host arm joins its CPU cgroups.
	p.Pid = int(task.Pid())
	c.logger.Debug("probe started", "container", id, "image", spec.Image, "snapshotter", c.snapshotter, "layer_dir", p.LayerDir, "pid", p.Pid)
	return p, nil
}

// probeSpec is the probe's OCI runtime spec: containerd's default for a
// Linux container, with the helper's idle process, no capabilities, the
// probe's limits, the bind mount and, last, the default seccomp profile,
// which allows a syscall by the capabilities the process has (so it must
// follow them).
func probeSpec(id string, ps engine.ProbeSpec) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithDefaultSpec(),
		oci.WithProcessArgs(engine.ContainerHelper, "probe-helper", "idle"),
		oci.WithProcessCwd("/"),
		oci.WithHostname(id[:min(len(id), 63)]),
		oci.WithCapabilities(nil),
		oci.WithNoNewPrivileges,
		oci.WithPidsLimit(engine.ProbePidsLimit),
		oci.WithMemoryLimit(engine.ProbeMemoryBytes),
		oci.WithRlimit(&specs.POSIXRlimit{Type: "RLIMIT_NOFILE", Hard: engine.ProbeNoFile, Soft: engine.ProbeNoFile}),
	}
	if !ps.WritableLayerOnly {
		opts = append(opts, oci.WithMounts([]specs.Mount{{
			Type: "bind", Source: ps.BindSource, Destination: engine.ContainerBind,
			Options: []string{"rbind", "rw"},
		}}))
	}
	if ps.DeviceWriteIOPS > 0 {
		opts = append(opts, withWriteIOPS(ps.DevicePath, ps.DeviceWriteIOPS))
	}
	// No cgroup namespace (containerd's default spec has none): the task
	// shares containerd's, the host's, whatever ps.HostCgroupNamespace
	// says. The agent's AppArmor profile, when it asks, lets it open the
	// task's namespace file (package cgroup).
	if ps.AppArmorProfile != "" {
		opts = append(opts, oci.WithApparmorProfile(ps.AppArmorProfile))
	}
	return append(opts, seccomp.WithDefaultProfile())
}

// newContainer creates a container under a labelled lease: until the
// container refers to its new snapshot, the lease is what keeps the
// snapshot from containerd's garbage collector, which a deletion elsewhere
// may run at any moment, and a process killed meanwhile leaves a lease the
// sweep finds.
func (c *Client) newContainer(ctx context.Context, owner, id string, opts ...ctd.NewContainerOpts) (ctd.Container, error) {
	lctx, done, err := c.tempLease(ctx, owner)
	if err != nil {
		return nil, err
	}
	defer done()
	return c.api.NewContainer(lctx, id, opts...)
}

// waitRunning fails early when the probe's process exited at once (a
// user-named image without the helper, say).
func (c *Client) waitRunning(ctx context.Context, task ctd.Task) error {
	deadline := time.Now().Add(runningTimeout)
	delay := 10 * time.Millisecond
	for {
		st, err := task.Status(ctx)
		if err != nil {
			return c.fail("probe task status", err)
		}
		switch st.Status {
		case ctd.Running:
			return nil
		case ctd.Stopped:
			return fmt.Errorf("start probe task on engine %s: it exited at once with code %d", c.name, st.ExitStatus)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start probe task on engine %s: not running after %s (status %s)", c.name, runningTimeout, st.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start probe task: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// upperDirOf is the host directory a snapshot's writes land in, when the
// snapshotter's mounts tell it: overlay's upperdir, native's bind source.
// btrfs mounts a subvolume by id, so it stays "" there. The advisor's
// containers need not use the measured snapshotter.
func (c *Client) upperDirOf(ctx context.Context, snapshotter, key string) string {
	mounts, err := c.api.SnapshotService(snapshotter).Mounts(ctx, key)
	if err != nil {
		c.logger.Debug("snapshot mounts", "snapshot", key, "err", err)
		return ""
	}
	for _, m := range mounts {
		for _, o := range m.Options {
			if d, ok := strings.CutPrefix(o, "upperdir="); ok {
				return d
			}
		}
		if m.Type == "bind" && filepath.IsAbs(m.Source) {
			return m.Source
		}
	}
	return ""
}

// withWriteIOPS throttles the container's writes to one block device
// (tests inject a real slowdown with it).
func withWriteIOPS(device string, iops uint64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		var st unix.Stat_t
		if err := unix.Stat(device, &st); err != nil {
			return fmt.Errorf("throttle %s: %w", device, err)
		}
		if s.Linux.Resources.BlockIO == nil {
			s.Linux.Resources.BlockIO = &specs.LinuxBlockIO{}
		}
		dev := specs.LinuxThrottleDevice{Rate: iops}
		// Rdev is uint64 on Linux and int32 on darwin, where this builds too.
		rdev := uint64(st.Rdev) //nolint:unconvert
		dev.Major, dev.Minor = int64(unix.Major(rdev)), int64(unix.Minor(rdev))
		s.Linux.Resources.BlockIO.ThrottleWriteIOPSDevice = append(s.Linux.Resources.BlockIO.ThrottleWriteIOPSDevice, dev)
		return nil
	}
}

// Exec runs argv in the probe's task and returns its output and exit code.
// A non-zero exit code is a result, not an error; the error is for an exec
// that could not run (task gone, containerd down) or a ctx that ended. When
// ctx ends, the process is killed, and so is every fio in the probe (fio's
// job processes are its children and would outlive it).
func (c *Client) Exec(ctx context.Context, p *engine.Probe, argv []string) (engine.ExecResult, error) {
	res, err := c.exec(ctx, p, argv, true)
	if err != nil && ctx.Err() != nil {
		return res, fmt.Errorf("exec %s in probe %s: %w", argv[0], p.Name, ctx.Err())
	}
	return res, err
}

// killFio stops every fio in the probe after a cancelled exec: killing
// the exec's own process leaves the job processes fio forked (the probe
// helper finds them all), and they keep the exec's output open.
func (c *Client) killFio(ctx context.Context, p *engine.Probe) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	kill, kerr := c.exec(kctx, p, []string{engine.ContainerHelper, "probe-helper", "kill-fio"}, false)
	switch {
	case kerr != nil:
		c.logger.Warn("could not kill fio in the probe after a cancelled exec", "container", p.Name, "err", kerr)
	case kill.ExitCode != 0:
		c.logger.Warn("kill-fio in the probe failed", "container", p.Name, "exit_code", kill.ExitCode, "stderr", string(kill.Stderr))
	}
}

// syncBuffer is a bytes.Buffer the IO copier may write while the exec is
// cancelled and its output read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// execProcess is the process an exec runs: the probe's own (its user,
// environment, capabilities, limits) with argv, and no terminal.
func (c *Client) execProcess(ctx context.Context, cont ctd.Container, argv []string) (*specs.Process, error) {
	info, err := cont.Info(ctx, ctd.WithoutRefreshedMetadata)
	if err != nil {
		return nil, err
	}
	spec, err := specOf(info)
	if err != nil {
		return nil, err
	}
	if spec.Process == nil {
		return nil, errors.New("its spec has no process")
	}
	pspec := *spec.Process
	pspec.Args = argv
	pspec.Terminal = false
	return &pspec, nil
}

// exec runs argv. When ctx ends first the process is killed and, with
// killFio, every fio in the probe too, before the exec is deleted (which
// waits until nothing holds its output open).
func (c *Client) exec(ctx context.Context, p *engine.Probe, argv []string, killFio bool) (res engine.ExecResult, err error) {
	res.ExitCode = -1
	if p == nil || p.ContainerID == "" {
		return res, errors.New("exec in probe: no probe container")
	}
	if len(argv) == 0 {
		return res, errors.New("exec in probe: empty command")
	}
	ctx = c.ns(ctx)
	cont, err := c.api.LoadContainer(ctx, p.ContainerID)
	if err != nil {
		return res, c.fail("load probe "+p.Name, err)
	}
	pspec, err := c.execProcess(ctx, cont, argv)
	if err != nil {
		return res, c.fail("read the spec of probe "+p.Name, err)
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return res, c.fail("load the task of probe "+p.Name, err)
	}

	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return res, fmt.Errorf("exec in probe: %w", err)
	}
	// The output FIFOs go in the probe's own directory, where its removal
	// finds them when this process is gone (readOrphanOutput).
	var stdout, stderr syncBuffer
	proc, err := task.Exec(ctx, "lp-"+hex.EncodeToString(suffix), pspec,
		cio.NewCreator(cio.WithStreams(nil, &stdout, &stderr), cio.WithFIFODir(probeFIFODir(p.ContainerID))))
	if err != nil {
		return res, c.fail("create exec in probe "+p.Name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if _, derr := proc.Delete(dctx, ctd.WithProcessKill); derr != nil {
			if !errdefs.IsNotFound(derr) {
				c.logger.Debug("delete exec", "container", p.Name, "err", derr)
			}
			// Delete closes the FIFOs only once the exec is gone.
			proc.IO().Close()
		}
	}()
	// Wait is not cancelled with ctx: a cancelled Wait reports an exit
	// status carrying ctx's error, and when that raced ctx.Done below, the
	// select could take it for the process's exit and wait for the output
	// of an fio nobody had killed, to the end of its runtime.
	exited, err := proc.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return res, c.fail("wait for exec in probe "+p.Name, err)
	}
	// Start is not cancelled with ctx: a Start abandoned by the client can
	// still complete in containerd after the kill below found nothing to
	// kill, and fio would then run to its end with nobody waiting. Once
	// Start has answered, the process is there to be killed.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	err = proc.Start(sctx)
	cancel()
	if err != nil {
		return res, c.fail("start exec in probe "+p.Name, err)
	}
	select {
	case st := <-exited:
		// The exit is reported once the process is gone; its output may
		// still be in flight in the FIFOs.
		proc.IO().Wait()
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		code, _, err := st.Result()
		if err != nil {
			return res, c.fail("exec in probe "+p.Name, err)
		}
		res.ExitCode = int(code)
		return res, nil
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if kerr := proc.Kill(kctx, syscall.SIGKILL); kerr != nil && !errdefs.IsNotFound(kerr) {
			c.logger.Warn("kill a cancelled exec", "container", p.Name, "err", kerr)
		}
		if killFio {
			c.killFio(ctx, p)
		}
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		return res, ctx.Err()
	}
}

// RemoveProbe kills the probe's task and removes the container with its
// snapshot. What is already gone is not an error.
func (c *Client) RemoveProbe(ctx context.Context, p *engine.Probe) error {
	if p == nil || p.ContainerID == "" {
		return nil
	}
	ctx = c.ns(ctx)
	if err := c.removeContainer(ctx, p.ContainerID); err != nil {
		return err
	}
	// A container that was never created may have left its snapshot.
	err := c.api.SnapshotService(c.snapshotter).Remove(ctx, p.ContainerID)
	if err != nil && !errdefs.IsNotFound(err) {
		return c.fail("remove probe snapshot "+p.ContainerID, err)
	}
	return nil
}

// deleteTask kills a probe's task and deletes it. The task is loaded anew
// for each attempt: a task loaded while its shim could not answer (see
// readOrphanOutput) carries pid 0, and the client's kill skips a task with
// pid 0, so every delete of that task would be refused ("task must be
// stopped before deletion") however long the shim has been answering
// again. Each attempt's wait for the exit is bounded, and a refused delete
// is tried again until the task is gone or taskDeleteTimeout has passed.
func (c *Client) deleteTask(ctx context.Context, cont ctd.Container) error {
	deadline := time.Now().Add(taskDeleteTimeout)
	delay := 100 * time.Millisecond
	for {
		err := c.deleteTaskOnce(ctx, cont)
		if err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		c.logger.Debug("task delete refused; trying again", "container", cont.ID(), "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func (c *Client) deleteTaskOnce(ctx context.Context, cont ctd.Container) error {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	task, err := cont.Task(ctx, nil)
	if err != nil {
		return err
	}
	_, err = task.Delete(ctx, ctd.WithProcessKill)
	return err
}

// removeContainer deletes a container's task (killing it) and the
// container with its snapshot; ctx carries the namespace.
func (c *Client) removeContainer(ctx context.Context, id string) error {
	cont, err := c.api.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		_ = removeProbeFIFODir(id)
		return nil
	}
	if err != nil {
		return c.fail("load probe "+id, err)
	}
	// Before the task is loaded: loading it asks the shim, which may be
	// waiting for a reader of an orphaned exec's output.
	release := readOrphanOutput(ctx, id)
	err = c.deleteTask(ctx, cont)
	release()
	if err != nil {
		return c.fail("delete the task of probe "+id, err)
	}
	if err := cont.Delete(ctx, ctd.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return c.fail("remove probe "+id, err)
	}
	if err := removeProbeFIFODir(id); err != nil {
		c.logger.Warn("remove the output FIFOs of a removed probe", "container", id, "err", err)
	}
	return nil
}
