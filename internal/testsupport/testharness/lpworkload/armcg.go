package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ArmProcess is one line of armcg's output: a process, the program it
// ran when seen, and its /proc/PID/cgroup as read from armcg's own cgroup
// namespace. Role is "agent", "host" (a process the agent started, or a
// child of one) or "container" (argv[0] under /lp/bin/, where the agent
// puts fio and itself in a probe container).
type ArmProcess struct {
	Role   string   `json:"role"`
	Pid    int      `json:"pid"`
	PPid   int      `json:"ppid"`
	Argv   []string `json:"argv"`
	Cgroup string   `json:"cgroup"`
}

// armcgPoll is how often armcg scans /proc unless told. The smoke
// profile's host arms live a few hundred milliseconds (fio's start, a
// 50–100 ms job, its exit), so a few milliseconds between scans sees nearly
// every one. In an emulated guest a scan takes tens of milliseconds of
// the guest's CPU and a host arm lives seconds: the watcher there scans
// less often.
const armcgPoll = 3 * time.Millisecond

// armcg records, until the file stop exists, the processes of the arms of
// the agent whose PID is pidArg: what lets a test check where the host arm
// really ran, rather than what the agent says of it. A process is written
// once per program: a process that execs (probe-helper cgexec becoming fio)
// is written again with its new argv and cgroups. It scans /proc every
// poll.
func armcg(pidArg, out, stop string, poll time.Duration) error {
	agent, err := strconv.Atoi(pidArg)
	if err != nil || agent <= 0 {
		return fmt.Errorf("armcg: bad PID %q", pidArg)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	seen := map[string]bool{} // pid and argv written
	other := map[int]string{} // pid of no interest, and its comm then
	host := map[int]bool{}
	for {
		if _, err := os.Stat(stop); err == nil {
			return f.Close()
		}
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			ppid, comm, ok := procStat(pid)
			if !ok {
				continue
			}
			// Reading every argv on every scan would take the CPU the
			// arms compete for: a process of no interest is skipped
			// until its comm changes (an exec). The agent's children
			// are read every time: probe-helper cgexec execs the
			// small-file helper under the same comm.
			if c, ok := other[pid]; ok && c == comm && pid != agent && ppid != agent && !host[ppid] {
				continue
			}
			argv, ok := procArgv(pid)
			if !ok {
				// The agent itself is read again on the next scan: a
				// cmdline that reads empty once (the process busy in
				// its memory under load) must not hide it for good.
				if pid != agent {
					other[pid] = comm
				}
				continue
			}
			role := ""
			switch {
			case pid == agent:
				role = "agent"
			case ppid == agent || host[ppid]:
				role = "host"
				host[pid] = true
			case strings.HasPrefix(argv[0], "/lp/bin/"):
				role = "container"
			}
			key := strconv.Itoa(pid) + "\x00" + strings.Join(argv, "\x00")
			if role == "" || seen[key] {
				other[pid] = comm
				continue
			}
			cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
			if err != nil {
				continue // gone
			}
			seen[key] = true
			other[pid] = comm
			if err := enc.Encode(ArmProcess{Role: role, Pid: pid, PPid: ppid, Argv: argv, Cgroup: string(cg)}); err != nil {
				return err
			}
		}
		time.Sleep(poll)
	}
}

// procStat reads a process's parent and command name; ok is false for a
// process that is gone.
func procStat(pid int) (ppid int, comm string, ok bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// The command name in parentheses may hold spaces and parentheses:
	// the fields after it start after its last ')'.
	i, j := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if i < 0 || j < i {
		return 0, "", false
	}
	fields := strings.Fields(string(stat[j+1:]))
	if len(fields) < 2 {
		return 0, "", false
	}
	if ppid, err = strconv.Atoi(fields[1]); err != nil {
		return 0, "", false
	}
	return ppid, string(stat[i+1 : j]), true
}

// procArgv reads a process's argv; ok is false for a process that is gone
// or has none (a kernel thread, a zombie).
func procArgv(pid int) ([]string, bool) {
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(cmd) == 0 {
		return nil, false
	}
	return strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00"), true
}
