// Package asshipped is what the tests of the shipped deployments share
// (test/ops's, on this machine's cgroup v1 kernel, test/vm's and the
// benchmark's, in a cgroup v2 guest): the DaemonSet's pod translated into
// `docker run` flags as a kubelet would start it, and the check of where
// the agent's host arm really ran, from what `lpworkload armcg` saw in
// /proc.
//
// It is for tests only; nothing in the shipped binary imports it.
package asshipped

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// ArmProcess is a line of `lpworkload armcg`: a process of the agent's
// arms as seen in the host's /proc (lpworkload's ArmProcess).
type ArmProcess struct {
	Role   string   `json:"role"` // agent, host or container
	Pid    int      `json:"pid"`
	PPid   int      `json:"ppid"`
	Argv   []string `json:"argv"`
	Cgroup string   `json:"cgroup"` // /proc/PID/cgroup
}

// CPUCgroups is the part of a /proc/PID/cgroup that the host arm's join
// sets: the paths of the cpu, cpuacct and cpuset hierarchies on cgroup v1,
// or the unified path on a cgroup v2 host, as one comparable string.
func CPUCgroups(procCgroup string) string {
	var v1 []string
	unified := ""
	for _, l := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" || c == "cpuacct" || c == "cpuset" {
				v1 = append(v1, c+"="+parts[2])
			}
		}
	}
	if len(v1) == 0 {
		return "unified=" + unified
	}
	slices.Sort(v1)
	return strings.Join(v1, " ")
}

// HostArmWorkload names the workload a host process of the agent runs: fio
// (a job; `fio --version` is not one) or the small-file helper after its
// cgexec. Anything else the agent starts, such as `probe-helper cgexec`
// before it execs, is not a host arm.
func HostArmWorkload(argv []string) string {
	switch {
	case slices.Contains(argv, "cgexec"), slices.Contains(argv, "--version"):
		return ""
	case filepath.Base(argv[0]) == "fio":
		return "fio"
	case len(argv) > 2 && argv[1] == "probe-helper" && argv[2] == "smallfiles":
		return "smallfiles"
	}
	return ""
}

// ArmCgroupProblems counts the host-arm processes in procs by what they
// run (HostArmWorkload) and says what is wrong: a host arm outside every
// probe container's CPU cgroups, no host arm seen of a workload in want
// ("fio", "smallfiles": nothing checked), or no agent or probe container
// to compare with. A lost join fails here whatever the machine's load,
// where a timed A/A comparison cannot tell it from noise.
func ArmCgroupProblems(procs []ArmProcess, want ...string) (seen map[string]int, problems []string) {
	var agent string
	probe := map[string]bool{}
	for _, p := range procs {
		switch p.Role {
		case "agent":
			agent = CPUCgroups(p.Cgroup)
		case "container":
			probe[CPUCgroups(p.Cgroup)] = true
		}
	}
	if agent == "" || len(probe) == 0 {
		return nil, []string{fmt.Sprintf("the watcher saw no agent (%q) or no probe container process (%d of %d processes)", agent, len(probe), len(procs))}
	}
	if probe[agent] {
		return nil, []string{fmt.Sprintf("the agent's own CPU cgroups (%s) are a probe container's: a lost join would not show", agent)}
	}
	seen = map[string]int{}
	for _, p := range procs {
		w := ""
		if p.Role == "host" {
			w = HostArmWorkload(p.Argv)
		}
		if w == "" {
			continue
		}
		seen[w]++
		if cg := CPUCgroups(p.Cgroup); !probe[cg] {
			problems = append(problems, fmt.Sprintf("host arm %d %q ran in %s, not in a probe container's CPU cgroups %v (the agent's: %s)",
				p.Pid, strings.Join(p.Argv, " "), cg, slices.Sorted(maps.Keys(probe)), agent))
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			problems = append(problems, fmt.Sprintf("the watcher saw no host-arm process of %s (%d processes seen): nothing was checked", w, len(procs)))
		}
	}
	return seen, problems
}
