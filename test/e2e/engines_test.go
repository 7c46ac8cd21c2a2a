package e2e

import (
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// TestMoreEngines runs layerprobe on the engines beyond dockerd's overlay2,
// btrfs and vfs: Podman (rootful, its Docker-compatible API, its overlay
// driver, its default container limits above the service's hard open-file
// limit, as on a constrained host), dockerd with fuse-overlayfs, and overlay2 on xfs with reflink.
// On each: a run (6 rounds, as TestRunOnPrivateEngines) whose every target
// works and that reports the engine as it is; a run killed with SIGKILL,
// then `layerprobe cleanup`. On Podman also an agent cycle (the smoke
// profile): its API serves the agent's event stream and image store
// differently, where fuse-overlayfs and xfs change nothing the agent does
// beyond what the run checks (their engine labels come from the same
// engine facts). None may leave anything behind.
func TestMoreEngines(t *testing.T) {
	t.Parallel() // only starts its drivers' subtests, which queue (a place held here would idle while they wait)
	hostFio := hostFioVersion(t)
	for _, c := range []struct {
		name                     string
		opts                     testdaemon.Options
		runtime, driver, backing string
		agent                    bool // run an agent cycle too
	}{
		// Podman with its own default container limits, under a hard
		// open-file limit below them: the probe must set its own.
		{"podman-overlay", testdaemon.Options{Engine: testdaemon.EnginePodman, EngineLimits: true}, "podman", "overlay", "extfs", true},
		{"fuse-overlayfs", testdaemon.Options{Driver: "fuse-overlayfs"}, "docker", "fuse-overlayfs", "extfs", false},
		{"overlay2-xfs", testdaemon.Options{Driver: "overlay2", Backing: "xfs", SizeMiB: 2048}, "docker", "overlay2", "xfs", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			queue.Parallel(t)
			d := testdaemon.Start(t, c.opts)

			t.Run("run", func(t *testing.T) {
				run := runChecked(t, d, c.driver, c.backing, hostFio)
				e := run.Engines[0]
				if e.Runtime != c.runtime || e.DriverClass != "supported" || e.DataRoot != d.DataRoot || e.Rootless {
					t.Errorf("engine: runtime %q, driver class %q, data root %q, rootless %v; want %s, supported, %s, rootful",
						e.Runtime, e.DriverClass, e.DataRoot, e.Rootless, c.runtime, d.DataRoot)
				}
				t.Logf("%s: %.0f s, %d MiB written", c.name, run.DurationSeconds, run.BytesWritten>>20)
				checkNothingLeft(t, d)
			})

			t.Run("killed run and cleanup", func(t *testing.T) { checkKilledRunThenCleanup(t, d) })

			if !c.agent {
				return
			}
			t.Run("agent cycle", func(t *testing.T) {
				// The engine's labels and the volume's fsync ratio are
				// what the cycle must give; the runs above measured
				// every job on every target.
				s := newAgentSetup(t, d.Host, agentConfig+"\nworkloads: [fsync]\ntargets: [volume]")
				a := s.start(t)
				a.waitCycles(t, "ok", 1, 5*time.Minute)
				_, series := a.scrape(t)
				info := map[string]string{"runtime": c.runtime, "driver": c.driver, "backing_fs": c.backing, "data_root": d.DataRoot}
				if v, ok := series.Find("layerprobe_engine_info", info); !ok || v != 1 {
					t.Errorf("layerprobe_engine_info%v = %v (present %v); series: %v", info, v, ok, series["layerprobe_engine_info"])
				}
				if v, ok := series.Find("layerprobe_overhead_ratio", map[string]string{"target": "volume", "workload": "fsync", "metric": "fsync_p99"}); !ok || !finite(v) {
					t.Errorf("volume fsync p99 overhead = %v (present %v)", v, ok)
				}
				if code, _ := a.stop(); code != 0 {
					t.Errorf("agent exited %d", code)
				}
				// The agent keeps its probe image for the next cycles;
				// containers and volumes go when it stops.
				if l := newAPI(d.Host).labelled(t); len(l.Containers)+len(l.Volumes) != 0 {
					t.Errorf("left behind after the agent stopped: %+v", l)
				}
				checkNoScratchFiles(t, d.DataRoot)
			})
		})
	}
}
