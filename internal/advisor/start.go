package advisor

import (
	"time"

	"github.com/prometheus/procfs"
)

// startSlack is taken off the moment from which a container's files count
// as modified since it started: a file's mtime comes from the kernel's
// coarse clock, up to a tick behind the time of the write, and without
// /proc the engine's StartedAt is all there is (see writesSince).
const startSlack = time.Second

// maxStartLag bounds how long before the engine's StartedAt the process
// behind the container's pid may have started for it to be the container's
// init: further back, the pid names another process (the agent in another
// pid namespace sees its own pid space).
const maxStartLag = time.Minute

// writesSince is the moment from which a container's files count as
// modified since it started. The engine records StartedAt only once the
// runtime reports the start, when the container's process has already run
// for milliseconds (seconds on a loaded host): a writer that finishes in
// that time leaves files whose mtime precedes StartedAt, and its writes
// would land nowhere. The start time of the init process in
// procRoot/PID/stat precedes everything the container writes; with boot
// (bootTime: whole seconds) and clock ticks it errs early, by under a
// second. It is used when it falls within maxStartLag before StartedAt,
// StartedAt otherwise (also when boot is unknown, zero); startSlack is
// taken off either.
func writesSince(procRoot string, boot time.Time, pid int, startedAt time.Time) time.Time {
	since := startedAt
	if t, ok := processStart(procRoot, boot, pid); ok && t.Before(since) && since.Sub(t) <= maxStartLag {
		since = t
	}
	return since.Add(-startSlack)
}

// userTick is the unit of a process's start time in /proc (USER_HZ, 100
// on every Linux architecture).
const userTick = 10 * time.Millisecond

// bootTime is when the system booted, in whole seconds, from procRoot/stat;
// zero when it cannot be read. A pass reads it once for all containers.
func bootTime(procRoot string) time.Time {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return time.Time{}
	}
	ks, err := fs.Stat()
	if err != nil || ks.BootTime == 0 {
		return time.Time{}
	}
	return time.Unix(int64(ks.BootTime), 0)
}

// processStart is when the process pid started: boot plus the process's
// start in ticks after boot, from procRoot/PID/stat.
func processStart(procRoot string, boot time.Time, pid int) (time.Time, bool) {
	if pid <= 0 || boot.IsZero() {
		return time.Time{}, false
	}
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return time.Time{}, false
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return time.Time{}, false
	}
	st, err := p.Stat()
	if err != nil {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(st.Starttime) * userTick), true
}
