//go:build linux

package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if _, err := membership(-1); err == nil {
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
	for _, d := range self {
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
