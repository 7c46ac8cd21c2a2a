package e2e

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/containerd"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// `layerprobe advise` on an engine of type containerd asks that engine,
// with containerd's API: it lists the container running there under the
// engine's name. DOCKER_HOST names a socket nobody listens on, so advice
// from a Docker engine, or an attempt to reach one, cannot pass.
func TestAdviseOnContainerd(t *testing.T) {
	queue.Parallel(t) // its own private engine
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	cc := newCtrd(t, d)
	const app = "app-1"
	runIdleContainer(t, d, cc, app)

	cfg := containerdConfig(t, d, "overlayfs")
	res := layerprobe(t, "unix:///nonexistent/docker.sock", 5*time.Minute, "--config", cfg, "advise", "--output", "json",
		"--state-dir", t.TempDir(), "--log.level", "warn")
	if res.code != 0 {
		t.Fatalf("layerprobe advise exited %d\nstderr:\n%s\nstdout:\n%s", res.code, res.stderr, res.stdout)
	}
	var r api.ContainersResponse
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("decode output: %v\n%s", err, res.stdout)
	}
	if len(r.Engines) != 1 {
		t.Fatalf("advise answered %d engines: %s", len(r.Engines), res.stdout)
	}
	e := r.Engines[0]
	if e.Engine != "node" || e.Error != "" || e.Driver != "overlayfs" {
		t.Errorf("engine %q, driver %q, error %q; want node, overlayfs, none", e.Engine, e.Driver, e.Error)
	}
	var found bool
	for _, c := range e.Containers {
		found = found || c.ID == app
	}
	if !found {
		t.Errorf("the container %s running in containerd is not in the advice: %+v", app, e.Containers)
	}
}

// runIdleContainer starts a container of someone else's (no layerprobe
// label) in d's namespace from the probe image, idling until the test
// ends.
func runIdleContainer(t *testing.T, d *testdaemon.Daemon, cc *ctrd, id string) {
	t.Helper()
	fio, err := exec.LookPath("fio")
	if err != nil {
		testharness.SkipOrFail(t, "fio: %v", err)
	}
	im, err := probeimage.Build(fio, binary)
	if err != nil {
		t.Fatal(err)
	}
	// The image is imported with layerprobe's client; everything else is
	// the test's own.
	lc, err := containerd.New("node", d.Host, ctrdNamespace, "overlayfs", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(cc.ctx, 2*time.Minute)
	defer cancel()
	ref, err := lc.EnsureImage(ctx, im, "lp1-advise-1-1")
	if err != nil {
		t.Fatal(err)
	}
	// containerd's own CLI runs it, with its own default spec. ctr copies
	// the image config's labels onto the container, layerprobe's among
	// them: the container says it is not layerprobe's.
	ctr := func(args ...string) ([]byte, error) {
		return exec.Command("ctr", append([]string{"--address", strings.TrimPrefix(d.Host, "unix://"), "--namespace", ctrdNamespace}, args...)...).CombinedOutput()
	}
	if out, err := ctr("run", "-d", "--snapshotter", "overlayfs", "--label", "io.layerprobe.managed=false", ref, id, engine.ContainerHelper, "probe-helper", "idle"); err != nil {
		t.Fatalf("ctr run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = ctr("task", "kill", "-s", "SIGKILL", id)
		_, _ = ctr("task", "rm", "-f", id)
		_, _ = ctr("container", "rm", id)
	})
}
