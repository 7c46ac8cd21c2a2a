package containerd

import (
	"context"
	"path/filepath"
	"syscall"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// probeSpec is the OCI runtime spec of a probe container: containerd's
// default spec for a Linux container (its own network namespace with lo
// only, the usual /proc, /dev and /sys mounts with the usual masks, no
// device access), locked down further like a Docker probe: no
// capabilities, no new privileges, bounded pids and memory, no terminal,
// and the host scratch directory bind-mounted unless
// spec.WritableLayerOnly.
func probeSpec(namespace, id string, ps engine.ProbeSpec) *specs.Spec {
	pids, mem := int64(probePidsLimit), int64(probeMemoryBytes)
	s := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: "rootfs"},
		Hostname: id[:min(len(id), 63)],
		Process: &specs.Process{
			Args:            []string{engine.ContainerHelper, "probe-helper", "idle"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		},
		Linux: &specs.Linux{
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
				"/sys/devices/virtual/powercap", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			// The probe session checks the task's PID against this path
			// (which names the container ID) before the host arm joins its
			// CPU cgroups.
			CgroupsPath: filepath.Join("/", namespace, id),
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Pids:    &specs.LinuxPids{Limit: pids},
				Memory:  &specs.LinuxMemory{Limit: &mem},
			},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace}},
		},
	}
	// No cgroup namespace in Namespaces: the task shares containerd's,
	// the host's, whatever ps.HostCgroupNamespace says.
	s.Process.ApparmorProfile = ps.AppArmorProfile
	if !ps.WritableLayerOnly {
		s.Mounts = append(s.Mounts, specs.Mount{Type: "bind", Source: ps.BindSource, Destination: engine.ContainerBind,
			Options: []string{"rbind", "rw"}})
	}
	return s
}

// exitStatus is how a process ended: its code, or why it could not be
// waited for.
type exitStatus struct {
	code uint32
	err  error
}

// wait waits for the task's process (execID "") or an exec to exit, in the
// background; the channel gets one value.
func (c *Client) wait(ctx context.Context, id, execID string) <-chan exitStatus {
	ch := make(chan exitStatus, 1)
	go func() {
		resp, err := c.tasks.Wait(ctx, &tasksapi.WaitRequest{ContainerID: id, ExecID: execID})
		if err != nil {
			ch <- exitStatus{err: native(err)}
			return
		}
		ch <- exitStatus{code: resp.ExitStatus}
	}()
	return ch
}

// kill sends SIGKILL to a process; all sends it to every process of the
// task.
func (c *Client) kill(ctx context.Context, id, execID string, all bool) error {
	_, err := c.tasks.Kill(ctx, &tasksapi.KillRequest{ContainerID: id, ExecID: execID, Signal: uint32(syscall.SIGKILL), All: all})
	return native(err)
}

// deleteProcess kills a task (execID "", with every process in it) or an
// exec, waits for it to exit, and deletes it. The wait is bounded: a
// delete that comes too early is refused, and the callers try again.
func (c *Client) deleteProcess(ctx context.Context, id, execID string) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited := c.wait(wctx, id, execID)
	err := c.kill(ctx, id, execID, execID == "")
	switch {
	case err == nil, errdefs.IsNotFound(err):
		// Killed, or gone already: Wait answers at once then.
		select {
		case <-exited:
		case <-time.After(killTimeout):
		case <-ctx.Done():
			return ctx.Err()
		}
	case errdefs.IsFailedPrecondition(err): // not running
	default:
		return err
	}
	if execID == "" {
		_, err = c.tasks.Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: id})
	} else {
		_, err = c.tasks.DeleteProcess(ctx, &tasksapi.DeleteProcessRequest{ContainerID: id, ExecID: execID})
	}
	return native(err)
}

// removeSnapshot removes one snapshot.
func (c *Client) removeSnapshot(ctx context.Context, snapshotter, key string) error {
	_, err := c.snapshots.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: snapshotter, Key: key})
	return native(err)
}
