package e2e

import (
	"archive/tar"
	"bytes"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// An agent started on a busy host does not wait a whole interval for its
// first result: real container churn on the engine trips the churn guard,
// the first scheduled cycle is skipped and counted, and once the host is
// quiet the retry after agent.retry_backoff measures.
func TestAgentRetriesAfterBusyStart(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	// The churn window is much longer than the agent needs to start and
	// reach its first cycle (about 5 s), and the backoff is longer than
	// the window, so the first cycle always sees the churn and the retry
	// never does, however slow the machine is.
	const quiet, backoff = 40 * time.Second, 45 * time.Second
	// One target, one job: the retry's timing and the fsync ratio it
	// publishes are what the test reads.
	cfg := strings.Replace(agentConfig, "churn_quiet_period: 0s", "churn_quiet_period: 40s\n  retry_backoff: 45s", 1) +
		"\nworkloads: [fsync]\ntargets: [container]"
	s := newAgentSetup(t, d.Host, cfg)

	churned := churnContainer(t, d.Host)
	a := s.start(t)
	cs := a.waitCycles(t, "skipped", 1, quiet)
	skip := cs[len(cs)-1]
	if skip.Reason != "container_churn" || skip.Trigger != "schedule" {
		t.Fatalf("first cycle: %s %s trigger %s, want skipped container_churn by the schedule", skip.Result, skip.Reason, skip.Trigger)
	}
	if skip.StartedAt.Sub(churned) > quiet {
		t.Fatalf("the first cycle started %s after the churn, beyond the %s window", skip.StartedAt.Sub(churned), quiet)
	}

	// The interval is an hour: only the retry can measure within minutes.
	cs = a.waitCycles(t, "ok", 1, backoff+3*time.Minute)
	var ok *apiCycle
	for i := range cs {
		if cs[i].Result == "ok" {
			ok = &cs[i]
		}
	}
	if ok.Trigger != "retry" {
		t.Errorf("the measured cycle's trigger is %q, want retry", ok.Trigger)
	}
	if wait := ok.StartedAt.Sub(skip.FinishedAt); wait < backoff-time.Second || wait > backoff+30*time.Second {
		t.Errorf("the retry started %s after the skipped cycle, want the backoff (%s)", wait, backoff)
	}
	t.Logf("first result %s after the agent's first cycle was skipped", ok.FinishedAt.Sub(skip.StartedAt).Round(time.Second))

	_, series := a.scrape(t)
	for name, l := range map[string]map[string]string{
		"layerprobe_cycles_total":      {"result": "skipped"},
		"layerprobe_cycle_skips_total": {"reason": "container_churn"},
	} {
		if v, found := series.Find(name, l); !found || v < 1 {
			t.Errorf("%s%v = %v (present %v), want at least 1", name, l, v, found)
		}
	}
	if v, found := series.Find("layerprobe_overhead_ratio", map[string]string{"target": "container", "workload": "fsync", "metric": "fsync_p99"}); !found || v != v {
		t.Errorf("no fsync overhead published after the retry (%v, present %v)", v, found)
	}
	a.stop()
}

// churnContainer creates and removes a container that is not layerprobe's
// on the daemon at host, from an image of one file imported for it: the
// removal is a container event the churn guard counts. It returns when the
// container was removed.
func churnContainer(t *testing.T, host string) time.Time {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(t, tw.WriteHeader(&tar.Header{Name: "churn", Mode: 0o755, Size: 1}))
	_, err := tw.Write([]byte("x"))
	must(t, err)
	must(t, tw.Close())
	docker := newAPI(host)
	docker.Send(t, "POST", "/images/create?fromSrc=-&repo=lp-churn&tag=1", "application/x-tar", &buf, nil)
	var created struct {
		ID string `json:"Id"`
	}
	docker.Send(t, "POST", "/containers/create", "application/json",
		strings.NewReader(`{"Image":"lp-churn:1","Cmd":["/churn"]}`), &created)
	docker.Do(t, "DELETE", "/containers/"+url.PathEscape(created.ID)+"?force=1", nil)
	return time.Now()
}
