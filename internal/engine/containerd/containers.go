package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Containers lists the running containers of the client's namespace for the
// layer-write advisor, leaving out layerprobe's own (labelled
// io.layerprobe.managed=true). A container that goes away while it is read
// is skipped. env names the environment variables to report; the rest of a
// container's environment is never kept.
//
// containerd has no named volumes: every mount of a container is reported
// as its spec says it (bind mounts, which Kubernetes volumes are, and
// tmpfs).
func (c *Client) Containers(ctx context.Context, env []string) ([]engine.Container, error) {
	ctx = c.ns(ctx)
	resp, err := c.containers.List(ctx, &containersapi.ListContainersRequest{})
	if err != nil {
		return nil, c.fail("list containers", native(err))
	}
	out := make([]engine.Container, 0, len(resp.Containers))
	for _, cont := range resp.Containers {
		ct, ok, err := c.container(ctx, cont, env)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ct)
		}
	}
	return out, nil
}

// container reads what the advisor needs of one container; ok is false for
// one of layerprobe's own or one without a running task.
func (c *Client) container(ctx context.Context, info *containersapi.Container, env []string) (ct engine.Container, ok bool, err error) {
	if info.Labels[engine.LabelManaged] == "true" {
		return ct, false, nil
	}
	proc, err := c.taskProcess(ctx, info.ID, "")
	if err != nil {
		if errdefs.IsNotFound(err) {
			return ct, false, nil // created, never started or already gone
		}
		return ct, false, c.fail("get the task of container "+shortID(info.ID), err)
	}
	if proc.Status != task.Status_RUNNING {
		return ct, false, nil
	}
	spec, err := decodeSpec(info)
	if err != nil {
		return ct, false, err
	}
	ct = engine.Container{
		ID: info.ID, Name: info.ID, Image: info.Image, StartedAt: info.CreatedAt.AsTime(),
		Pid: int(proc.Pid), Driver: info.Snapshotter,
	}
	// The kubelet names its containers by label; the ID is a hash.
	if n := info.Labels["io.kubernetes.container.name"]; n != "" {
		ct.Name = n
		if pod := info.Labels["io.kubernetes.pod.name"]; pod != "" {
			ct.Name = pod + "/" + n
		}
	}
	if info.Image != "" {
		if img, err := c.images.Get(ctx, &imagesapi.GetImageRequest{Name: info.Image}); err == nil && img.Image.GetTarget() != nil {
			ct.ImageID = img.Image.Target.Digest
		}
	}
	if info.SnapshotKey != "" && info.Snapshotter != "" {
		ct.UpperDir = c.upperDirOf(ctx, info.Snapshotter, info.SnapshotKey)
	}
	if spec.Process != nil {
		ct.Env = engine.PickEnv(spec.Process.Env, env)
	}
	for _, m := range spec.Mounts {
		typ := m.Type
		if slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			typ = "bind"
		}
		if typ != "bind" && typ != "tmpfs" {
			continue // proc, sysfs, devpts, mqueue, cgroup: not storage
		}
		ct.Mounts = append(ct.Mounts, engine.Mount{Type: typ, Source: m.Source, Destination: m.Destination,
			RW: !slices.Contains(m.Options, "ro")})
	}
	return ct, true, nil
}

// taskProcess is the state of a container's task (execID "") or of one of
// its execs.
func (c *Client) taskProcess(ctx context.Context, id, execID string) (*task.Process, error) {
	resp, err := c.tasks.Get(ctx, &tasksapi.GetRequest{ContainerID: id, ExecID: execID})
	if err != nil {
		return nil, native(err)
	}
	return resp.Process, nil
}

// getContainer reads one container's record.
func (c *Client) getContainer(ctx context.Context, id string) (*containersapi.Container, error) {
	resp, err := c.containers.Get(ctx, &containersapi.GetContainerRequest{ID: id})
	if err != nil {
		return nil, native(err)
	}
	return resp.Container, nil
}

// decodeSpec reads a container's OCI runtime spec, which containerd keeps
// as JSON in a typed Any.
func decodeSpec(info *containersapi.Container) (*specs.Spec, error) {
	var s specs.Spec
	if info.Spec == nil {
		return nil, fmt.Errorf("container %s has no spec", shortID(info.ID))
	}
	if err := json.Unmarshal(info.Spec.Value, &s); err != nil {
		return nil, fmt.Errorf("read the spec of container %s: %w", shortID(info.ID), err)
	}
	return &s, nil
}

// ContainerLayerSize is the snapshotter's own figure for the size of a
// container's writable layer: the usage of its active snapshot, which the
// snapshotter computes on request by walking it.
func (c *Client) ContainerLayerSize(ctx context.Context, id string) (int64, error) {
	ctx = c.ns(ctx)
	info, err := c.getContainer(ctx, id)
	if err != nil {
		return 0, c.fail("inspect container "+shortID(id), err)
	}
	if info.SnapshotKey == "" || info.Snapshotter == "" {
		return 0, fmt.Errorf("engine %s: container %s has no snapshot", c.name, shortID(id))
	}
	u, err := c.snapshots.Usage(ctx, &snapshotsapi.UsageRequest{Snapshotter: info.Snapshotter, Key: info.SnapshotKey})
	if err != nil {
		return 0, c.fail("get the snapshot usage of container "+shortID(id), native(err))
	}
	return u.Size, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
