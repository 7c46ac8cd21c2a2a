package e2e

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/opencontainers/go-digest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// ctrd is a containerd client of the test's own, on containerd's gRPC
// services, so the checks do not depend on layerprobe's engine code.
type ctrd struct {
	conn *grpc.ClientConn
	ctx  context.Context // carries the namespace
}

func newCtrd(t *testing.T, d *testdaemon.Daemon) *ctrd {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+strings.TrimPrefix(d.Host, "unix://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &ctrd{conn: conn, ctx: metadata.AppendToOutgoingContext(context.Background(), "containerd-namespace", ctrdNamespace)}
}

// ctrdObjects lists objects of one kind or another by name.
type ctrdObjects struct {
	containers, tasks, snapshots, images, leases, ingests []string
}

func (o ctrdObjects) empty() bool {
	return len(o.containers)+len(o.tasks)+len(o.snapshots)+len(o.images)+len(o.leases)+len(o.ingests) == 0
}

const managedFilter = `labels."io.layerprobe.managed"==true`

// labelled lists what carries layerprobe's label in the namespace, the
// tasks of those containers, and content ingests layerprobe started.
func (c *ctrd) labelled(t *testing.T, snapshotter string) ctrdObjects {
	t.Helper()
	var o ctrdObjects
	ctrs, err := containersapi.NewContainersClient(c.conn).List(c.ctx, &containersapi.ListContainersRequest{Filters: []string{managedFilter}})
	must(t, err)
	for _, ct := range ctrs.Containers {
		o.containers = append(o.containers, ct.ID)
		if _, err := tasksapi.NewTasksClient(c.conn).Get(c.ctx, &tasksapi.GetRequest{ContainerID: ct.ID}); err == nil {
			o.tasks = append(o.tasks, ct.ID)
		}
	}
	o.snapshots = c.snapshots(t, snapshotter, managedFilter)
	imgs, err := imagesapi.NewImagesClient(c.conn).List(c.ctx, &imagesapi.ListImagesRequest{Filters: []string{managedFilter}})
	must(t, err)
	for _, i := range imgs.Images {
		o.images = append(o.images, i.Name)
	}
	ls, err := leasesapi.NewLeasesClient(c.conn).List(c.ctx, &leasesapi.ListRequest{Filters: []string{managedFilter}})
	must(t, err)
	for _, l := range ls.Leases {
		o.leases = append(o.leases, l.ID)
	}
	sts, err := contentapi.NewContentClient(c.conn).ListStatuses(c.ctx, &contentapi.ListStatusesRequest{})
	must(t, err)
	for _, s := range sts.Statuses {
		if strings.HasPrefix(s.Ref, "layerprobe-") {
			o.ingests = append(o.ingests, s.Ref)
		}
	}
	return o
}

// snapshots lists the names of the snapshots that match filters.
func (c *ctrd) snapshots(t *testing.T, snapshotter string, filters ...string) []string {
	t.Helper()
	stream, err := snapshotsapi.NewSnapshotsClient(c.conn).List(c.ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: snapshotter, Filters: filters})
	must(t, err)
	var names []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return names
		}
		must(t, err)
		for _, i := range resp.Info {
			names = append(names, i.Name)
		}
	}
}

func (c *ctrd) snapshotNames(t *testing.T, snapshotter string) []string {
	t.Helper()
	names := c.snapshots(t, snapshotter)
	slices.Sort(names)
	return names
}

// foreignObjects are what "someone else" made in the namespace.
type foreignObjects struct {
	container, image, lease, snapshot, blob string
}

// makeForeign creates a container record, an image, a lease, an active
// snapshot and a content blob that are not layerprobe's, some carrying
// labels of their own and one a layerprobe-looking name, as a kubelet's
// objects would share the namespace.
func (c *ctrd) makeForeign(t *testing.T, snapshotter string) foreignObjects {
	t.Helper()
	f := foreignObjects{container: "layerprobe-probe-kubelet", image: "registry.example/app:1", lease: "kubelet-lease", snapshot: "kubelet-snap"}
	_, err := leasesapi.NewLeasesClient(c.conn).Create(c.ctx, &leasesapi.CreateRequest{ID: f.lease, Labels: map[string]string{"io.layerprobe.managed": "false"}})
	must(t, err)
	lctx := metadata.AppendToOutgoingContext(c.ctx, "containerd-lease", f.lease)
	blob := []byte(`{"app":"someone else's"}`)
	f.blob = digest.FromBytes(blob).String()
	w, err := contentapi.NewContentClient(c.conn).Write(lctx)
	must(t, err)
	for _, req := range []*contentapi.WriteContentRequest{
		{Action: contentapi.WriteAction_WRITE, Ref: "kubelet-blob", Data: blob},
		{Action: contentapi.WriteAction_COMMIT, Ref: "kubelet-blob", Total: int64(len(blob)), Offset: int64(len(blob)), Expected: f.blob},
	} {
		must(t, w.Send(req))
		_, err := w.Recv()
		must(t, err)
	}
	must(t, w.CloseSend())
	_, err = imagesapi.NewImagesClient(c.conn).Create(lctx, &imagesapi.CreateImageRequest{Image: &imagesapi.Image{Name: f.image,
		Target: &types.Descriptor{MediaType: "application/json", Digest: f.blob, Size: int64(len(blob))},
		Labels: map[string]string{"io.cri-containerd.image": "managed"}}})
	must(t, err)
	_, err = snapshotsapi.NewSnapshotsClient(c.conn).Prepare(lctx, &snapshotsapi.PrepareSnapshotRequest{Snapshotter: snapshotter, Key: f.snapshot,
		Labels: map[string]string{"owner": "kubelet"}})
	must(t, err)
	_, err = containersapi.NewContainersClient(c.conn).Create(c.ctx, &containersapi.CreateContainerRequest{Container: &containersapi.Container{
		ID: f.container, Image: f.image, Snapshotter: snapshotter, SnapshotKey: f.snapshot,
		Runtime: &containersapi.Container_Runtime{Name: "io.containerd.runc.v2"},
		Spec:    &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Spec", Value: []byte(`{"ociVersion":"1.0.2"}`)},
		Labels:  map[string]string{"io.kubernetes.pod.name": "app"},
	}})
	must(t, err)
	return f
}

func (c *ctrd) checkForeign(t *testing.T, f foreignObjects) {
	t.Helper()
	if _, err := containersapi.NewContainersClient(c.conn).Get(c.ctx, &containersapi.GetContainerRequest{ID: f.container}); err != nil {
		t.Errorf("foreign container %s: %v", f.container, err)
	}
	if _, err := imagesapi.NewImagesClient(c.conn).Get(c.ctx, &imagesapi.GetImageRequest{Name: f.image}); err != nil {
		t.Errorf("foreign image %s: %v", f.image, err)
	}
	if _, err := snapshotsapi.NewSnapshotsClient(c.conn).Stat(c.ctx, &snapshotsapi.StatSnapshotRequest{Snapshotter: "overlayfs", Key: f.snapshot}); err != nil {
		t.Errorf("foreign snapshot %s: %v", f.snapshot, err)
	}
	if _, err := contentapi.NewContentClient(c.conn).Info(c.ctx, &contentapi.InfoRequest{Digest: f.blob}); err != nil {
		t.Errorf("foreign blob %s: %v", f.blob, err)
	}
	ls, err := leasesapi.NewLeasesClient(c.conn).List(c.ctx, &leasesapi.ListRequest{Filters: []string{"id==" + f.lease}})
	if err != nil || len(ls.GetLeases()) != 1 {
		t.Errorf("foreign lease %s: %v, %d found", f.lease, err, len(ls.GetLeases()))
	}
}
