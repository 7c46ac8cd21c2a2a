package faults

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/store"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The agent is killed with SIGKILL while fio runs in its probe container
// (the OOM killer, a crash). Before that, a second agent started on the same
// state directory refuses with a clear error and exit 1 without touching the
// store. After the kill, the restarted agent finds the store intact with
// every earlier cycle (the killed one recorded as interrupted), its startup
// sweep removes the dead agent's probe container, volume, scratch
// directory and job files, and scheduled cycles resume by themselves.
func TestAgentKilledMidCycle(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)
	s := newAgentSetup(t, d.Host, baseConfig)
	a := s.start(t)
	a.trigger(t, 30*time.Second)
	first := a.newCycle(t, 0, 2*time.Minute)
	if first.Result != "ok" {
		t.Fatalf("first cycle: %+v", first)
	}
	firstSamples := len(a.samples(t, first.ID))

	a.trigger(t, 30*time.Second)
	killed := a.runningCycle(t, time.Minute)
	waitFioJob(t, d.DataRoot, true, time.Minute)

	// A second agent on the same state directory, while the first one
	// measures: it must stop before touching the database.
	second := s.spawn(t, testharness.MustFreePort(t))
	select {
	case <-second.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a second agent on the same state directory did not exit within 30s")
	}
	code := second.Cmd.ProcessState.ExitCode()
	want := fmt.Sprintf("state directory in use by another layerprobe agent (held by pid %d, lock file %s)",
		a.Cmd.Process.Pid, filepath.Join(s.StateDir, "agent.lock"))
	if code != 1 || !strings.Contains(second.Log.String(), want) {
		t.Errorf("second agent: exit %d, output:\n%s\nwant exit 1 and %q", code, second.Log.String(), want)
	}
	t.Logf("second agent on the same state directory: exit %d: %s", code, strings.TrimSpace(second.Log.String()))
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(second.base, "http://"), time.Second); err == nil {
		conn.Close()
		t.Errorf("the refused agent listens on %s", second.base)
	}
	if c := a.cycles(t)[0]; c.ID != killed.ID || c.Result != "running" {
		t.Errorf("after the second agent's attempt the first agent's cycles are %+v", a.cycles(t))
	}

	// SIGKILL while fio runs in the probe.
	owner := ownerOf(t, docker)
	a.kill(t)
	left := docker.labelled(t)
	if len(left.OwnedBy(owner)) != 1 || len(left.Volumes) != 1 || !slices.Contains(scratchOwners(d.DataRoot), owner) {
		t.Fatalf("after SIGKILL expected the dead agent's probe container, volume and scratch directory; got %s, scratch %v",
			left, scratchOwners(d.DataRoot))
	}
	time.Sleep(200 * time.Millisecond) // the kernel's parent-death signal is immediate, but not synchronous
	for _, p := range fioProcs(filepath.Join(d.DataRoot, "layerprobe-scratch", owner)) {
		t.Errorf("host fio of the killed agent still runs: %+v", p)
	}
	t.Logf("left by the SIGKILL: %s, scratch %v, job files %d", left, scratchOwners(d.DataRoot), len(jobFiles(d.DataRoot)))

	// Restart with the scheduled first cycle a second after start.
	a = s.start(t, "LAYERPROBE_TEST_FIRST_CYCLE_DELAY=1s")
	cs := a.cycles(t)
	if len(cs) != 2 || cs[1].ID != first.ID || cs[1].Result != "ok" || cs[0].ID != killed.ID ||
		cs[0].Result != "interrupted" || cs[0].Reason != "interrupted" {
		t.Errorf("cycles after the restart: %+v; want #%d ok and #%d interrupted", cs, first.ID, killed.ID)
	}
	if n := len(a.samples(t, first.ID)); n != firstSamples || n != 16 {
		t.Errorf("cycle #%d has %d samples after the restart, %d before; want 16 (4 jobs on 4 targets)", first.ID, n, firstSamples)
	}
	resumed := a.newCycle(t, killed.ID, 2*time.Minute)
	if resumed.Result != "ok" || resumed.Trigger != "schedule" {
		t.Errorf("first cycle after the restart: %+v; want a scheduled ok cycle", resumed)
	}
	now := docker.labelled(t)
	if len(now.OwnedBy(owner)) != 0 {
		t.Errorf("the dead agent's probe container survived the sweep: %s", now)
	}
	if slices.Contains(scratchOwners(d.DataRoot), owner) {
		t.Errorf("the dead agent's scratch directory survived the sweep: %v", scratchOwners(d.DataRoot))
	}
	checkClean(t, docker, d.DataRoot, 1)
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
	checkClean(t, docker, d.DataRoot, 0)

	// The store, read directly: intact, every cycle there.
	st, err := store.Open(s.StateDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open the store after the kill and restart: %v", err)
	}
	defer st.Close()
	all, err := st.Cycles(context.Background(), store.Query{})
	must(t, err)
	var got []string
	for _, c := range all {
		got = append(got, fmt.Sprintf("#%d %s", c.ID, c.Result))
	}
	wantCycles := []string{fmt.Sprintf("#%d ok", resumed.ID), fmt.Sprintf("#%d interrupted", killed.ID), fmt.Sprintf("#%d ok", first.ID)}
	if !slices.Equal(got, wantCycles) {
		t.Errorf("cycles in the store: %v, want %v", got, wantCycles)
	}
	if c, err := st.Cycle(context.Background(), first.ID); err != nil || len(c.Samples) != 16 || len(c.Results) == 0 {
		t.Errorf("cycle #%d in the store: %d samples, %d results, %v", first.ID, len(c.Samples), len(c.Results), err)
	}
}

// ownerOf returns the owner token of the only probe container.
func ownerOf(t *testing.T, docker dockerAPI) string {
	t.Helper()
	l := docker.labelled(t)
	if len(l.Containers) != 1 {
		t.Fatalf("want one probe container, got %s", l)
	}
	owner := l.Containers[0].Labels["io.layerprobe.owner"]
	if _, err := hostfs.ParseOwner(owner); err != nil {
		t.Fatalf("probe container owner: %v", err)
	}
	return owner
}
