package advisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProc writes a proc root where the system booted at boot and pid
// started ticks (1/100 s) later.
func fakeProc(t *testing.T, boot int64, pid int, ticks uint64) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "stat"), fmt.Appendf(nil, "cpu  1 0 1 1 0 0 0 0 0 0\nbtime %d\n", boot), 0o644); err != nil {
		t.Fatal(err)
	}
	// Fields 3 to 52 of proc_pid_stat(5); starttime is field 22.
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = "0"
	}
	fields[0] = "S"
	fields[22-3] = fmt.Sprint(ticks)
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("%d (lpworkload) %s\n", pid, strings.Join(fields, " "))), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestWritesSince(t *testing.T) {
	const boot = 1_700_000_000
	startedAt := time.Unix(boot+10_000, 500_000_000) // the engine's record
	for _, c := range []struct {
		name  string
		pid   int
		ticks uint64 // the process's start after boot
		want  time.Time
	}{
		// The process ran 300 ms before the engine recorded the start.
		{"process before the record", 42, 1_000_020, time.Unix(boot+10_000, 200_000_000).Add(-startSlack)},
		{"no such process", 43, 1_000_020, startedAt.Add(-startSlack)},
		{"no pid", 0, 1_000_020, startedAt.Add(-startSlack)},
		// A process that started after the record is not the container's
		// init (its pid was reused).
		{"process after the record", 42, 1_000_060, startedAt.Add(-startSlack)},
		// One that started an hour before is another pid namespace's.
		{"process long before", 42, 1_000_000 - 360_000, startedAt.Add(-startSlack)},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fakeProc(t, boot, 42, c.ticks)
			if got := writesSince(root, bootTime(root), c.pid, startedAt); !got.Equal(c.want) {
				t.Errorf("writesSince = %v, want %v", got, c.want)
			}
		})
	}
	none := filepath.Join(t.TempDir(), "none")
	if got := writesSince(none, bootTime(none), 42, startedAt); !got.Equal(startedAt.Add(-startSlack)) {
		t.Errorf("without a proc root: %v, want StartedAt less the slack", got)
	}
}

// TestProcessStartOnThisKernel reads a real process's start from /proc: it
// lies between just before the process was started (less the second that
// /proc's whole-second boot time may cost) and just after.
func TestProcessStartOnThisKernel(t *testing.T) {
	before := time.Now()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	after := time.Now()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got, ok := processStart("/proc", bootTime("/proc"), cmd.Process.Pid)
	if !ok {
		t.Fatalf("processStart(/proc, %d): no start time", cmd.Process.Pid)
	}
	// Ticks are 10 ms; the boot time is whole seconds, truncated.
	if got.Before(before.Add(-time.Second-10*time.Millisecond)) || got.After(after.Add(10*time.Millisecond)) {
		t.Errorf("process start %v, want within [%v - 1 s, %v]", got, before, after)
	}
}

// TestWalkCountsAWriteJustBeforeTheRecordedStart: a file the container
// finished writing before the engine recorded its start still counts as
// modified since the start, once writesSince has found the process's
// start; a file older than the process does not.
func TestWalkCountsAWriteJustBeforeTheRecordedStart(t *testing.T) {
	now := time.Now()
	startedAt := now.Add(-time.Minute)
	procStart := startedAt.Add(-400 * time.Millisecond)
	boot := procStart.Add(-time.Hour).Truncate(time.Second)
	root := fakeProc(t, boot.Unix(), 42, uint64(procStart.Sub(boot)/(10*time.Millisecond)))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "blob"), 4096, startedAt.Add(-100*time.Millisecond))
	writeFile(t, filepath.Join(dir, "before"), 100, procStart.Add(-time.Hour))

	b := &budget{maxEntries: 1000, deadline: now.Add(time.Minute), now: time.Now}
	if r := walkTree(dir, writesSince(root, bootTime(root), 42, startedAt), b, false); r.Since != 4096 || r.Bytes != 4196 {
		t.Errorf("walk since the process's start: Since %d of %d bytes, want 4096 of 4196", r.Since, r.Bytes)
	}
	if r := walkTree(dir, startedAt, b, false); r.Since != 0 {
		t.Errorf("walk since the recorded start: Since %d, want 0 (the race writesSince closes)", r.Since)
	}
}
