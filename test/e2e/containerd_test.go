package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ctd "github.com/containerd/containerd"
	"github.com/containerd/containerd/content"
	"github.com/containerd/containerd/images"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/snapshots"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// The namespace the containerd tests use: the kubelet's, which is the
// default of an engine of type containerd.
const ctrdNamespace = "k8s.io"

var ctrdTargets = []string{"host", "container", "bind"}

// containerdConfig is a configuration file naming one containerd engine.
func containerdConfig(t *testing.T, d *testdaemon.Daemon, snapshotter string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	// The smoke profile: these tests are about the engine, not figures.
	yaml := fmt.Sprintf("profile: smoke\nengines:\n  - name: node\n    type: containerd\n    host: %s\n    snapshotter: %s\n", d.Host, snapshotter)
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunOnPrivateContainerd(t *testing.T) {
	cases := []struct {
		name    string
		opts    testdaemon.Options
		backing string
	}{
		{"overlayfs", testdaemon.Options{Driver: "overlayfs"}, "extfs"},
		{"btrfs", testdaemon.Options{Driver: "btrfs", Backing: "btrfs", SizeMiB: 4096}, "btrfs"},
	}
	hostFio := hostFioVersion(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := testdaemon.StartContainerd(t, c.opts)
			cc := newCtrd(t, d)
			before := cc.snapshotNames(t, c.opts.Driver)
			cfg := containerdConfig(t, d, c.opts.Driver)
			// The quick profile, as the Docker run test: checkRunTargets
			// wants every round to pair up with finite figures, and the
			// smoke profile's 30 ms sequential job can finish a round
			// without a single 1 MiB write on a busy disk.
			res := layerprobe(t, "", 10*time.Minute, "--config", cfg, "run", "--output", "json",
				"--profile", "quick", "--rounds", strconv.Itoa(e2eRounds), "--log.level", "warn")
			if res.code != 0 {
				t.Fatalf("layerprobe run exited %d\nstderr:\n%s\nstdout:\n%s", res.code, res.stderr, res.stdout)
			}
			var run report.Run
			if err := json.Unmarshal([]byte(res.stdout), &run); err != nil {
				t.Fatalf("decode output: %v\n%s", err, res.stdout)
			}
			checkRunTargets(t, run, "quick", c.opts.Driver, c.backing, hostFio, ctrdTargets)
			e := run.Engines[0]
			if e.Runtime != "containerd" || e.ImageStore != "containerd" {
				t.Errorf("runtime %q, image store %q; want containerd", e.Runtime, e.ImageStore)
			}
			wantRoot := filepath.Join(d.DataRoot, "io.containerd.snapshotter.v1."+c.opts.Driver)
			if e.DataRoot != wantRoot {
				t.Errorf("data root %q, want the snapshotter's root %q", e.DataRoot, wantRoot)
			}
			if !slices.ContainsFunc(e.Warnings, func(w string) bool { return strings.Contains(w, "volume skipped") }) {
				t.Errorf("no warning that the volume target is skipped: %q", e.Warnings)
			}
			// The task's PID leads the host arm into the probe's CPU
			// cgroups; a wrong PID or cgroup path would warn here.
			if slices.ContainsFunc(e.Warnings, func(w string) bool { return strings.Contains(w, "CPU cgroup") }) {
				t.Errorf("host arm outside the probe's CPU cgroup: %q", e.Warnings)
			}
			t.Logf("%s: %.0f s, %d MiB written", c.name, run.DurationSeconds, run.BytesWritten>>20)

			if left := cc.labelled(t, c.opts.Driver); !left.empty() {
				t.Errorf("left behind in the namespace: %+v", left)
			}
			if after := cc.snapshotNames(t, c.opts.Driver); !slices.Equal(before, after) {
				t.Errorf("snapshots before the run %v, after %v", before, after)
			}
			scratch := filepath.Join(wantRoot, "layerprobe-scratch")
			if _, err := os.Stat(scratch); !os.IsNotExist(err) {
				t.Errorf("scratch directory %s left behind (err %v)", scratch, err)
			}
		})
	}
}

// A run killed with SIGKILL half way leaves its container, task and
// snapshots; `layerprobe cleanup` removes them and nothing else: objects
// someone else made in the same namespace (a kubelet's) stay.
func TestContainerdKilledRunThenCleanup(t *testing.T) {
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	cc := newCtrd(t, d)
	foreign := cc.makeForeign(t, "overlayfs")
	cfg := containerdConfig(t, d, "overlayfs")

	run := startLayerprobe(t, "", "--config", cfg, "run", "--rounds", "100", "--log.level", "warn")
	deadline := time.Now().Add(3 * time.Minute)
	for len(cc.labelled(t, "overlayfs").tasks) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no probe task appeared; layerprobe said:\n%s", run.Log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	run.Kill()

	left := cc.labelled(t, "overlayfs")
	if len(left.containers) == 0 || len(left.tasks) == 0 || len(left.snapshots) == 0 || len(left.images) == 0 {
		t.Fatalf("after SIGKILL expected a leftover container, task, snapshot and image, got %+v", left)
	}
	began := time.Now()
	res := layerprobe(t, "", 3*time.Minute, "--config", cfg, "cleanup")
	if res.code != 0 {
		t.Fatalf("cleanup exited %d after %v: %s", res.code, time.Since(began).Round(time.Millisecond), res.stderr)
	}
	t.Logf("cleanup took %v", time.Since(began).Round(time.Millisecond))
	for _, c := range left.containers {
		if !strings.Contains(res.stdout, "removed container "+c) {
			t.Errorf("cleanup output does not name container %s:\n%s", c, res.stdout)
		}
		// The killed run's exec output FIFOs go with its probe.
		if dir := filepath.Join("/run/containerd/fifo/layerprobe", c); !isNotExist(os.Stat(dir)) {
			t.Errorf("FIFO directory %s left behind", dir)
		}
	}
	if now := cc.labelled(t, "overlayfs"); !now.empty() {
		t.Errorf("left behind after cleanup: %+v", now)
	}
	cc.checkForeign(t, foreign)
	scratch := filepath.Join(d.DataRoot, "io.containerd.snapshotter.v1.overlayfs", "layerprobe-scratch")
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("scratch directory %s left behind (err %v)", scratch, err)
	}
	noFioUnder(t, d.Dir)
}

// The agent measures a containerd engine and labels its series with the
// snapshotter and runtime="containerd".
func TestAgentOnContainerd(t *testing.T) {
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	s := newAgentSetup(t, "", agentConfig+fmt.Sprintf(`
engines:
  - name: node
    type: containerd
    host: %s`, d.Host))
	a := s.start(t)
	a.waitCycles(t, "ok", 1, 3*time.Minute)

	_, series := a.scrape(t)
	info := map[string]string{"engine": "node", "runtime": "containerd", "driver": "overlayfs", "backing_fs": "extfs",
		"data_root": filepath.Join(d.DataRoot, "io.containerd.snapshotter.v1.overlayfs")}
	if _, ok := series.Find("layerprobe_engine_info", info); !ok {
		t.Errorf("no layerprobe_engine_info%v; have %v", info, series["layerprobe_engine_info"])
	}
	for _, target := range []string{"container", "bind"} {
		v, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"engine": "node", "driver": "overlayfs",
			"target": target, "workload": "fsync", "metric": "fsync_p99"})
		// A latency overhead is target/host - 1, so anything finite above -1
		// is a valid estimate: one cycle of smoke rounds under the whole
		// suite's load has read the container's fsync p99 at 1/15 of the
		// host's, so no tighter bound holds.
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v <= -1 {
			t.Errorf("layerprobe_overhead_ratio for %s/fsync: %v (found %v)", target, v, ok)
		}
	}
	if _, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"engine": "node", "target": "volume"}); ok {
		t.Errorf("volume overheads on a containerd engine")
	}
	var engs struct {
		Engines []struct {
			Name, Runtime, Driver string
		} `json:"engines"`
	}
	a.getJSON(t, "/api/v1/engines", &engs)
	if len(engs.Engines) != 1 || engs.Engines[0].Runtime != "containerd" || engs.Engines[0].Driver != "overlayfs" {
		t.Errorf("/api/v1/engines: %+v", engs.Engines)
	}

	// The agent keeps its probe between cycles; stopping it removes it.
	if code, _ := a.stop(); code != 0 {
		t.Errorf("agent exited %d", code)
	}
	left := newCtrd(t, d).labelled(t, "overlayfs")
	if len(left.containers)+len(left.tasks)+len(left.leases) > 0 {
		t.Errorf("left behind after the agent stopped: %+v", left)
	}
}

// ctrd is a containerd client of the test's own, so the checks do not
// depend on layerprobe's engine code.
type ctrd struct {
	c   *ctd.Client
	ctx context.Context
}

func newCtrd(t *testing.T, d *testdaemon.Daemon) *ctrd {
	t.Helper()
	c, err := ctd.New(strings.TrimPrefix(d.Host, "unix://"), ctd.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &ctrd{c: c, ctx: namespaces.WithNamespace(context.Background(), ctrdNamespace)}
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
	ctrs, err := c.c.Containers(c.ctx, managedFilter)
	must(t, err)
	for _, ct := range ctrs {
		o.containers = append(o.containers, ct.ID())
		if _, err := ct.Task(c.ctx, nil); err == nil {
			o.tasks = append(o.tasks, ct.ID())
		}
	}
	must(t, c.c.SnapshotService(snapshotter).Walk(c.ctx, func(_ context.Context, i snapshots.Info) error {
		o.snapshots = append(o.snapshots, i.Name)
		return nil
	}, managedFilter))
	imgs, err := c.c.ImageService().List(c.ctx, managedFilter)
	must(t, err)
	for _, i := range imgs {
		o.images = append(o.images, i.Name)
	}
	ls, err := c.c.LeasesService().List(c.ctx, managedFilter)
	must(t, err)
	for _, l := range ls {
		o.leases = append(o.leases, l.ID)
	}
	sts, err := c.c.ContentStore().ListStatuses(c.ctx)
	must(t, err)
	for _, s := range sts {
		if strings.HasPrefix(s.Ref, "layerprobe-") {
			o.ingests = append(o.ingests, s.Ref)
		}
	}
	return o
}

func (c *ctrd) snapshotNames(t *testing.T, snapshotter string) []string {
	t.Helper()
	var names []string
	must(t, c.c.SnapshotService(snapshotter).Walk(c.ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}))
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
	l, err := c.c.LeasesService().Create(c.ctx, leases.WithID(f.lease), leases.WithLabels(map[string]string{"io.layerprobe.managed": "false"}))
	must(t, err)
	lctx := leases.WithLease(c.ctx, l.ID)
	blob := []byte(`{"app":"someone else's"}`)
	desc := ocispec.Descriptor{MediaType: "application/json", Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	must(t, content.WriteBlob(lctx, c.c.ContentStore(), "kubelet-blob", strings.NewReader(string(blob)), desc))
	f.blob = desc.Digest.String()
	_, err = c.c.ImageService().Create(lctx, images.Image{Name: f.image, Target: desc, Labels: map[string]string{"io.cri-containerd.image": "managed"}})
	must(t, err)
	_, err = c.c.SnapshotService(snapshotter).Prepare(lctx, f.snapshot, "", snapshots.WithLabels(map[string]string{"owner": "kubelet"}))
	must(t, err)
	_, err = c.c.NewContainer(c.ctx, f.container, ctd.WithImageName(f.image), ctd.WithSnapshotter(snapshotter),
		ctd.WithSnapshot(f.snapshot), ctd.WithSpec(&oci.Spec{Version: "1.0.2"}),
		ctd.WithContainerLabels(map[string]string{"io.kubernetes.pod.name": "app"}))
	must(t, err)
	return f
}

func (c *ctrd) checkForeign(t *testing.T, f foreignObjects) {
	t.Helper()
	if _, err := c.c.ContainerService().Get(c.ctx, f.container); err != nil {
		t.Errorf("foreign container %s: %v", f.container, err)
	}
	if _, err := c.c.ImageService().Get(c.ctx, f.image); err != nil {
		t.Errorf("foreign image %s: %v", f.image, err)
	}
	if _, err := c.c.SnapshotService("overlayfs").Stat(c.ctx, f.snapshot); err != nil {
		t.Errorf("foreign snapshot %s: %v", f.snapshot, err)
	}
	if _, err := c.c.ContentStore().Info(c.ctx, digest.Digest(f.blob)); err != nil {
		t.Errorf("foreign blob %s: %v", f.blob, err)
	}
	ls, err := c.c.LeasesService().List(c.ctx, "id=="+f.lease)
	if err != nil || len(ls) != 1 {
		t.Errorf("foreign lease %s: %v, %d found", f.lease, err, len(ls))
	}
}

func isNotExist(_ os.FileInfo, err error) bool { return os.IsNotExist(err) }
