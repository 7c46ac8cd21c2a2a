//go:build linux

package cgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
)

// v1Member is /proc/<pid>/cgroup of a container on a cgroup v1 host, as
// membership keys it.
var v1Member = map[string]string{
	"blkio": "/docker/abc", "cpu,cpuacct": "/docker/abc", "cpuset": "/docker/abc",
	"memory": "/docker/abc", "name=systemd": "/docker/abc", "": "/",
}

func v1Mounts() []*mountinfo.Info {
	return []*mountinfo.Info{
		{Mountpoint: "/sys/fs/cgroup/blkio", Root: "/", FSType: "cgroup", VFSOptions: "rw,blkio"},
		{Mountpoint: "/sys/fs/cgroup/cpu,cpuacct", Root: "/", FSType: "cgroup", VFSOptions: "rw,cpu,cpuacct"},
		{Mountpoint: "/sys/fs/cgroup/cpuset", Root: "/", FSType: "cgroup", VFSOptions: "rw,cpuset"},
		{Mountpoint: "/sys/fs/cgroup/memory", Root: "/", FSType: "cgroup", VFSOptions: "rw,memory"},
		{Mountpoint: "/sys/fs/cgroup/unified", Root: "/", FSType: "cgroup2", VFSOptions: "rw,nsdelegate"},
	}
}

func TestDirsForV1JoinsOnlyCPUControllers(t *testing.T) {
	got, err := dirsFor(v1Member, v1Mounts())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/sys/fs/cgroup/cpu,cpuacct/docker/abc", "/sys/fs/cgroup/cpuset/docker/abc"}
	if !slices.Equal(got, want) {
		t.Errorf("dirs %v, want %v (blkio and memory stay the host arm's own)", got, want)
	}
}

func TestDirsForV2(t *testing.T) {
	member := map[string]string{"": "/system.slice/docker-abc.scope"}
	mounts := []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", Root: "/", FSType: "cgroup2"}}
	got, err := dirsFor(member, mounts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/sys/fs/cgroup/system.slice/docker-abc.scope"}; !slices.Equal(got, want) {
		t.Errorf("dirs %v, want %v", got, want)
	}
}

func TestDirsForOutsideTheMountedSubtree(t *testing.T) {
	// A cgroup namespace or a bind-mounted subtree shows only part of the
	// hierarchy: a path outside it has no directory here.
	member := map[string]string{"": "/system.slice/docker-abc.scope"}
	mounts := []*mountinfo.Info{{Mountpoint: "/sys/fs/cgroup", Root: "/kubepods", FSType: "cgroup2"}}
	if got, err := dirsFor(member, mounts); err == nil {
		t.Errorf("dirs %v, want an error", got)
	}
	if _, err := membership("/proc/-1/cgroup"); err == nil {
		t.Error("membership of no process: want an error")
	}
}

func TestOfRefusesAnotherContainersProcess(t *testing.T) {
	if _, err := Of(os.Getpid(), "0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("Of(self, other id) = %v, want an error naming the container", err)
	}
}

// Join moves a real process into a real CPU cgroup (root only): a child of
// this test joins a fresh cgroup beside this process's and reports its
// /proc/self/cgroup.
func TestJoinMovesTheProcess(t *testing.T) {
	if os.Getenv("CGROUP_TEST_JOIN") != "" {
		if err := Join(strings.Split(os.Getenv("CGROUP_TEST_JOIN"), ":")); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		b, _ := os.ReadFile("/proc/self/cgroup")
		os.Stdout.Write(b)
		os.Exit(0)
	}
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and -short off")
	}
	self, err := Of(os.Getpid(), "")
	if err != nil {
		t.Skipf("no joinable CPU cgroup here: %v", err)
	}
	var dirs []string
	for _, d := range self.Dirs {
		n := filepath.Join(d, "layerprobe-test-"+filepath.Base(t.TempDir()))
		if err := os.Mkdir(n, 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d, "cpuset") {
			// A new cpuset cgroup starts with no CPUs and memory nodes.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(d, f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(n, f), b, 0)
				}
			}
		}
		t.Cleanup(func() { _ = os.Remove(n) })
		dirs = append(dirs, n)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJoinMovesTheProcess$")
	cmd.Env = append(os.Environ(), "CGROUP_TEST_JOIN="+strings.Join(dirs, ":"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	name := filepath.Base(dirs[0])
	if !strings.Contains(string(out), name) {
		t.Errorf("child's cgroups after Join:\n%s\nwant %s in them", out, name)
	}
}

// Join must not write into a directory that is not a cgroup: a plain
// "cgroup.procs" file there would join nothing, silently.
func TestJoinRefusesAPlainDirectory(t *testing.T) {
	d := t.TempDir()
	err := Join([]string{d})
	if err == nil || !strings.Contains(err.Error(), "not on a cgroup file system") || !strings.Contains(err.Error(), d) {
		t.Errorf("Join(plain directory) = %v, want an error naming it", err)
	}
	if _, serr := os.Stat(filepath.Join(d, "cgroup.procs")); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("Join left a file in the plain directory: stat = %v", serr)
	}
}

// A cgroup that is gone (its container removed) is skipped.
func TestJoinSkipsAGoneCgroup(t *testing.T) {
	if err := Join([]string{filepath.Join(t.TempDir(), "gone")}); err != nil {
		t.Errorf("Join(missing directory) = %v, want nil", err)
	}
}

func TestMembershipReadsEveryLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "cgroup")
	content := "12:pids:/docker/abc\n3:cpu,cpuacct:/docker/a:b\n1:name=systemd:/docker/abc\n0::/\n"
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := membership(f)
	want := map[string]string{"pids": "/docker/abc", "cpu,cpuacct": "/docker/a:b", "name=systemd": "/docker/abc", "": "/"}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("membership = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "3:cpu\n"} {
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := membership(f); err == nil {
			t.Errorf("membership(%q) = %v, want an error", bad, got)
		}
	}
}

// A private cgroup namespace shows a cgroup outside it as "/../...": the
// paths the host arm joins (the CPU controllers' on cgroup v1, the
// unified one on v2) decide.
func TestOutsideNamespace(t *testing.T) {
	for _, tc := range []struct {
		member map[string]string
		want   string
	}{
		{v1Member, ""},
		{map[string]string{"cpu,cpuacct": "/../def", "cpuset": "/../def", "memory": "/../def", "": "/"}, "/../def"},
		// The agent's own cgroup at its namespace's root, a probe's in
		// a sibling: only the CPU controllers count on v1.
		{map[string]string{"cpu,cpuacct": "/docker/def", "cpuset": "/docker/def", "": "/../.."}, ""},
		{map[string]string{"": "/../../system.slice/docker-def.scope"}, "/../../system.slice/docker-def.scope"},
		{map[string]string{"": "/..dots/in/a/name"}, ""},
		{map[string]string{"": "/.."}, "/.."},
	} {
		got, ok := outsideNamespace(tc.member)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("outsideNamespace(%v) = %q, %v; want %q", tc.member, got, ok, tc.want)
		}
	}
}

// privateNSChild is what the child of TestOfFromAPrivateNamespace reports.
type privateNSChild struct {
	Private bool     `json:"private"`
	Dirs    []string `json:"dirs"`
	NS      string   `json:"ns"`
	Err     string   `json:"err"`
	// Joined is /proc/self/cgroup, read in the entered namespace, after
	// Enter and Join: where a host arm would have run.
	Joined string `json:"joined"`
}

// TestOfFromAPrivateNamespace runs Of and Join as an agent in a private
// cgroup namespace does (a Kubernetes pod on cgroup v2, `docker run
// --cgroupns private`): a child of this test moves into a cgroup of its
// own, unshares a cgroup namespace there, keeps only the capabilities
// given, and asks for the CPU cgroups of a "probe" process that sits in a
// sibling cgroup, outside the child's namespace, with no capability (as
// the probe container's process). With every capability the child enters
// PID 1's namespace (where this machine lets root open it); with
// CAP_SYS_ADMIN only, the probe's; with none, Of says what is missing. Root only; needs unshare and setpriv
// (util-linux).
func TestOfFromAPrivateNamespace(t *testing.T) {
	if env := os.Getenv("CGROUP_TEST_PRIVATE"); env != "" {
		pid, _ := strconv.Atoi(strings.Split(env, ":")[0])
		var r privateNSChild
		r.Private = PrivateNamespace()
		tg, err := Of(pid, strings.Split(env, ":")[1])
		r.Dirs, r.NS = tg.Dirs, tg.Namespace
		if err != nil {
			r.Err = err.Error()
		} else {
			runtime.LockOSThread()
			if tg.Namespace != "" {
				if err := Enter(tg.Namespace); err != nil {
					r.Err = "enter: " + err.Error()
				}
			}
			if err := Join(tg.Dirs); err != nil && r.Err == "" {
				r.Err = "join: " + err.Error()
			}
			b, _ := os.ReadFile("/proc/thread-self/cgroup")
			r.Joined = string(b)
		}
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root and -short off")
	}
	var tools []string
	for _, name := range []string{"unshare", "setpriv"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s: %v (util-linux; scripts/install-deps.sh installs it)", name, err)
		}
		tools = append(tools, p)
	}
	self, err := Of(os.Getpid(), "")
	if err != nil || self.Namespace != "" {
		t.Skipf("no joinable CPU cgroup here: %+v, %v", self, err)
	}
	if private := PrivateNamespace(); private {
		t.Skip("this test runs in a private cgroup namespace itself")
	}
	// Two sibling cgroups, two levels below this process's own, in every
	// hierarchy Of joins: the agent's and the probe's. Two levels: the
	// namespace's root then lies deeper than the probe's parent, as a
	// pod's does, and a path relative to it ("/../<probe>") cannot be
	// read as one relative to the hierarchy's root by accident.
	name := "lp-test-" + strconv.Itoa(os.Getpid())
	var made []string
	t.Cleanup(func() {
		// A cgroup goes once its processes have: they are killed and
		// waited for by then, but the kernel lets go a moment later.
		for _, d := range slices.Backward(made) {
			for i := 0; i < 50 && os.Remove(d) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	mk := func(parents []string, leaf string) []string {
		var dirs []string
		for _, d := range parents {
			n := filepath.Join(d, leaf)
			if err := os.Mkdir(n, 0o755); err != nil {
				t.Fatal(err)
			}
			made = append(made, n)
			if strings.Contains(d, "cpuset") {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
						_ = os.WriteFile(filepath.Join(n, f), b, 0)
					}
				}
			}
			dirs = append(dirs, n)
		}
		return dirs
	}
	parents := mk(self.Dirs, name)
	probeDirs, agentDirs := mk(parents, name+"-probe"), mk(parents, name+"-agent")
	// The probe: no capability at all, in the host's cgroup namespace,
	// moved into its cgroup by a shell before it execs sleep.
	probe := exec.Command("/bin/sh", append([]string{"-c", `for d; do echo $$ > "$d/cgroup.procs" || exit 1; done; exec "$0" --bounding-set=-all --inh-caps=-all sleep 600`,
		tools[1]}, probeDirs...)...)
	if err := probe.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = probe.Process.Kill(); _ = probe.Wait() })
	waitFor(t, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", probe.Process.Pid))
		return strings.Contains(string(b), "CapPrm:\t0000000000000000") && strings.Contains(readCgroup(probe.Process.Pid), name+"-probe")
	})

	child := func(caps string) privateNSChild {
		t.Helper()
		// sh moves itself into the agent's cgroups; unshare makes the
		// cgroup namespace there; setpriv keeps the capabilities given.
		script := `u=$1 s=$2 caps=$3; shift 3; while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 1; shift; done; shift; exec "$u" --cgroup "$s" --bounding-set=$caps --inh-caps=-all "$@"`
		args := []string{"-c", script, "sh", tools[0], tools[1], caps}
		args = append(append(args, agentDirs...), "--", os.Args[0], "-test.run=^TestOfFromAPrivateNamespace$")
		cmd := exec.Command("/bin/sh", args...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("CGROUP_TEST_PRIVATE=%d:%s-probe", probe.Process.Pid, name))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child with %s: %v\n%s", caps, err, out)
		}
		var r privateNSChild
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("child with %s: %v\n%s", caps, err, out)
		}
		return r
	}
	probeNS := fmt.Sprintf("/proc/%d/ns/cgroup", probe.Process.Pid)
	// PID 1's namespace with every capability, where this process may
	// open it (a machine's sandbox can refuse even root).
	allNS := probeNS
	if f, err := os.Open("/proc/1/ns/cgroup"); err == nil {
		f.Close()
		allNS = "/proc/1/ns/cgroup"
	}
	for _, tc := range []struct{ caps, ns string }{
		{"+all", allNS},
		{"-all,+sys_admin", probeNS},
	} {
		r := child(tc.caps)
		if !r.Private {
			t.Errorf("%s: PrivateNamespace() = false in a private cgroup namespace", tc.caps)
		}
		if r.Err != "" || r.NS != tc.ns || !slices.Equal(r.Dirs, probeDirs) {
			t.Errorf("%s: Of = %+v; want the probe's cgroups %v through %s", tc.caps, r, probeDirs, tc.ns)
			continue
		}
		// Where the host arm would run: the probe's CPU cgroups, and
		// the host's paths, read from the namespace it entered.
		for _, d := range probeDirs {
			if !strings.Contains(r.Joined, ":"+strings.TrimPrefix(d, mountOf(d))+"\n") {
				t.Errorf("%s: after Join, /proc/self/cgroup\n%s\nlacks %s", tc.caps, r.Joined, d)
			}
		}
	}
	r := child("-all")
	t.Logf("no capability: %s", r.Err)
	if r.Err == "" || !strings.Contains(r.Err, "private cgroup namespace and no CAP_SYS_ADMIN") || len(r.Dirs) != 0 {
		t.Errorf("no capability: Of = %+v; want an error naming the missing CAP_SYS_ADMIN", r)
	}
}

// mountOf returns the mount point of the cgroup hierarchy that d lies in:
// the cgroup's path is what follows (the hierarchies are mounted at their
// root here).
func mountOf(d string) string {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return ""
	}
	best := ""
	for _, m := range ms {
		if strings.HasPrefix(d, m.Mountpoint+"/") && len(m.Mountpoint) > len(best) {
			best = m.Mountpoint
		}
	}
	return best
}

func readCgroup(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return string(b)
}

// waitFor polls ok for up to 10 s.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if ok() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the probe process never reached its cgroups without capabilities")
}
