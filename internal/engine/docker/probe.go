package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/blkiodev"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// The probe container's own settings on a Docker engine; its limits are
// every engine's (engine.ProbePidsLimit, ...).
const (
	// The probe's process limit (probeUlimits).
	probeNProc      = 4096
	probeLogMaxSize = "1m"
	probeNamePrefix = "layerprobe-probe-"
	runningTimeout  = 10 * time.Second
	killTimeout     = 10 * time.Second
	exitCodeTimeout = 5 * time.Second
)

// probeUlimits are the probe container's open-file and process limits,
// set rather than left to the engine: an engine's defaults can exceed the
// hard limits its runtime may set without CAP_SYS_RESOURCE (Podman asks for
// 1048576 open files and processes; on a CI runner or a constrained host
// the container then fails to start with "error setting rlimit type 7",
// or 6). fio and the helper keep a few dozen files open. The process limit
// does not bind root of the host's user namespace, which the kernel exempts
// from RLIMIT_NPROC at fork, so a rootful probe only needs a value the
// runtime may set; a rootless engine's container root is an ordinary user
// whose other processes count too, so there the engine's (the user's own)
// limit stays.
func probeUlimits(rootless bool) []*container.Ulimit {
	out := []*container.Ulimit{{Name: "nofile", Soft: engine.ProbeNoFile, Hard: engine.ProbeNoFile}}
	if !rootless {
		out = append(out, &container.Ulimit{Name: "nproc", Soft: probeNProc, Hard: probeNProc})
	}
	return out
}

// StartProbe creates the probe's named volume and container, starts the
// container and waits until it runs. The container is locked down: no
// network, no capabilities, no new privileges, bounded pids and memory, no
// TTY (fio would print progress), an explicit json-file log, no AutoRemove
// (with AutoRemove a daemon restart can drop it, and Podman then mounts the
// layer volatile, which makes fsync a no-op). On any failure what was
// created is removed again.
func (c *Client) StartProbe(ctx context.Context, spec engine.ProbeSpec) (p *engine.Probe, err error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("start probe: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("start probe: %w", err)
	}
	name := probeNamePrefix + hex.EncodeToString(suffix)
	managed := map[string]string{
		engine.LabelManaged: "true",
		engine.LabelRole:    "probe",
		engine.LabelOwner:   spec.Owner,
		engine.LabelEngine:  spec.Engine,
		engine.LabelMode:    string(spec.Mode),
	}
	p = &engine.Probe{Name: name, Image: spec.Image}
	if !spec.WritableLayerOnly {
		p.VolumeName = name
	}

	defer func() {
		if err != nil {
			engine.RemoveHalfStarted(ctx, c.logger, name, func(ctx context.Context) error { return c.RemoveProbe(ctx, p) })
			p = nil
		}
	}()

	if p.VolumeName != "" {
		vol, err := c.api.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: managed})
		if err != nil {
			return p, c.fail("create probe volume", err)
		}
		p.VolumeHostPath = vol.Volume.Mountpoint
		if p.VolumeHostPath == "" {
			vi, err := c.api.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
			if err != nil {
				return p, c.fail("inspect probe volume", err)
			}
			p.VolumeHostPath = vi.Volume.Mountpoint
		}
	}

	// The probe's own labels win over spec.Labels: a caller cannot make
	// a probe look unmanaged or owned by someone else.
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, managed)

	pids := int64(engine.ProbePidsLimit)
	hc := &container.HostConfig{
		NetworkMode: "none",
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": probeLogMaxSize, "max-file": "1"},
		},
		AutoRemove: false,
		Resources: container.Resources{
			PidsLimit: &pids,
			Memory:    engine.ProbeMemoryBytes,
			Ulimits:   probeUlimits(spec.Rootless),
		},
	}
	if !spec.WritableLayerOnly {
		hc.Mounts = []mount.Mount{
			{Type: mount.TypeBind, Source: spec.BindSource, Target: engine.ContainerBind},
			{Type: mount.TypeVolume, Source: name, Target: engine.ContainerVolume},
		}
	}
	if spec.HostCgroupNamespace {
		hc.CgroupnsMode = container.CgroupnsModeHost
	}
	if spec.AppArmorProfile != "" {
		hc.SecurityOpt = append(hc.SecurityOpt, "apparmor="+spec.AppArmorProfile)
	}
	if spec.DeviceWriteIOPS > 0 {
		hc.BlkioDeviceWriteIOps = []*blkiodev.ThrottleDevice{{Path: spec.DevicePath, Rate: spec.DeviceWriteIOPS}}
	}
	created, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image: spec.Image,
			// Explicit, so a user-named image with another entrypoint
			// still runs the helper.
			Entrypoint: []string{engine.ContainerHelper, "probe-helper", "idle"},
			Cmd:        []string{},
			Labels:     labels,
			Tty:        false,
			WorkingDir: "/",
		},
		HostConfig: hc,
	})
	if err != nil {
		return p, c.fail("create probe container", err)
	}
	p.ContainerID = created.ID
	for _, w := range created.Warnings {
		c.logger.Warn("engine warning while creating the probe container", "container", name, "warning", w)
	}
	if _, err := c.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return p, c.fail("start probe container", err)
	}
	insp, err := c.waitRunning(ctx, created.ID)
	if err != nil {
		return p, err
	}
	if gd := insp.GraphDriver; gd != nil {
		p.LayerDir = layerDir(gd.Data)
	}
	if insp.State != nil {
		p.Pid = insp.State.Pid
	}
	c.logger.Debug("probe started", "container", name, "image", spec.Image, "layer_dir", p.LayerDir, "volume_path", p.VolumeHostPath)
	return p, nil
}

// waitRunning waits until the container runs (ContainerStart returns once
// the process was started, so this is usually immediate) and fails early if
// it has exited.
func (c *Client) waitRunning(ctx context.Context, id string) (container.InspectResponse, error) {
	deadline := time.Now().Add(runningTimeout)
	delay := 10 * time.Millisecond
	for {
		res, err := c.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return container.InspectResponse{}, c.fail("inspect probe container", err)
		}
		st := res.Container.State
		switch {
		case st == nil:
		case st.Running && !st.Restarting:
			return res.Container, nil
		case st.Status == container.StateExited || st.Status == container.StateDead:
			return container.InspectResponse{}, fmt.Errorf("start probe container on engine %s: it exited at once with code %d %s",
				c.name, st.ExitCode, st.Error)
		}
		if time.Now().After(deadline) {
			return container.InspectResponse{}, fmt.Errorf("start probe container on engine %s: not running after %s", c.name, runningTimeout)
		}
		select {
		case <-ctx.Done():
			return container.InspectResponse{}, fmt.Errorf("start probe container: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// Exec runs argv in the probe container and returns its output and exit
// code. A non-zero exit code is a result, not an error; the error is for an
// exec that could not run (container gone, engine down) or a ctx that ended.
// When ctx ends, the command keeps running in the container (the engine
// does not stop detached execs), so every fio in it is killed with the
// helper's kill-fio before Exec returns.
func (c *Client) Exec(ctx context.Context, p *engine.Probe, argv []string) (engine.ExecResult, error) {
	res, started, err := c.exec(ctx, p, argv)
	if err != nil && ctx.Err() != nil {
		if !started {
			return res, fmt.Errorf("exec %s in probe %s: %w", argv[0], p.Name, ctx.Err())
		}
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		kill, _, kerr := c.exec(kctx, p, []string{engine.ContainerHelper, "probe-helper", "kill-fio"})
		switch {
		case kerr != nil:
			c.logger.Warn("could not kill fio in the probe after a cancelled exec", "container", p.Name, "err", kerr)
		case kill.ExitCode != 0:
			c.logger.Warn("kill-fio in the probe failed", "container", p.Name, "exit_code", kill.ExitCode,
				"stderr", string(kill.Stderr))
		}
		return res, fmt.Errorf("exec %s in probe %s: %w", argv[0], p.Name, ctx.Err())
	}
	return res, err
}

// exec runs argv; started reports that the engine may have started the
// process (so a cancelled exec may have left it running).
func (c *Client) exec(ctx context.Context, p *engine.Probe, argv []string) (res engine.ExecResult, started bool, err error) {
	res.ExitCode = -1
	if p == nil || p.ContainerID == "" {
		return res, false, errors.New("exec in probe: no probe container")
	}
	if len(argv) == 0 {
		return res, false, errors.New("exec in probe: empty command")
	}
	created, err := c.api.ExecCreate(ctx, p.ContainerID, client.ExecCreateOptions{
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return res, false, c.fail("create exec in probe "+p.Name, err)
	}
	att, err := c.api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return res, true, c.fail("start exec in probe "+p.Name, err)
	}
	var stdout, stderr bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader)
		copied <- err
	}()
	select {
	case err = <-copied:
		att.Close()
	case <-ctx.Done():
		// The hijacked connection ignores ctx once established; closing
		// it ends the copy.
		att.Close()
		<-copied
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		return res, true, ctx.Err()
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if err != nil {
		return res, true, c.fail("read exec output in probe "+p.Name, err)
	}
	if res.ExitCode, err = c.exitCode(ctx, created.ID); err != nil {
		return res, true, err
	}
	return res, true, nil
}

// exitCode returns an exec's exit code. The output stream can end a moment
// before the engine has recorded the exit, so a still-running exec is asked
// again briefly.
func (c *Client) exitCode(ctx context.Context, execID string) (int, error) {
	deadline := time.Now().Add(exitCodeTimeout)
	delay := 5 * time.Millisecond
	for {
		ins, err := c.api.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, c.fail("inspect exec", err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("inspect exec on engine %s: output ended but the process still runs after %s", c.name, exitCodeTimeout)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// RemoveProbe force-removes the probe container (with its anonymous
// volumes) and its named volume. What is already gone is not an error.
func (c *Client) RemoveProbe(ctx context.Context, p *engine.Probe) error {
	if p == nil {
		return nil
	}
	var errs []error
	ref := p.ContainerID
	if ref == "" {
		ref = p.Name
	}
	if ref != "" {
		_, err := c.api.ContainerRemove(ctx, ref, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !isNotFound(err) {
			errs = append(errs, c.fail("remove probe container "+p.Name, err))
		}
	}
	if p.VolumeName != "" {
		_, err := c.api.VolumeRemove(ctx, p.VolumeName, client.VolumeRemoveOptions{Force: true})
		if err != nil && !isNotFound(err) {
			errs = append(errs, c.fail("remove probe volume "+p.VolumeName, err))
		}
	}
	return errors.Join(errs...)
}

// layerDir is where a container's writable layer lies on the host, from the
// GraphDriver data of its inspect answer: UpperDir for overlay2, Podman's
// overlay and fuse-overlayfs; Mountpoint for zfs, whose GetMetadata
// reports the layer's dataset and mount point (moby
// daemon/graphdriver/zfs). Other drivers say nothing.
func layerDir(data map[string]string) string {
	if d := data["UpperDir"]; d != "" {
		return d
	}
	return data["Mountpoint"]
}
