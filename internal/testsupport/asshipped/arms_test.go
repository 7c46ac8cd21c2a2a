package asshipped

import (
	"errors"
	"strings"
	"testing"
)

// The cgroups of a cgroup v1 host as the box reads them: the agent in its
// unit, the probe container under docker.
const (
	agentCgroup = "12:pids:/system.slice/layerprobe.service\n4:memory:/system.slice/layerprobe.service\n" +
		"3:cpu,cpuacct:/system.slice/layerprobe.service\n2:cpuset:/\n1:name=systemd:/system.slice/layerprobe.service\n0::/\n"
	probeCgroup = "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n" +
		"1:name=systemd:/docker/abc\n0::/\n"
	// joinedCgroup is a host arm after probe-helper cgexec: CPU
	// controllers the probe container's, the rest the agent's.
	joinedCgroup = "12:pids:/system.slice/layerprobe.service\n4:memory:/system.slice/layerprobe.service\n" +
		"3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n1:name=systemd:/system.slice/layerprobe.service\n0::/\n"
)

func TestCPUCgroups(t *testing.T) {
	for in, want := range map[string]string{
		joinedCgroup:           "cpu=/docker/abc cpuacct=/docker/abc cpuset=/docker/abc",
		agentCgroup:            "cpu=/system.slice/layerprobe.service cpuacct=/system.slice/layerprobe.service cpuset=/",
		"0::/system.slice/x\n": "unified=/system.slice/x",
	} {
		if got := CPUCgroups(in); got != want {
			t.Errorf("CPUCgroups(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArmCgroupProblems(t *testing.T) {
	agent := ArmProcess{Role: "agent", Pid: 10, Argv: []string{"/usr/bin/layerprobe", "agent"}, Cgroup: agentCgroup}
	probe := ArmProcess{Role: "container", Pid: 20, Argv: []string{"/lp/bin/layerprobe", "probe-helper", "idle"}, Cgroup: probeCgroup}
	fio := func(cg string) ArmProcess {
		return ArmProcess{Role: "host", Pid: 30, PPid: 10, Argv: []string{"/usr/bin/fio", "--output-format=json", "job.fio"}, Cgroup: cg}
	}
	small := func(cg string) ArmProcess {
		return ArmProcess{Role: "host", Pid: 31, PPid: 10, Argv: []string{"/usr/bin/layerprobe", "probe-helper", "smallfiles", "--name=smallfiles"}, Cgroup: cg}
	}
	// cgexec before its exec is in the agent's cgroups, by design.
	cgexec := ArmProcess{Role: "host", Pid: 32, PPid: 10, Argv: []string{"/usr/bin/layerprobe", "probe-helper", "cgexec", "/sys/fs/cgroup/cpu", "--", "/usr/bin/fio"}, Cgroup: agentCgroup}
	version := ArmProcess{Role: "host", Pid: 33, PPid: 10, Argv: []string{"/usr/bin/fio", "--version"}, Cgroup: agentCgroup}

	seen, problems := ArmCgroupProblems([]ArmProcess{agent, probe, cgexec, version, fio(joinedCgroup), small(joinedCgroup)}, "fio", "smallfiles")
	if len(problems) != 0 || seen["fio"] != 1 || seen["smallfiles"] != 1 {
		t.Errorf("joined: seen %v, problems %q", seen, problems)
	}
	for name, tc := range map[string]struct {
		procs []ArmProcess
		want  string
	}{
		"lost join of fio":        {[]ArmProcess{agent, probe, fio(agentCgroup), small(joinedCgroup)}, "ran in cpu=/system.slice/layerprobe.service"},
		"lost join of smallfiles": {[]ArmProcess{agent, probe, fio(joinedCgroup), small(agentCgroup)}, "probe-helper smallfiles"},
		"no fio seen":             {[]ArmProcess{agent, probe, cgexec, small(joinedCgroup)}, "no host-arm process of fio"},
		"no probe container":      {[]ArmProcess{agent, fio(joinedCgroup), small(joinedCgroup)}, "no probe container process"},
	} {
		_, problems := ArmCgroupProblems(tc.procs, "fio", "smallfiles")
		if !strings.Contains(strings.Join(problems, "\n"), tc.want) {
			t.Errorf("%s: problems %q, want one saying %q", name, problems, tc.want)
		}
	}
}

// A verdict has its interval only with bind's 95% interval for every
// loaded workload.
func TestVerdictIntervals(t *testing.T) {
	both := []AAFigure{{Workload: "randwrite", N: 6, Coverage: 0.97}, {Workload: "smallfiles", N: 8, Coverage: 0.96}}
	for _, c := range []struct {
		aa   []AAFigure
		want bool
	}{
		{both, true},
		{both[:1], false},
		{[]AAFigure{both[0], {Workload: "smallfiles", N: 5, Coverage: 0.94}}, false},
		{[]AAFigure{both[0], both[0]}, false},
	} {
		v := Verdict{AA: c.aa}
		if got := v.intervals(); got != c.want {
			t.Errorf("intervals of %+v = %v, want %v", c.aa, got, c.want)
		}
	}
}

// A status command that failed with nothing on stdout is no verdict; one
// that answered a state, even with a failing exit, is.
func TestUnanswered(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want bool
	}{
		{Result{Err: errors.New("signal: killed")}, true},
		{Result{Stdout: "inactive\n", Err: errors.New("exit status 3")}, false},
		{Result{Stdout: "active\n"}, false},
		{Result{}, false},
	} {
		if got := unanswered(c.r); got != c.want {
			t.Errorf("unanswered(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
}
