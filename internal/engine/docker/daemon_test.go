package docker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

func newTestClient(t *testing.T, host string) *Client {
	t.Helper()
	c, err := New("test", host, testharness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// labelled lists what carries the managed label on the engine.
func labelled(t *testing.T, c *Client) (ctrs, vols, imgs []string) {
	t.Helper()
	ctx := testCtx(t)
	f := func() client.Filters { return make(client.Filters).Add("label", engine.LabelManaged+"=true") }
	cl, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f()})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cl.Items {
		ctrs = append(ctrs, containerName(x.Names, x.ID))
	}
	vl, err := c.api.VolumeList(ctx, client.VolumeListOptions{Filters: f()})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range vl.Items {
		vols = append(vols, x.Name)
	}
	il, err := c.api.ImageList(ctx, client.ImageListOptions{Filters: f()})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range il.Items {
		imgs = append(imgs, x.ID)
	}
	return ctrs, vols, imgs
}

func startProbe(t *testing.T, c *Client, spec engine.ProbeSpec) *engine.Probe {
	t.Helper()
	p, err := c.StartProbe(testCtx(t), spec)
	if err != nil {
		t.Fatalf("StartProbe: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.RemoveProbe(ctx, p) // idempotent; the test may have removed it
	})
	return p
}

func execOK(t *testing.T, c *Client, p *engine.Probe, argv ...string) engine.ExecResult {
	t.Helper()
	res, err := c.Exec(testCtx(t), p, argv)
	if err != nil {
		t.Fatalf("Exec %v: %v", argv, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("Exec %v: exit code %d, stdout %q, stderr %q", argv, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res
}

// countFio counts the fio processes in the probe, waiting up to 10 s for the
// count to satisfy ok (a killed fio is a zombie until it is reaped).
func countFio(t *testing.T, c *Client, p *engine.Probe, ok func(int) bool) int {
	t.Helper()
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; {
		res := execOK(t, c, p, engine.ContainerHelper, "probe-helper", "count-fio")
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err != nil {
			t.Fatalf("count-fio printed %q", res.Stdout)
		}
		if ok(n) || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOverlay2Engine runs the whole engine API against a private overlay2
// daemon whose data root is a directory on the root file system (ext4).
// The probe image is imported once and used by every step.
//
// It ends with a crash (SIGKILL of dockerd with a probe running) and then
// checks that the daemon's cleanup left no process, mount or directory.
func TestOverlay2Engine(t *testing.T) {
	testharness.RequireFio(t)
	var dir string
	var ids []string
	t.Run("daemon", func(t *testing.T) {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		dir = d.Dir
		ids = overlay2Steps(t, d)
	})
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("daemon dir %s left after cleanup (%v)", dir, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), dir) {
		t.Errorf("mounts under %s left after cleanup", dir)
	}
	if pids := processesOf(dir, ids); len(pids) > 0 {
		t.Errorf("processes of the daemon or its containers left after cleanup: %v", pids)
	}
}

// processesOf lists live processes whose command line names dir or whose
// cgroup names one of the container IDs. Zombies (killed, not yet reaped by
// init) hold nothing and are not listed.
func processesOf(dir string, ids []string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		cg, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		hit := bytes.Contains(cmd, []byte(dir+"/"))
		for _, id := range ids {
			hit = hit || bytes.Contains(cg, []byte(id))
		}
		if hit {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// overlay2Steps runs the engine API steps against d and returns the IDs of
// the containers still running when it crashed the daemon.
func overlay2Steps(t *testing.T, d *testdaemon.Daemon) []string {
	c := newTestClient(t, d.Host)
	ctx := testCtx(t)

	t.Run("Info", func(t *testing.T) {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Driver != "overlay2" || info.DriverClass != engine.DriverSupported || info.BackingFS != "extfs" ||
			info.DataRoot != d.DataRoot || info.ImageStore != "graphdriver" || info.Rootless ||
			info.Endpoint != d.Host || info.Name != "test" || info.ServerVersion == "" || info.APIVersion == "" {
			t.Errorf("Info() = %+v", info)
		}
		if fs, err := hostfs.FSName(d.DataRoot); err != nil || fs != "extfs" {
			t.Errorf("hostfs.FSName(%s) = %q, %v; want extfs", d.DataRoot, fs, err)
		}
	})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	im, err := probeimage.Build(testharness.HostFio, self)
	if err != nil {
		t.Fatalf("probeimage.Build: %v", err)
	}
	ref, err := c.EnsureImage(ctx, im, "lp-owner-image")
	if err != nil {
		t.Fatalf("EnsureImage: %v", err)
	}

	t.Run("EnsureImage", func(t *testing.T) {
		if want := "layerprobe-probe:" + im.Digest[:12]; ref != want {
			t.Errorf("ref = %q, want %q", ref, want)
		}
		first, err := c.api.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		labels := first.Config.Labels
		if labels[engine.LabelManaged] != "true" || labels[engine.LabelRole] != "image" || labels[engine.LabelDigest] != im.Digest || labels[engine.LabelOwner] != "lp-owner-image" {
			t.Errorf("image labels = %v", labels)
		}
		if want := []string{engine.ContainerHelper, "probe-helper", "idle"}; !slices.Equal(first.Config.Entrypoint, want) {
			t.Errorf("image entrypoint = %v, want %v", first.Config.Entrypoint, want)
		}

		// Second call: reused, not imported again (an import makes a new ID).
		again, err := c.EnsureImage(ctx, im, "lp-other-owner")
		if err != nil || again != ref {
			t.Fatalf("second EnsureImage = %q, %v; want %q", again, err, ref)
		}
		_, _, imgs := labelled(t, c)
		if len(imgs) != 1 || imgs[0] != first.ID {
			t.Errorf("images after the second EnsureImage = %v, want only %s", imgs, first.ID)
		}

		// Tag removed (the image survives under another tag): retagged.
		if _, err := c.api.ImageTag(ctx, client.ImageTagOptions{Source: ref, Target: "elsewhere:kept"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.api.ImageRemove(ctx, ref, client.ImageRemoveOptions{}); err != nil {
			t.Fatal(err)
		}
		again, err = c.EnsureImage(ctx, im, "lp-owner-image")
		if err != nil || again != ref {
			t.Fatalf("EnsureImage after untag = %q, %v; want %q", again, err, ref)
		}
		got, err := c.api.ImageInspect(ctx, ref)
		if err != nil || got.ID != first.ID {
			t.Errorf("after retag %s is %s (%v), want %s", ref, got.ID, err, first.ID)
		}
		if _, err := c.api.ImageRemove(ctx, "elsewhere:kept", client.ImageRemoveOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CheckImage", func(t *testing.T) {
		if err := c.CheckImage(ctx, ref); err != nil {
			t.Errorf("CheckImage(%s) = %v", ref, err)
		}
		err := c.CheckImage(ctx, "layerprobe-probe:doesnotexist")
		if !errors.Is(err, engine.ErrImageNotFound) || !strings.Contains(err.Error(), "never pulls") {
			t.Errorf("CheckImage(missing) = %v, want ErrImageNotFound saying it never pulls", err)
		}
	})

	t.Run("Containers", func(t *testing.T) {
		// The probe is layerprobe's own: left out of the list.
		startProbe(t, c, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "lp-owner-list", Mode: "steady"})
		bind := t.TempDir()
		created, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: "user-app",
			// The probe image's labels would make it one of layerprobe's.
			Config: &container.Config{Image: ref, Env: []string{"PGDATA=/srv/pg", "SECRET=hunter2"}, Labels: map[string]string{engine.LabelManaged: "no"}},
			HostConfig: &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
				{Type: mount.TypeVolume, Source: "user-vol", Target: "/data"},
				{Type: mount.TypeBind, Source: bind, Target: "/conf", ReadOnly: true},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = c.api.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
			_, _ = c.api.VolumeRemove(context.Background(), "user-vol", client.VolumeRemoveOptions{Force: true})
		})
		if _, err := c.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		execOK(t, c, &engine.Probe{ContainerID: created.ID, Name: "user-app"}, engine.ContainerHelper, "probe-helper", "write", engine.ContainerLayer+"/x", "12345")

		cs, err := c.Containers(ctx, []string{"PGDATA"})
		if err != nil {
			t.Fatalf("Containers: %v", err)
		}
		if len(cs) != 1 {
			t.Fatalf("Containers = %+v, want only user-app", cs)
		}
		u := cs[0]
		if u.ID != created.ID || u.Name != "user-app" || u.Image != ref || u.Driver != "overlay2" || u.Pid <= 0 ||
			time.Since(u.StartedAt) > time.Minute || len(u.Env) != 1 || u.Env["PGDATA"] != "/srv/pg" ||
			!strings.HasPrefix(u.UpperDir, d.DataRoot+"/overlay2/") {
			t.Errorf("user-app = %+v", u)
		}
		if b, err := os.ReadFile(filepath.Join(u.UpperDir, engine.ContainerLayer, "x")); err != nil || string(b) != "12345" {
			t.Errorf("the upper directory does not hold what the container wrote: %q, %v", b, err)
		}
		wantMounts := map[string]engine.Mount{
			"/data": {Type: "volume", Name: "user-vol", Source: d.DataRoot + "/volumes/user-vol/_data", Destination: "/data", Driver: "local", RW: true},
			"/conf": {Type: "bind", Source: bind, Destination: "/conf", RW: false},
		}
		for _, m := range u.Mounts {
			if m != wantMounts[m.Destination] {
				t.Errorf("mount %+v, want %+v", m, wantMounts[m.Destination])
			}
		}
		if len(u.Mounts) != 2 {
			t.Errorf("mounts %+v", u.Mounts)
		}
		if n, err := c.ContainerLayerSize(ctx, created.ID); err != nil || n < 5 {
			t.Errorf("ContainerLayerSize = %d, %v; want at least the 5 bytes written", n, err)
		}
		if _, err := c.ContainerLayerSize(ctx, "no-such-container"); err == nil {
			t.Errorf("ContainerLayerSize of a missing container: nil error")
		}
	})

	t.Run("Probe", func(t *testing.T) {
		bind := t.TempDir()
		p := startProbe(t, c, engine.ProbeSpec{
			Engine: "test", Image: ref, BindSource: bind, Owner: "lp-owner-probe", Mode: "steady",
			Labels: map[string]string{"io.layerprobe.test": "yes", engine.LabelOwner: "spoofed"},
		})
		if !strings.HasPrefix(p.Name, "layerprobe-probe-") || len(p.Name) != len("layerprobe-probe-")+8 || p.VolumeName != p.Name {
			t.Errorf("probe name %q, volume %q", p.Name, p.VolumeName)
		}

		ins, err := c.api.ContainerInspect(ctx, p.ContainerID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ct := ins.Container
		if !ct.State.Running {
			t.Errorf("probe not running: %+v", ct.State)
		}
		wantLabels := map[string]string{engine.LabelManaged: "true", engine.LabelRole: "probe", engine.LabelOwner: "lp-owner-probe",
			engine.LabelEngine: "test", engine.LabelMode: "steady", "io.layerprobe.test": "yes"}
		for k, v := range wantLabels {
			if ct.Config.Labels[k] != v {
				t.Errorf("container label %s = %q, want %q", k, ct.Config.Labels[k], v)
			}
		}
		hc := ct.HostConfig
		if hc.NetworkMode != "none" || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
			!slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || hc.PidsLimit == nil || *hc.PidsLimit != 64 ||
			hc.Memory != 512<<20 || hc.AutoRemove || hc.LogConfig.Type != "json-file" || hc.LogConfig.Config["max-size"] == "" ||
			ct.Config.Tty || hc.Privileged {
			t.Errorf("host config: network %q capdrop %v secopt %v pids %v memory %d autoremove %v log %+v tty %v privileged %v",
				hc.NetworkMode, hc.CapDrop, hc.SecurityOpt, hc.PidsLimit, hc.Memory, hc.AutoRemove, hc.LogConfig, ct.Config.Tty, hc.Privileged)
		}
		vol, err := c.api.VolumeInspect(ctx, p.VolumeName, client.VolumeInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vol.Volume.Labels[engine.LabelOwner] != "lp-owner-probe" || vol.Volume.Labels[engine.LabelRole] != "probe" || vol.Volume.Mountpoint != p.VolumeHostPath {
			t.Errorf("volume %+v, probe volume path %q", vol.Volume, p.VolumeHostPath)
		}

		// One fio for both arms: the container's is the host's.
		want, err := exec.Command(testharness.HostFio, "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		res := execOK(t, c, p, engine.ContainerFio, "--version")
		if !bytes.Equal(res.Stdout, want) {
			t.Errorf("fio --version in the probe = %q, host %q", res.Stdout, want)
		}

		// A failing command is a result: exit code, split output, no error.
		res, err = c.Exec(ctx, p, []string{engine.ContainerHelper, "probe-helper", "exit", "3"})
		if err != nil || res.ExitCode != 3 || string(res.Stdout) != "to stdout" || string(res.Stderr) != "to stderr" {
			t.Errorf("Exec exit 3 = %+v (stdout %q stderr %q), %v; want exit code 3 and nil error", res, res.Stdout, res.Stderr, err)
		}
		res, err = c.Exec(ctx, p, []string{"/lp/bin/no-such-binary"})
		if err != nil || res.ExitCode == 0 {
			t.Errorf("Exec of a missing binary = exit %d, %v; want a non-zero exit code and nil error", res.ExitCode, err)
		}

		// The three targets land where the probe says.
		execOK(t, c, p, engine.ContainerHelper, "probe-helper", "write", engine.ContainerBind+"/b", "bind")
		execOK(t, c, p, engine.ContainerHelper, "probe-helper", "write", engine.ContainerVolume+"/v", "volume")
		execOK(t, c, p, engine.ContainerHelper, "probe-helper", "write", engine.ContainerLayer+"/l", "layer")
		for file, content := range map[string]string{
			filepath.Join(bind, "b"):                              "bind",
			filepath.Join(p.VolumeHostPath, "v"):                  "volume",
			filepath.Join(p.LayerDir, engine.ContainerLayer, "l"): "layer",
		} {
			if b, err := os.ReadFile(file); err != nil || string(b) != content {
				t.Errorf("host file %s = %q, %v; want %q", file, b, err, content)
			}
		}
		if !strings.HasPrefix(p.LayerDir, d.DataRoot+"/overlay2/") {
			t.Errorf("LayerDir = %q, want it under %s/overlay2", p.LayerDir, d.DataRoot)
		}

		// A cancelled exec kills its fio.
		execCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(execCtx, p, []string{engine.ContainerFio, "--name=spin", "--filename=" + engine.ContainerLayer + "/spin",
				"--size=1m", "--rw=write", "--bs=4k", "--ioengine=psync", "--time_based", "--runtime=600", "--eta=never"})
			done <- err
		}()
		if n := countFio(t, c, p, func(n int) bool { return n > 0 }); n == 0 {
			cancel()
			t.Fatalf("fio did not start in the probe")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Exec = %v, want an error wrapping context.Canceled", err)
		}
		if n := countFio(t, c, p, func(n int) bool { return n == 0 }); n != 0 {
			t.Errorf("%d fio processes left in the probe after a cancelled Exec", n)
		}

		if err := c.RemoveProbe(ctx, p); err != nil {
			t.Fatalf("RemoveProbe: %v", err)
		}
		if err := c.RemoveProbe(ctx, p); err != nil {
			t.Errorf("second RemoveProbe: %v, want nil (idempotent)", err)
		}
		if _, err := c.Exec(ctx, p, []string{engine.ContainerFio, "--version"}); err == nil || errors.Is(err, engine.ErrUnreachable) {
			t.Errorf("Exec in a removed probe = %v, want an error that is not ErrUnreachable", err)
		}
		ctrs, vols, _ := labelled(t, c)
		if len(ctrs)+len(vols) != 0 {
			t.Errorf("after RemoveProbe: containers %v, volumes %v", ctrs, vols)
		}
	})

	t.Run("Sweep", func(t *testing.T) {
		dev, err := hostfs.DeviceOf(d.DataRoot)
		if err != nil {
			t.Fatal(err)
		}
		alive := startProbe(t, c, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "owner-alive",
			Mode: "steady", DeviceWriteIOPS: 1000, DevicePath: dev})
		dead := startProbe(t, c, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "owner-dead", Mode: "cold"})

		ins, err := c.api.ContainerInspect(ctx, alive.ContainerID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if th := ins.Container.HostConfig.BlkioDeviceWriteIOps; len(th) != 1 || th[0].Path != dev || th[0].Rate != 1000 {
			t.Errorf("BlkioDeviceWriteIOps = %v, want %s:1000", th, dev)
		}

		isAlive := func(owner string) bool { return owner == "owner-alive" }
		rep, err := c.Sweep(ctx, isAlive, true)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if !slices.Equal(rep.Containers, []string{dead.Name}) || !slices.Equal(rep.Volumes, []string{dead.VolumeName}) || len(rep.Images) != 0 {
			t.Errorf("Sweep(alive) = %+v, want only %s and its volume (the image is in use)", rep, dead.Name)
		}
		ctrs, vols, imgs := labelled(t, c)
		if !slices.Equal(ctrs, []string{alive.Name}) || !slices.Equal(vols, []string{alive.VolumeName}) || len(imgs) != 1 {
			t.Errorf("left after Sweep(alive): containers %v volumes %v images %v", ctrs, vols, imgs)
		}
		execOK(t, c, alive, engine.ContainerFio, "--version")

		// SweepStale also removes a live owner's probe of the same engine
		// (a session the owner could not close while the engine was down),
		// and keeps its probe of another engine.
		other := startProbe(t, c, engine.ProbeSpec{Engine: "other", Image: ref, BindSource: t.TempDir(), Owner: "owner-alive", Mode: "steady"})
		rep, err = c.SweepStale(ctx, isAlive, "owner-alive", "test")
		if err != nil || !slices.Equal(rep.Containers, []string{alive.Name}) || !slices.Equal(rep.Volumes, []string{alive.VolumeName}) || len(rep.Images) != 0 {
			t.Errorf("SweepStale = %+v, %v; want only %s and its volume", rep, err, alive.Name)
		}
		ctrs, vols, _ = labelled(t, c)
		if !slices.Equal(ctrs, []string{other.Name}) || !slices.Equal(vols, []string{other.VolumeName}) {
			t.Errorf("left after SweepStale: containers %v volumes %v; want %s", ctrs, vols, other.Name)
		}

		rep, err = c.Sweep(ctx, nil, false)
		if err != nil || len(rep.Containers) != 1 || len(rep.Volumes) != 1 || len(rep.Images) != 0 {
			t.Errorf("Sweep(nil, images=false) = %+v, %v; want the last probe and its volume", rep, err)
		}
		rep, err = c.Sweep(ctx, nil, true)
		if err != nil || len(rep.Containers)+len(rep.Volumes) != 0 || !slices.Equal(rep.Images, []string{ref}) {
			t.Errorf("Sweep(nil, images=true) = %+v, %v; want the image %s", rep, err, ref)
		}
		if ctrs, vols, imgs := labelled(t, c); len(ctrs)+len(vols)+len(imgs) != 0 {
			t.Errorf("left after the full sweep: containers %v volumes %v images %v", ctrs, vols, imgs)
		}
		rep, err = c.Sweep(ctx, nil, true)
		if err != nil || len(rep.Containers)+len(rep.Volumes)+len(rep.Images) != 0 {
			t.Errorf("repeated Sweep = %+v, %v; want nothing and no error", rep, err)
		}
	})

	// Crash: dockerd dies, the probe's shim and process live on (the
	// daemon's cleanup must get rid of them).
	var crashed []string
	t.Run("EngineDown", func(t *testing.T) {
		// The sweep removed the image: this imports it again.
		ref, err := c.EnsureImage(ctx, im, "lp-crash")
		if err != nil {
			t.Fatalf("EnsureImage after the sweep: %v", err)
		}
		p := startProbe(t, c, engine.ProbeSpec{Engine: "test", Image: ref, BindSource: t.TempDir(), Owner: "lp-crash", Mode: "steady"})
		crashed = append(crashed, p.ContainerID)
		d.Kill()
		_, err = c.Info(ctx)
		if !errors.Is(err, engine.ErrUnreachable) || !strings.Contains(err.Error(), d.Host) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Info on a dead daemon = %v, want a one-line ErrUnreachable naming %s", err, d.Host)
		}
		_, err = c.Exec(ctx, p, []string{engine.ContainerFio, "--version"})
		if !errors.Is(err, engine.ErrUnreachable) {
			t.Errorf("Exec on a dead daemon = %v, want ErrUnreachable", err)
		}
		if pids := processesOf(d.Dir, crashed); len(pids) == 0 {
			t.Errorf("no shim or container process survived the crash; the cleanup check below proves nothing")
		}
	})
	return crashed
}

// TestBtrfsEngine: btrfs driver on a btrfs loop file system.
func TestBtrfsEngine(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "btrfs", Backing: "btrfs", SizeMiB: 1024})
	c := newTestClient(t, d.Host)
	info, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "btrfs" || info.BackingFS != "btrfs" || info.DriverClass != engine.DriverSupported || info.DataRoot != d.DataRoot {
		t.Errorf("Info() = %+v, want driver and backing btrfs", info)
	}
	if fs, err := hostfs.FSName(d.DataRoot); err != nil || fs != "btrfs" {
		t.Errorf("hostfs.FSName(%s) = %q, %v; want btrfs", d.DataRoot, fs, err)
	}
	// btrfs reports an anonymous device number: DeviceOf must find the
	// loop device through the mount table.
	if dev, err := hostfs.DeviceOf(d.DataRoot); err != nil || dev != d.LoopDevice() {
		t.Errorf("hostfs.DeviceOf(%s) = %q, %v; want %s", d.DataRoot, dev, err, d.LoopDevice())
	}
}

// TestVFSEngine: vfs reports no DriverStatus, so the backing file system
// comes from statfs of the data root (ext4 here).
func TestVFSEngine(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "vfs"})
	c := newTestClient(t, d.Host)
	info, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	want, err := hostfs.FSName(d.DataRoot)
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "vfs" || info.BackingFS != want || want != "extfs" || info.DriverClass != engine.DriverSupported {
		t.Errorf("Info() = %+v, want driver vfs on extfs", info)
	}
}
