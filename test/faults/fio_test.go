package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// fioConfig is baseConfig with fio.binary set.
func fioConfig(binary string) string {
	return baseConfig + fmt.Sprintf("fio:\n  binary: %s\n", binary)
}

// checkFailedJobs asserts that every fio sample of the cycle failed with
// reason, that all targets ran (a failed job does not stop the others) and,
// with helper, that the smallfiles helper measured on every target.
func checkFailedJobs(t *testing.T, a *agentProc, c apiCycle, reason string, mention string, helper bool) {
	t.Helper()
	ss := a.samples(t, c.ID)
	targets := map[string]int{}
	helperJobs := 0
	for _, s := range ss {
		targets[s.Target]++
		if s.Workload == "smallfiles" {
			// The helper runs it, not fio: fio's fault leaves it alone.
			helperJobs++
			if s.Error != nil {
				t.Errorf("%s/smallfiles: %+v; want it measured (the helper does not run fio)", s.Target, s.Error)
			}
			continue
		}
		if s.Error == nil || s.Error.Reason != reason || !strings.Contains(s.Error.Message, mention) {
			t.Errorf("%s/%s: %+v; want reason %s mentioning %q", s.Target, s.Workload, s.Error, reason, mention)
			continue
		}
		if targets[s.Target] == 1 {
			t.Logf("%s/%s: %s: %s", s.Target, s.Workload, s.Error.Reason, s.Error.Message)
		}
	}
	wantHelper := 0
	if helper {
		wantHelper = 4
	}
	if len(ss) != 12+wantHelper || helperJobs != wantHelper || len(targets) != 4 {
		t.Errorf("%d samples (%d smallfiles) over targets %v; want 3 fio jobs and %d smallfiles on each of 4 targets", len(ss), helperJobs, targets, wantHelper/4)
	}
}

// fio is missing, crashes, or hangs past its job timeout. Each is a
// recorded result: the agent keeps serving, removes the job's files, leaves
// no process behind, and keeps its probe container when fio's failure is
// not the container's.
func TestFioFaults(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)

	// fio.binary names a file that does not exist. The probe image is
	// built from the host's fio, so the engine cannot be measured at all:
	// the cycle fails as fio_missing before anything is created, and the
	// agent serves on.
	t.Run("missing", func(t *testing.T) {
		const missing = "/nonexistent/layerprobe-test/fio"
		s := newAgentSetup(t, d.Host, fioConfig(missing))
		a := s.start(t)
		a.trigger(t, 30*time.Second)
		c := a.newCycle(t, 0, time.Minute)
		if c.Result != "failed" || c.Reason != "fio_missing" || !strings.Contains(c.Message, "fio not found ("+missing+")") {
			t.Errorf("cycle without fio: %+v; want failed, fio_missing, naming %s", c, missing)
		}
		t.Logf("cycle without fio: %s/%s: %s", c.Result, c.Reason, c.Message)
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/v1/overhead", "/api/v1/engines"} {
			if code, b := a.get(t, path); code != 200 {
				t.Errorf("GET %s without fio: %d %s", path, code, b)
			}
		}
		checkClean(t, docker, d.DataRoot, 0)
		if o := scratchOwners(d.DataRoot); len(o) > 0 {
			t.Errorf("scratch left: %v", o)
		}
		if code := a.stop(t); code != 0 {
			t.Errorf("SIGTERM: exit %d", code)
		}
	})

	// fio dies from SIGSEGV on every target after writing a file: every
	// job is recorded as crashed, the files are removed, the probe
	// container (which is fine) is kept for the next cycle.
	t.Run("crash", func(t *testing.T) {
		s := newAgentSetup(t, d.Host, fioConfig(fakeFio(t, "crash")))
		a := s.start(t)
		a.trigger(t, 30*time.Second)
		c := a.newCycle(t, 0, time.Minute)
		if c.Result != "failed" || c.Reason != "fio_failures" || c.Message != "failed fio jobs: crashed x12" {
			t.Errorf("cycle with a crashing fio: %+v; want failed, fio_failures, crashed x12", c)
		}
		t.Logf("cycle with a crashing fio: %s/%s: %s", c.Result, c.Reason, c.Message)
		checkFailedJobs(t, a, c, "crashed", "fio died", true)
		checkClean(t, docker, d.DataRoot, 1)
		if code, b := a.get(t, "/healthz"); code != 200 {
			t.Errorf("/healthz: %d %s", code, b)
		}
		if code := a.stop(t); code != 0 {
			t.Errorf("SIGTERM: exit %d", code)
		}
		checkClean(t, docker, d.DataRoot, 0)
	})

	// fio hangs after writing a file; the job timeout (1 s here through
	// the test-only LAYERPROBE_TEST_JOB_TIMEOUT; the profiles' own are
	// minutes) stops it on the host and in the container, every job is
	// recorded as timeout, its files are removed and no fio is left. The
	// cycle runs fio's workloads alone: the 1 s timeout would also stop the
	// smallfiles helper on a busy machine (the crash case shows that fio's
	// fault leaves the helper alone).
	t.Run("hang", func(t *testing.T) {
		cfg := fioConfig(fakeFio(t, "hang")) + "workloads: [seqwrite, randwrite, fsync]\n"
		s := newAgentSetup(t, d.Host, cfg)
		a := s.start(t, "LAYERPROBE_TEST_JOB_TIMEOUT=1s")
		a.trigger(t, 30*time.Second)
		start := time.Now()
		// The hung fio has written its file: the timeout must remove it.
		testharness.WaitFor(t, time.Minute, "the hung fio has written a file", func() bool { return len(jobFiles(d.DataRoot)) > 0 })
		c := a.newCycle(t, 0, 2*time.Minute)
		if c.Result != "failed" || c.Reason != "fio_failures" || c.Message != "failed fio jobs: timeout x12" {
			t.Errorf("cycle with a hanging fio: %+v; want failed, fio_failures, timeout x12", c)
		}
		t.Logf("cycle with a hanging fio: %s/%s: %s (%.1f s)", c.Result, c.Reason, c.Message, time.Since(start).Seconds())
		checkFailedJobs(t, a, c, "timeout", "deadline exceeded", false)
		checkClean(t, docker, d.DataRoot, 1)
		if code := a.stop(t); code != 0 {
			t.Errorf("SIGTERM: exit %d", code)
		}
		checkClean(t, docker, d.DataRoot, 0)
	})
}

// The probe container is removed by someone else (docker rm -f) while fio
// runs in it. The jobs on the container's targets fail, the host target
// goes on, the cycle is recorded as failed; the next cycle builds a new
// probe container and succeeds, and nothing of the old one remains.
func TestProbeRemovedMidCycle(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)
	s := newAgentSetup(t, d.Host, baseConfig)
	a := s.start(t)
	a.trigger(t, 30*time.Second)
	running := a.runningCycle(t, time.Minute)
	waitFioJob(t, d.DataRoot, true, time.Minute)
	old := docker.labelled(t)
	if len(old.Containers) != 1 {
		t.Fatalf("want one probe container, got %s", old)
	}
	docker.do(t, "DELETE", "/containers/"+old.Containers[0].ID+"?force=1", nil)

	c := a.newCycle(t, running.ID-1, 2*time.Minute)
	if c.Result != "failed" || c.Reason != "fio_failures" {
		t.Errorf("cycle whose probe was removed: %+v; want failed, fio_failures", c)
	}
	t.Logf("cycle whose probe was removed: %s/%s: %s", c.Result, c.Reason, c.Message)
	hostOK := 0
	for _, sm := range a.samples(t, c.ID) {
		if sm.Target == "host" && sm.Error == nil {
			hostOK++
		}
	}
	if hostOK != 4 {
		t.Errorf("%d host jobs succeeded in the cycle whose probe was removed, want 4 (3 fio jobs and smallfiles)", hostOK)
	}
	a.trigger(t, 30*time.Second)
	if next := a.newCycle(t, c.ID, 2*time.Minute); next.Result != "ok" {
		t.Errorf("cycle after the probe was removed: %+v; want ok", next)
	}
	now := docker.labelled(t)
	for _, v := range now.Volumes {
		if v == old.Volumes[0] {
			t.Errorf("the removed probe's volume %s is still there", v)
		}
	}
	if len(now.Containers) != 1 || now.Containers[0].ID == old.Containers[0].ID {
		t.Errorf("after the next cycle: %s; want one new probe container", now)
	}
	checkClean(t, docker, d.DataRoot, 1)
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
	checkClean(t, docker, d.DataRoot, 0)
}
