package e2e

import (
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
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
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
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
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
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	// fsync alone: the container's and bind's fsync ratios are the
	// measurements the test reads.
	s := newAgentSetup(t, "", agentConfig+fmt.Sprintf(`
workloads: [fsync]
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

func isNotExist(_ os.FileInfo, err error) bool { return os.IsNotExist(err) }
