package containerd

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/layerprobe/layerprobe/internal/cgroup"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The probe image's helper is the real layerprobe binary, built once.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	testharness.RemoveBinary()
	os.Exit(code)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// privateContainerd starts a private containerd with the overlayfs
// snapshotter and a client of it, or skips the test in -short mode.
func privateContainerd(t *testing.T) (*testdaemon.Daemon, *Client, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a private containerd")
	}
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	return d, newTestClient(t, d, ""), testCtx(t)
}

func newTestClient(t *testing.T, d *testdaemon.Daemon, snapshotter string) *Client {
	t.Helper()
	c, err := New("test", d.Host, "", snapshotter, testharness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// probeImage builds the probe image from the host's fio and the layerprobe
// binary.
func probeImage(t *testing.T) *probeimage.Image {
	t.Helper()
	fio, err := exec.LookPath("fio")
	if err != nil {
		testharness.SkipOrFail(t, "fio: %v", err)
	}
	bin, err := testharness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	im, err := probeimage.Build(fio, bin)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// A probe's whole life on a private containerd: the engine's facts, the
// image imported once and reused, exec results and failures, a cancelled
// exec, and a sweep that leaves nothing labelled behind.
func TestProbeLifecycle(t *testing.T) {
	d, c, ctx := privateContainerd(t)

	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(d.DataRoot, "io.containerd.snapshotter.v1.overlayfs")
	if info.Runtime != "containerd" || info.Driver != "overlayfs" || info.DataRoot != root ||
		info.DriverClass != engine.DriverSupported || info.ServerVersion == "" || info.BackingFS == "unknown" {
		t.Errorf("Info() = %+v", info)
	}

	im := probeImage(t)
	ref, err := c.EnsureImage(ctx, im, "lp1-boot-1-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.EnsureImage(ctx, im, "lp1-boot-1-1")
	if err != nil || again != ref {
		t.Fatalf("second EnsureImage = %q, %v; want %q reused", again, err, ref)
	}
	if err := c.CheckImage(ctx, "nowhere/nothing:1"); !errors.Is(err, engine.ErrImageNotFound) {
		t.Errorf("CheckImage of a missing image: %v", err)
	}

	bind := t.TempDir()
	p, err := c.StartProbe(ctx, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: bind, Owner: "lp1-boot-1-1", Mode: measure.ModeSteady})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.LayerDir, root+"/") || p.VolumeName != "" {
		t.Errorf("probe %+v: want an upper dir under %s and no volume", p, root)
	}
	// The host arm joins the probe's CPU cgroups: its PID must be the
	// task's on this host, and its cgroup path must name the container.
	tg, err := cgroup.Of(p.Pid, p.ContainerID)
	if err != nil || len(tg.Dirs) == 0 || tg.Namespace != "" {
		t.Errorf("cgroup.Of(%d, %s) = %+v, %v; want the probe task's CPU cgroups, in this process's cgroup namespace", p.Pid, p.ContainerID, tg, err)
	}
	for _, dir := range tg.Dirs {
		if !strings.HasSuffix(dir, "/"+c.Namespace()+"/"+p.ContainerID) {
			t.Errorf("cgroup %s: want containerd's default /<namespace>/<id>", dir)
		}
	}
	if _, err := cgroup.Of(os.Getpid(), p.ContainerID); err == nil {
		t.Errorf("cgroup.Of of this test's process accepted container %s", p.ContainerID)
	}
	checkSeccomp(t, c, p)
	// The advisor never sees layerprobe's own probe, but can size a layer.
	if cs, err := c.Containers(ctx, []string{"PATH"}); err != nil || len(cs) != 0 {
		t.Errorf("Containers = %+v, %v; want none (the probe is layerprobe's)", cs, err)
	}
	if n, err := c.ContainerLayerSize(ctx, p.ContainerID); err != nil || n < 0 {
		t.Errorf("ContainerLayerSize of the probe = %d, %v", n, err)
	}
	if _, err := c.ContainerLayerSize(ctx, "no-such-container"); err == nil {
		t.Errorf("ContainerLayerSize of a missing container: nil error")
	}
	res, err := c.Exec(ctx, p, []string{engine.ContainerFio, "--version"})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "fio-") {
		t.Errorf("fio --version: %+v, %v", res, err)
	}
	res, err = c.Exec(ctx, p, []string{engine.ContainerFio, "--no-such-option"})
	if err != nil || res.ExitCode == 0 || len(res.Stderr)+len(res.Stdout) == 0 {
		t.Errorf("fio with a bad option: exit %d, err %v, stderr %q", res.ExitCode, err, res.Stderr)
	}
	// Through the bind mount, the helper writes where the host sees it.
	res, err = c.Exec(ctx, p, []string{engine.ContainerHelper, "probe-helper", "clean", engine.ContainerBind})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("helper clean: %+v, %v", res, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Exec(cctx, p, []string{engine.ContainerFio, "--name=x", "--filename=/lp/layer/f", "--size=4m",
		"--rw=randwrite", "--time_based", "--runtime=60"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second {
		t.Errorf("cancelled exec: %v after %s", err, time.Since(start))
	}

	if err := c.RemoveProbe(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveProbe(ctx, p); err != nil {
		t.Errorf("removing a removed probe: %v", err)
	}
	rep, err := c.Sweep(ctx, nil, true)
	if err != nil || len(rep.Images) != 1 {
		t.Errorf("sweep: %+v, %v; want the image removed", rep, err)
	}
	if n := labelled(t, c); n != 0 {
		t.Errorf("%d labelled objects left", n)
	}
}

// labelled counts containers, images, snapshots and leases carrying
// layerprobe's label.
func labelled(t *testing.T, c *Client) int {
	t.Helper()
	ctx := c.ns(testCtx(t))
	ctrs, err := c.api.ContainerService().List(ctx, managedFilter)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := c.api.ImageService().List(ctx, managedFilter)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := c.api.LeasesService().List(ctx, managedFilter)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = c.api.SnapshotService(c.snapshotter).Walk(ctx, func(context.Context, snapshots.Info) error { n++; return nil }, managedFilter)
	if err != nil {
		t.Fatal(err)
	}
	return len(ctrs) + len(imgs) + len(ls) + n
}

// checkSeccomp checks that the probe runs under containerd's default
// seccomp profile, as Docker's and Podman's probes run under theirs: the
// container's spec carries it, and the kernel filters the task's process
// (Seccomp: 2 in /proc/<pid>/status).
func checkSeccomp(t *testing.T, c *Client, p *engine.Probe) {
	t.Helper()
	ctx := c.ns(testCtx(t))
	cont, err := c.api.LoadContainer(ctx, p.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cont.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Linux == nil || spec.Linux.Seccomp == nil || spec.Linux.Seccomp.DefaultAction != specs.ActErrno || len(spec.Linux.Seccomp.Syscalls) == 0 {
		t.Errorf("the probe's spec has no default seccomp profile: %+v", spec.Linux)
	}
	if spec.Process == nil || spec.Process.Capabilities == nil || len(spec.Process.Capabilities.Bounding) != 0 || !spec.Process.NoNewPrivileges {
		t.Errorf("the probe's process keeps capabilities or may gain privileges: %+v", spec.Process)
	}
	if got := seccompMode(t, p.Pid); got != "2" {
		t.Errorf("Seccomp of the probe task's process %d = %q, want 2 (filtered)", p.Pid, got)
	}
}

// seccompMode is the Seccomp field of /proc/<pid>/status: 0 none, 1
// strict, 2 filtered.
func seccompMode(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no Seccomp field", pid)
	return ""
}

// Container starts and stops of others count as churn; the probe's own and
// its execs do not.
func TestContainerChurn(t *testing.T) {
	_, c, ctx := privateContainerd(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ContainerChurn(ctx, time.Now()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event subscription did not come up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	since := time.Now()
	ref, err := c.EnsureImage(ctx, probeImage(t), "lp1-boot-1-1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProbe(ctx, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "lp1-boot-1-1", Mode: measure.ModeSteady})
	if err != nil {
		t.Fatal(err)
	}
	defer c.RemoveProbe(context.WithoutCancel(ctx), p)
	if _, err := c.Exec(ctx, p, []string{engine.ContainerFio, "--version"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if n, err := c.ContainerChurn(ctx, since); err != nil || n != 0 {
		t.Errorf("churn after the probe's own start and exec: %d, %v; want 0", n, err)
	}

	// Someone else's container: started and killed.
	nctx := c.ns(ctx)
	cont := startUnmanaged(t, c, nctx, ref, "someone-else")
	task, err := cont.Task(nctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Delete(nctx, ctd.WithProcessKill); err != nil {
		t.Fatal(err)
	}
	if err := cont.Delete(nctx, ctd.WithSnapshotCleanup); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		n, err := c.ContainerChurn(ctx, since)
		if err == nil && n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("churn after another container started and stopped: %d, %v; want at least 2", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n, _ := c.ContainerChurn(ctx, time.Now().Add(time.Minute)); n != 0 {
		t.Errorf("churn since a future time: %d", n)
	}
}

// A snapshotter containerd could not start, and a socket nobody listens
// on, are errors that say so.
func TestInfoErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a private containerd")
	}
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	ctx := testCtx(t)
	// The data root is not on btrfs, so containerd skipped that plugin.
	_, err := newTestClient(t, d, "btrfs").Info(ctx)
	if err == nil || !strings.Contains(err.Error(), `snapshotter "btrfs"`) || !strings.Contains(err.Error(), "not available") {
		t.Errorf("Info with the btrfs snapshotter on extfs: %v", err)
	}
	gone, err := New("gone", "unix://"+filepath.Join(t.TempDir(), "none.sock"), "", "", testharness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = gone.Info(sctx)
	if !errors.Is(err, engine.ErrUnreachable) || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("Info on a missing socket: %v", err)
	}
	t.Log(err)
}

// A probe with an exec whose output FIFOs lost their reader is removed,
// and the exec's start completes. The shim waits in open(2) for a reader
// (up to its own 30 s) and holds the exec's pid lock meanwhile, so the
// killed task kept reporting "running" and its delete was refused; now
// the removal opens the orphaned FIFOs, which completes the shim's open.
// Without that, the start fails when the shim gives up on the FIFO.
func TestRemoveProbeWithAnOrphanedExec(t *testing.T) {
	_, c, ctx := privateContainerd(t)
	ref, err := c.EnsureImage(ctx, probeImage(t), "lp1-boot-1-1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProbe(ctx, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "lp1-boot-1-1", Mode: measure.ModeSteady})
	if err != nil {
		t.Fatal(err)
	}
	nctx := c.ns(ctx)
	cont, err := c.api.LoadContainer(nctx, p.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	pspec, err := c.execProcess(nctx, cont, []string{engine.ContainerHelper, "probe-helper", "idle"})
	if err != nil {
		t.Fatal(err)
	}
	task, err := cont.Task(nctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// FIFOs in the probe's FIFO directory that nobody opens.
	dir := filepath.Join(probeFIFODir(p.ContainerID), "orphan")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	orphan := &orphanIO{cfg: cio.Config{Stdout: filepath.Join(dir, "lp-orphan-stdout"), Stderr: filepath.Join(dir, "lp-orphan-stderr")}}
	for _, f := range []string{orphan.cfg.Stdout, orphan.cfg.Stderr} {
		if err := syscall.Mkfifo(f, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	proc, err := task.Exec(nctx, "lp-orphan", pspec, func(string) (cio.IO, error) { return orphan, nil })
	if err != nil {
		t.Fatal(err)
	}
	// The start blocks in the shim until the FIFOs have a reader: not
	// cancelled here, as by a client that is gone.
	started := make(chan error, 1)
	go func() { started <- proc.Start(nctx) }()

	// runc has started the process before the shim opens the FIFOs: once
	// the exec is in the probe's cgroup, the shim is at (or near) the open.
	tg, err := cgroup.Of(p.Pid, p.ContainerID)
	if err != nil || len(tg.Dirs) == 0 {
		t.Fatalf("the probe's cgroups: %+v, %v", tg, err)
	}
	dirs := tg.Dirs
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
		if err == nil && len(strings.Fields(string(b))) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphaned exec's process never appeared in %s", dirs[0])
		}
	}
	select {
	case err := <-started:
		t.Fatalf("the exec started while nobody read its output (%v): the shim did not wait for the FIFOs", err)
	case <-time.After(time.Second):
	}

	began := time.Now()
	if err := c.RemoveProbe(ctx, p); err != nil {
		t.Fatalf("remove the probe after %v: %v", time.Since(began), err)
	}
	t.Logf("probe removed in %v", time.Since(began).Round(time.Millisecond))
	select {
	case err := <-started:
		if err != nil {
			t.Errorf("the orphaned exec's start: %v; want it completed by the removal opening its FIFOs", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the orphaned exec's start never returned")
	}
	if _, err := os.Stat(probeFIFODir(p.ContainerID)); !os.IsNotExist(err) {
		t.Errorf("the probe's FIFO directory %s is left (%v)", probeFIFODir(p.ContainerID), err)
	}
	if _, err := c.Sweep(ctx, nil, true); err != nil {
		t.Errorf("sweep: %v", err)
	}
	if n := labelled(t, c); n != 0 {
		t.Errorf("%d labelled objects left", n)
	}
}

// orphanIO is an exec's output that this process never reads: FIFOs it
// made and left, as a layerprobe killed during the exec's start left them.
type orphanIO struct{ cfg cio.Config }

func (o *orphanIO) Config() cio.Config { return o.cfg }
func (o *orphanIO) Cancel()            {}
func (o *orphanIO) Wait()              {}
func (o *orphanIO) Close() error       { return nil }

// startUnmanaged starts a container that is not layerprobe's (no labels)
// from image ref, with a task running the helper's idle process.
func startUnmanaged(t *testing.T, c *Client, nctx context.Context, ref, id string) ctd.Container {
	t.Helper()
	img, err := c.api.GetImage(nctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	cont, err := c.api.NewContainer(nctx, id, ctd.WithSnapshotter(c.snapshotter), ctd.WithNewSnapshot(id, img),
		ctd.WithNewSpec(oci.WithDefaultSpec(), oci.WithProcessArgs(engine.ContainerHelper, "probe-helper", "idle")))
	if err != nil {
		t.Fatal(err)
	}
	task, err := cont.NewTask(nctx, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(nctx); err != nil {
		t.Fatal(err)
	}
	return cont
}
