package containerd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Probe limits, as on a Docker engine: they bound what a misbehaving job
// can take from the host.
const (
	probePidsLimit   = 64
	probeMemoryBytes = 512 << 20
	probeIDPrefix    = "layerprobe-probe-"
	killTimeout      = 10 * time.Second
	// taskDeleteTimeout bounds deleteTask's attempts at a task whose shim
	// keeps refusing the delete.
	taskDeleteTimeout = 30 * time.Second
	runningTimeout    = 10 * time.Second
	startTimeout      = 30 * time.Second // an exec's start, not cancelled with the exec
)

// StartProbe creates the probe container (with its own snapshot on the
// configured snapshotter, both labelled) and starts its task, the helper's
// idle process. The container is locked down like a Docker probe: its own
// network namespace with no interface but lo, no capabilities, no new
// privileges, bounded pids and memory, no terminal. The host scratch
// directory is bind-mounted unless spec.WritableLayerOnly; containerd has
// no named volumes, so the probe has none. On any failure what was created
// is removed again.
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

	img, err := c.images.Get(ctx, &imagesapi.GetImageRequest{Name: spec.Image})
	if err != nil {
		return p, c.fail("get probe image "+spec.Image, native(err))
	}
	m, err := c.resolveImage(ctx, img.Image.Target)
	if err != nil {
		return p, c.fail("read probe image "+spec.Image, err)
	}
	ospec := probeSpec(c.namespace, id, spec)
	if spec.DeviceWriteIOPS > 0 {
		if err := withWriteIOPS(ospec, spec.DevicePath, spec.DeviceWriteIOPS); err != nil {
			return p, fmt.Errorf("start probe: %w", err)
		}
	}
	specAny, err := marshalSpec(ospec, "Spec")
	if err != nil {
		return p, fmt.Errorf("start probe: %w", err)
	}
	if err := c.createContainer(ctx, spec.Owner, &containersapi.Container{
		ID: id, Labels: labels, Image: img.Image.Name, Runtime: &containersapi.Container_Runtime{Name: runtimeName},
		Spec: specAny, Snapshotter: c.snapshotter, SnapshotKey: id,
	}, identity.ChainID(m.diffIDs).String()); err != nil {
		return p, err
	}
	mounts, err := c.snapshots.Mounts(ctx, &snapshotsapi.MountsRequest{Snapshotter: c.snapshotter, Key: id})
	if err != nil {
		return p, c.fail("get the probe's root file system", native(err))
	}
	// The idle process writes nothing; its output goes nowhere (no FIFOs).
	created, err := c.tasks.Create(ctx, &tasksapi.CreateTaskRequest{ContainerID: id, Rootfs: mounts.Mounts})
	if err != nil {
		return p, c.fail("create probe task", native(err))
	}
	if _, err := c.tasks.Start(ctx, &tasksapi.StartRequest{ContainerID: id}); err != nil {
		return p, c.fail("start probe task", native(err))
	}
	if err := c.waitRunning(ctx, id); err != nil {
		return p, err
	}
	p.LayerDir = c.upperDir(ctx, id)
	// The task's PID is in containerd's PID namespace, the host's for a
	// containerd on the node; the probe session checks it against the
	// container's cgroup path (/<namespace>/<id> by default, which names
	// the container ID) before the host arm joins its CPU cgroups.
	p.Pid = int(created.Pid)
	c.logger.Debug("probe started", "container", id, "image", spec.Image, "snapshotter", c.snapshotter, "layer_dir", p.LayerDir, "pid", p.Pid)
	return p, nil
}

// createContainer prepares the container's snapshot on parent and creates
// the container. Both happen under a lease: until the container refers to
// it, nothing else keeps the new snapshot from containerd's garbage
// collector, which a deletion elsewhere may run at any moment.
func (c *Client) createContainer(ctx context.Context, owner string, ct *containersapi.Container, parent string) error {
	lctx, done, err := c.tempLease(ctx, owner)
	if err != nil {
		return err
	}
	defer done()
	_, err = c.snapshots.Prepare(lctx, &snapshotsapi.PrepareSnapshotRequest{Snapshotter: ct.Snapshotter, Key: ct.SnapshotKey,
		Parent: parent, Labels: ct.Labels})
	if err != nil {
		return c.fail("create the snapshot of container "+ct.ID, native(err))
	}
	if _, err = c.containers.Create(lctx, &containersapi.CreateContainerRequest{Container: ct}); err != nil {
		return c.fail("create container "+ct.ID, native(err))
	}
	return nil
}

// waitRunning fails early when the probe's process exited at once (a
// user-named image without the helper, say).
func (c *Client) waitRunning(ctx context.Context, id string) error {
	deadline := time.Now().Add(runningTimeout)
	delay := 10 * time.Millisecond
	for {
		st, err := c.taskProcess(ctx, id, "")
		if err != nil {
			return c.fail("probe task status", err)
		}
		switch st.Status {
		case task.Status_RUNNING:
			return nil
		case task.Status_STOPPED:
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

// upperDir is the host directory the probe's writes land in, when the
// snapshotter's mounts tell it: overlay's upperdir, native's bind source.
// btrfs mounts a subvolume by id, so it stays "" there.
func (c *Client) upperDir(ctx context.Context, key string) string {
	return c.upperDirOf(ctx, c.snapshotter, key)
}

// upperDirOf is upperDir for a snapshot of the given snapshotter: the
// advisor's containers need not use the measured one.
func (c *Client) upperDirOf(ctx context.Context, snapshotter, key string) string {
	resp, err := c.snapshots.Mounts(ctx, &snapshotsapi.MountsRequest{Snapshotter: snapshotter, Key: key})
	if err != nil {
		c.logger.Debug("snapshot mounts", "snapshot", key, "err", err)
		return ""
	}
	for _, m := range resp.Mounts {
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
func withWriteIOPS(s *specs.Spec, device string, iops uint64) error {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil {
		return fmt.Errorf("throttle %s: %w", device, err)
	}
	if s.Linux.Resources.BlockIO == nil {
		s.Linux.Resources.BlockIO = &specs.LinuxBlockIO{}
	}
	dev := specs.LinuxThrottleDevice{Rate: iops}
	dev.Major, dev.Minor = int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
	s.Linux.Resources.BlockIO.ThrottleWriteIOPSDevice = append(s.Linux.Resources.BlockIO.ThrottleWriteIOPSDevice, dev)
	return nil
}

// specTypeURL is how containerd names the runtime spec's types in an Any
// (their JSON is the value).
const specTypeURL = "types.containerd.io/opencontainers/runtime-spec/1/"

// marshalSpec wraps a spec or a process spec (kind "Spec", "Process") in
// the Any containerd reads it from.
func marshalSpec(v any, kind string) (*anypb.Any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the OCI %s: %w", kind, err)
	}
	return &anypb.Any{TypeUrl: specTypeURL + kind, Value: b}, nil
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
	cont, err := c.getContainer(ctx, p.ContainerID)
	if err != nil {
		return res, c.fail("load probe "+p.Name, err)
	}
	spec, err := decodeSpec(cont)
	if err != nil {
		return res, c.fail("read the spec of probe "+p.Name, err)
	}
	if spec.Process == nil {
		return res, fmt.Errorf("exec in probe %s: its spec has no process", p.Name)
	}
	pspec := *spec.Process
	pspec.Args = argv
	pspec.Terminal = false
	pAny, err := marshalSpec(&pspec, "Process")
	if err != nil {
		return res, fmt.Errorf("exec in probe: %w", err)
	}

	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return res, fmt.Errorf("exec in probe: %w", err)
	}
	execID := "lp-" + hex.EncodeToString(suffix)
	var stdout, stderr syncBuffer
	pio, err := newExecIO(ctx, probeFIFODir(p.ContainerID), execID, &stdout, &stderr)
	if err != nil {
		return res, fmt.Errorf("exec in probe %s: %w", p.Name, err)
	}
	_, err = c.tasks.Exec(ctx, &tasksapi.ExecProcessRequest{ContainerID: p.ContainerID, ExecID: execID,
		Stdout: pio.stdout, Stderr: pio.stderr, Spec: pAny})
	if err != nil {
		pio.close()
		return res, c.fail("create exec in probe "+p.Name, native(err))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if derr := c.deleteProcess(dctx, p.ContainerID, execID); derr != nil && !errdefs.IsNotFound(derr) {
			c.logger.Debug("delete exec", "container", p.Name, "err", derr)
		}
		pio.close()
	}()
	// Wait is not cancelled with ctx: a cancelled Wait would report ctx's
	// error, and when that raced ctx.Done below, the select could take it
	// for the process's exit and wait for the output of an fio nobody had
	// killed, to the end of its runtime.
	exited := c.wait(context.WithoutCancel(ctx), p.ContainerID, execID)
	// Start is not cancelled with ctx: a Start abandoned by the client can
	// still complete in containerd after the kill below found nothing to
	// kill, and fio would then run to its end with nobody waiting. Once
	// Start has answered, the process is there to be killed.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	_, err = c.tasks.Start(sctx, &tasksapi.StartRequest{ContainerID: p.ContainerID, ExecID: execID})
	cancel()
	if err != nil {
		return res, c.fail("start exec in probe "+p.Name, native(err))
	}
	select {
	case st := <-exited:
		// The exit is reported once the process is gone; its output may
		// still be in flight in the FIFOs.
		pio.wait()
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		if st.err != nil {
			return res, c.fail("exec in probe "+p.Name, st.err)
		}
		res.ExitCode = int(st.code)
		return res, nil
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if kerr := c.kill(kctx, p.ContainerID, execID, false); kerr != nil && !errdefs.IsNotFound(kerr) {
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
	err := c.removeSnapshot(ctx, c.snapshotter, p.ContainerID)
	if err != nil && !errdefs.IsNotFound(err) {
		return c.fail("remove probe snapshot "+p.ContainerID, err)
	}
	return nil
}

// deleteTask kills a probe's task and deletes it. A refused delete (the
// shim still busy with an orphaned exec, see readOrphanOutput) is tried
// again until the task is gone or taskDeleteTimeout has passed.
func (c *Client) deleteTask(ctx context.Context, id string) error {
	deadline := time.Now().Add(taskDeleteTimeout)
	delay := 100 * time.Millisecond
	for {
		err := c.deleteProcess(ctx, id, "")
		if err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		c.logger.Debug("task delete refused; trying again", "container", id, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// removeContainer deletes a container's task (killing it) and the
// container with its snapshot; ctx carries the namespace.
func (c *Client) removeContainer(ctx context.Context, id string) error {
	cont, err := c.getContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		_ = removeProbeFIFODir(id)
		return nil
	}
	if err != nil {
		return c.fail("load probe "+id, err)
	}
	// Before the task is asked about: that asks the shim, which may be
	// waiting for a reader of an orphaned exec's output.
	release := readOrphanOutput(ctx, id)
	err = c.deleteTask(ctx, id)
	release()
	if err != nil {
		return c.fail("delete the task of probe "+id, err)
	}
	if _, err := c.containers.Delete(ctx, &containersapi.DeleteContainerRequest{ID: id}); err != nil && !errdefs.IsNotFound(native(err)) {
		return c.fail("remove probe "+id, native(err))
	}
	if cont.SnapshotKey != "" && cont.Snapshotter != "" {
		if err := c.removeSnapshot(ctx, cont.Snapshotter, cont.SnapshotKey); err != nil && !errdefs.IsNotFound(err) {
			return c.fail("remove the snapshot of probe "+id, err)
		}
	}
	if err := removeProbeFIFODir(id); err != nil {
		c.logger.Warn("remove the output FIFOs of a removed probe", "container", id, "err", err)
	}
	return nil
}
