package faults

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// waitFioJob waits, polling every 2 ms (smoke jobs are short), until a fio
// job runs in a probe container (inContainer) or anywhere.
func waitFioJob(t *testing.T, dataRoot string, inContainer bool, timeout time.Duration) fioProc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, p := range fioJobsRunning(dataRoot) {
			if !inContainer || strings.Contains(strings.Join(p.args, " "), "--directory=/lp/") {
				return p
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no fio job ran within %s", timeout)
	return fioProc{}
}

// The Docker daemon is killed (SIGKILL, as a crash) while fio runs in the
// probe container. The agent records the cycle as failed with its reason,
// keeps serving /metrics and the API while the daemon is down, records a
// cycle tried meanwhile as unreachable, reconnects once the daemon is back,
// and the next cycle succeeds; the probe container of before the crash is
// gone and nothing else is left behind.
func TestDaemonKilledMidCycle(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)
	s := newAgentSetup(t, d.Host, strings.Replace(baseConfig, "rounds_per_cycle: 1", "rounds_per_cycle: 2", 1))
	a := s.start(t)

	a.trigger(t, 30*time.Second)
	running := a.runningCycle(t, time.Minute)
	p := waitFioJob(t, d.DataRoot, true, 2*time.Minute)
	before := docker.labelled(t)
	if len(before.Containers) != 1 {
		t.Fatalf("want one probe container before the crash, got %s", before)
	}
	d.Kill()
	t.Logf("dockerd killed while fio ran in the probe (pid %d, %s)", p.pid, p.args[3])

	failed := a.newCycle(t, running.ID-1, 2*time.Minute) // the running one
	if failed.ID != running.ID || failed.Result != "failed" || failed.Reason != "fio_failures" ||
		!strings.Contains(failed.Message, "exec_error") {
		t.Errorf("cycle during the crash: %+v; want #%d failed, fio_failures with exec_error", failed, running.ID)
	}
	t.Logf("cycle during the crash: %s/%s: %s", failed.Result, failed.Reason, failed.Message)

	// While the daemon is down the agent serves everything it has.
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/v1/overhead", "/api/v1/engines",
		"/api/v1/cycles", "/api/v1/openapi.yaml"} {
		if code, b := a.get(t, path); code != http.StatusOK {
			t.Errorf("GET %s while the daemon is down: %d %s", path, code, b)
		}
	}
	// A cycle tried meanwhile fails at once, naming the socket.
	a.trigger(t, 30*time.Second)
	down := a.newCycle(t, failed.ID, time.Minute)
	sock := strings.TrimPrefix(d.Host, "unix://")
	if down.Result != "failed" || down.Reason != "unreachable" || !strings.Contains(down.Message, sock) {
		t.Errorf("cycle while the daemon is down: %+v; want failed, unreachable, naming %s", down, sock)
	}
	t.Logf("cycle while the daemon is down: %s/%s: %s", down.Result, down.Reason, down.Message)
	var engines struct {
		Engines []struct {
			Reachable bool     `json:"reachable"`
			Warnings  []string `json:"warnings"`
		} `json:"engines"`
	}
	a.getJSON(t, "/api/v1/engines", &engines)
	if len(engines.Engines) != 1 || engines.Engines[0].Reachable {
		t.Errorf("/api/v1/engines while the daemon is down: %+v; want reachable false", engines)
	}
	if v, ok := a.metrics(t).Find("layerprobe_cycles_total", map[string]string{"result": "failed"}); !ok || v != 2 {
		t.Errorf("layerprobe_cycles_total{result=failed} = %v (present %v), want 2", v, ok)
	}

	d.Restart()
	a.trigger(t, 30*time.Second)
	ok := a.newCycle(t, down.ID, 2*time.Minute)
	if ok.Result != "ok" {
		t.Fatalf("first cycle after the daemon came back: %+v; want ok", ok)
	}
	a.getJSON(t, "/api/v1/engines", &engines)
	if !engines.Engines[0].Reachable {
		t.Errorf("/api/v1/engines after the restart: %+v; want reachable", engines)
	}
	after := docker.labelled(t)
	for _, c := range after.Containers {
		if c.ID == before.Containers[0].ID {
			t.Errorf("the probe container of before the crash is still there: %s", after)
		}
	}
	checkClean(t, docker, d.DataRoot, 1)

	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
	checkClean(t, docker, d.DataRoot, 0)
	if o := scratchOwners(d.DataRoot); len(o) > 0 {
		t.Errorf("scratch directories left: %v", o)
	}
}
