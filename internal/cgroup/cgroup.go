//go:build linux

// Package cgroup finds the CPU cgroups of a container's process so that the
// host arm of a measurement can run in them.
//
// Why: the host arm's fio and the container's fio must compete for CPU on
// equal terms. A probe container's process sits in the engine's cgroup
// (/docker/<id>, system.slice/docker-<id>.scope, ...) and shares that
// subtree's CPU weight with every other container of the host, while
// layerprobe runs wherever its service manager put it. On a host whose CPUs
// are busy with containers, a synchronous 4 KiB writer in the container then
// waits several times longer for a CPU than the same writer on the host, and
// the difference reads as storage overhead (docs/methodology.md, "Both
// arms get the same CPU", has what it did on a loaded machine). Running
// the host arm in the container's CPU cgroups removes that confounder.
//
// On cgroup v1 only the CPU controllers are joined (cpu, cpuacct, cpuset):
// the block I/O and memory cgroups stay the host arm's own, so an I/O limit
// on the container is still measured as the container's overhead. cgroup v2
// has one hierarchy, so there the host arm joins the container's cgroup as a
// whole, I/O limits included.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// cpuControllers are the cgroup v1 controllers that decide how much CPU a
// process gets and where.
var cpuControllers = []string{"cpu", "cpuacct", "cpuset"}

// Of returns the cgroup directories a process must join to share pid's CPU
// cgroups, on this host's cgroup mounts. id, when not empty, must appear in
// pid's cgroup path: a check that pid is the container it is said to be (a
// PID from another PID namespace names some other process here).
func Of(pid int, id string) ([]string, error) {
	member, err := membership(pid)
	if err != nil {
		return nil, fmt.Errorf("read the cgroups of process %d: %w", pid, err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("list cgroup mounts: %w", err)
	}
	dirs, err := dirsFor(member, mounts)
	if err != nil {
		return nil, err
	}
	if id != "" {
		for _, d := range dirs {
			if !strings.Contains(d, id) {
				return nil, fmt.Errorf("process %d is not in a cgroup of container %s (%s): is its PID from another PID namespace?", pid, id, d)
			}
		}
	}
	for _, d := range dirs {
		if err := unix.Access(filepath.Join(d, "cgroup.procs"), unix.W_OK); err != nil {
			return nil, fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return dirs, nil
}

// membership reads /proc/<pid>/cgroup, keyed by the hierarchy's
// controller list ("cpu,cpuacct"; "" for cgroup v2's hierarchy).
func membership(pid int) (map[string]string, error) {
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		return nil, err
	}
	proc, err := fs.Proc(pid)
	if err != nil {
		return nil, err
	}
	cgs, err := proc.Cgroups()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, cg := range cgs {
		key := strings.Join(cg.Controllers, ",")
		if cg.HierarchyID == 0 {
			key = ""
		}
		out[key] = cg.Path
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup lines")
	}
	return out, nil
}

// dirsFor maps a process's cgroup membership onto the mounted
// hierarchies: the cgroup v1 hierarchies holding a CPU controller when there
// are any, else the cgroup v2 directory.
func dirsFor(member map[string]string, mounts []*mountinfo.Info) ([]string, error) {
	var dirs []string
	for _, m := range mounts {
		if m.FSType != "cgroup" {
			continue
		}
		ctrls := strings.Split(m.VFSOptions, ",")
		if !slices.ContainsFunc(ctrls, func(c string) bool { return slices.Contains(cpuControllers, c) }) {
			continue
		}
		for list, path := range member {
			if list == "" || !sameControllers(list, ctrls) {
				continue
			}
			if d, ok := under(m, path); ok && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) > 0 {
		slices.Sort(dirs)
		return dirs, nil
	}
	path, ok := member[""]
	if !ok {
		return nil, errors.New("no cgroup v1 CPU hierarchy and no cgroup v2 membership")
	}
	for _, m := range mounts {
		if m.FSType == "cgroup2" {
			if d, ok := under(m, path); ok {
				return []string{d}, nil
			}
		}
	}
	return nil, fmt.Errorf("cgroup %s is not below a mounted cgroup2 file system", path)
}

// sameControllers says whether a /proc/<pid>/cgroup controller list names
// the hierarchy mounted with options ctrls ("cpu,cpuacct" against
// "rw,cpu,cpuacct").
func sameControllers(list string, ctrls []string) bool {
	for _, c := range strings.Split(list, ",") {
		if !slices.Contains(ctrls, c) {
			return false
		}
	}
	return true
}

// under returns the directory of cgroup path in mount m, when m's root
// holds it (a cgroup namespace or a bind-mounted subtree shows only part of
// the hierarchy).
func under(m *mountinfo.Info, path string) (string, bool) {
	rel, err := filepath.Rel(m.Root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.Join(m.Mountpoint, rel), true
}

// Join moves the calling process into every directory of dirs. Its
// children, and the program it execs, start there. A cgroup that no longer
// exists is skipped: its container is gone (removed mid-measurement), and
// the host arm's measurement is still worth having. A directory that exists
// but is not on a cgroup file system is an error: writing "cgroup.procs"
// there would create a plain file, join nothing, and leave the host arm
// outside the container's CPU cgroups without a word.
func Join(dirs []string) error {
	for _, d := range dirs {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
		if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
			return fmt.Errorf("join cgroup %s: not on a cgroup file system (type %#x)", d, st.Type)
		}
		// No O_CREATE: a cgroup removed since the check has no
		// cgroup.procs, and that is the skip above, not a new file.
		f, err := os.OpenFile(filepath.Join(d, "cgroup.procs"), os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
			continue
		}
		if err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
		_, err = f.WriteString(strconv.Itoa(os.Getpid()))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
			continue
		}
		if err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return nil
}
