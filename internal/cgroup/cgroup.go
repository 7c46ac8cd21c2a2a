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
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// cpuControllers are the cgroup v1 controllers that decide how much CPU a
// process gets and where.
var cpuControllers = []string{"cpu", "cpuacct", "cpuset"}

// Target is what the host arm joins: the cgroup directories, and the
// cgroup namespace to enter before it writes to them.
type Target struct {
	// Dirs are the cgroup directories, on this process's cgroup mounts.
	Dirs []string
	// Namespace is the /proc/<pid>/ns/cgroup file of a cgroup namespace
	// that holds both this process's cgroups and the probe's, when this
	// process's own namespace does not (a private one, as a Kubernetes
	// pod on cgroup v2, or Docker's default there, gives): "" otherwise.
	Namespace string
}

// Of returns what a process must join to share pid's CPU cgroups, on this
// host's cgroup mounts. id, when not empty, must appear in pid's cgroup
// path: a check that pid is the container it is said to be (a PID from
// another PID namespace names some other process here).
//
// In a private cgroup namespace, /proc/<pid>/cgroup shows pid's cgroups
// relative to this process's own ("/../<id>"), which names no directory of
// the host's cgroup mount, and cgroup v2 refuses a move between cgroups
// the writer's namespace does not hold both of (nsdelegate). Of then
// enters a namespace that holds both (PID 1's, else pid's own, which is
// the host's when the engine started the probe there), reads the paths
// from there, and names it in Target.Namespace: the process that joins
// enters it (Enter) before it calls Join.
func Of(pid int, id string) (Target, error) {
	member, err := membership(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return Target{}, fmt.Errorf("read the cgroups of process %d: %w", pid, err)
	}
	if p, ok := outsideNamespace(member); ok {
		return viaNamespace(pid, id, p)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return Target{}, fmt.Errorf("list cgroup mounts: %w", err)
	}
	dirs, err := checkedDirs(pid, id, member, mounts)
	if err != nil {
		return Target{}, err
	}
	return Target{Dirs: dirs}, nil
}

// checkedDirs maps pid's membership onto mounts (dirsFor), checks that
// the paths name container id and that this process may write their
// cgroup.procs.
func checkedDirs(pid int, id string, member map[string]string, mounts []*mountinfo.Info) ([]string, error) {
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

// outsideNamespace returns the first cgroup path of member that the host
// arm joins (a CPU controller's on cgroup v1, else the unified one) and
// that lies outside the reader's cgroup namespace: the kernel shows such a
// path relative to the namespace's root, beginning "/..".
func outsideNamespace(member map[string]string) (string, bool) {
	v1 := false
	for list, p := range member {
		if list == "" {
			continue
		}
		cpu := slices.ContainsFunc(strings.Split(list, ","), func(c string) bool { return slices.Contains(cpuControllers, c) })
		v1 = v1 || cpu
		if cpu && isOutside(p) {
			return p, true
		}
	}
	if p, ok := member[""]; ok && !v1 && isOutside(p) {
		return p, true
	}
	return "", false
}

// isOutside says whether a path of /proc/<pid>/cgroup lies outside the
// reader's cgroup namespace.
func isOutside(p string) bool { return p == "/.." || strings.HasPrefix(p, "/../") }

// ErrNamespace marks the errors of Of that come from a cgroup namespace:
// the agent's is private and none that holds the probe's cgroups could be
// entered.
var ErrNamespace = errors.New("private cgroup namespace")

// viaNamespace is Of for a probe whose cgroup (path, as this process sees
// it) lies outside this process's cgroup namespace: it tries PID 1's
// namespace (the host's, with the host's PID namespace; opening it needs
// CAP_SYS_PTRACE besides, as PID 1 holds every capability), then the
// probe's own (no more than CAP_SYS_ADMIN: the probe has no capability).
func viaNamespace(pid int, id, path string) (Target, error) {
	var whys []string
	noAdmin := false
	for _, ns := range []string{"/proc/1/ns/cgroup", fmt.Sprintf("/proc/%d/ns/cgroup", pid)} {
		dirs, err := inNamespace(ns, func() ([]string, error) { return dirsInNamespace(pid, id) })
		if err == nil {
			return Target{Dirs: dirs, Namespace: ns}, nil
		}
		noAdmin = noAdmin || errors.Is(err, errSetns) && errors.Is(err, unix.EPERM)
		whys = append(whys, fmt.Sprintf("%s: %v", ns, err))
	}
	if noAdmin {
		return Target{}, fmt.Errorf("%w and no CAP_SYS_ADMIN to enter the host's: the probe's cgroup %s lies outside the agent's; give the agent CAP_SYS_ADMIN and the host's PID namespace, or the host's cgroup namespace (docker run --cgroupns host, compose `cgroup: host`) (%s)",
			ErrNamespace, path, strings.Join(whys, "; "))
	}
	return Target{}, fmt.Errorf("%w: the probe's cgroup %s lies outside the agent's, and no cgroup namespace holding both could be entered (%s)",
		ErrNamespace, path, strings.Join(whys, "; "))
}

// dirsInNamespace is checkedDirs for a thread that has entered another
// cgroup namespace: it reads through /proc/thread-self, since the kernel
// shows cgroup paths and the cgroup mounts' roots relative to the reading
// thread's namespace, and checks that the namespace holds both pid's
// cgroups and this process's (cgroup v2 moves a process only between
// cgroups inside the writer's namespace).
func dirsInNamespace(pid int, id string) ([]string, error) {
	member, err := membership(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("read the cgroups of process %d: %w", pid, err)
	}
	if p, ok := outsideNamespace(member); ok {
		return nil, fmt.Errorf("the probe's cgroup %s lies outside this namespace too", p)
	}
	self, err := membership("/proc/thread-self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read this process's cgroups: %w", err)
	}
	if p, ok := self[""]; ok && isOutside(p) {
		return nil, fmt.Errorf("this process's cgroup %s lies outside this namespace", p)
	}
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list cgroup mounts: %w", err)
	}
	defer f.Close()
	mounts, err := mountinfo.GetMountsFromReader(f, mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("list cgroup mounts: %w", err)
	}
	return checkedDirs(pid, id, member, mounts)
}

// errSetns marks a failed setns(2).
var errSetns = errors.New("setns")

// inNamespace runs fn on an OS thread of its own that has entered the
// cgroup namespace ns (cgroup namespaces are per thread). The thread is
// never given back to the Go scheduler: it ends with the goroutine.
func inNamespace[T any](ns string, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// No UnlockOSThread: the runtime ends a locked thread whose
		// goroutine returns, so no other goroutine runs in ns.
		runtime.LockOSThread()
		if err := Enter(ns); err != nil {
			ch <- result{err: err}
			return
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// Enter moves the calling OS thread into the cgroup namespace of the file
// ns (/proc/<pid>/ns/cgroup). The caller must hold its goroutine on the
// thread (runtime.LockOSThread) for as long as it relies on the namespace.
// It needs CAP_SYS_ADMIN, and opening another process's ns file needs
// ptrace read access to it (the same user, and no capability it has that
// the caller lacks, or CAP_SYS_PTRACE; a Linux security module may refuse
// it too).
func Enter(ns string) error {
	f, err := os.Open(ns)
	if err != nil {
		return fmt.Errorf("enter cgroup namespace: %w", err)
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("enter cgroup namespace %s: %w: %w", ns, errSetns, err)
	}
	return nil
}

// PrivateNamespace says whether this process runs in a cgroup namespace
// of its own rather than the host's (PID 1's, with the host's PID
// namespace): then the probe container's cgroups must be reached through
// another namespace (Of), and the probe should start in the host's.
// Without access to PID 1's namespace file it looks for what a private
// namespace shows: a cgroup mount whose root, or a cgroup of this process,
// lies outside it. A private namespace that shows neither (no host cgroup
// mount, a process at its namespace's root) reads as not private.
func PrivateNamespace() bool {
	self, err1 := os.Readlink("/proc/self/ns/cgroup")
	init, err2 := os.Readlink("/proc/1/ns/cgroup")
	if err1 == nil && err2 == nil {
		return self != init
	}
	if mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2")); err == nil {
		for _, m := range mounts {
			if isOutside(m.Root) {
				return true
			}
		}
	}
	if member, err := membership("/proc/self/cgroup"); err == nil {
		for _, p := range member {
			if isOutside(p) {
				return true
			}
		}
	}
	return false
}

// membership reads a /proc/<pid>/cgroup file, keyed by the hierarchy's
// controller list ("cpu,cpuacct"; "" for cgroup v2's hierarchy).
func membership(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path; the path may hold ':'.
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s: malformed line %q", file, l)
		}
		key := parts[1]
		if parts[0] == "0" {
			key = ""
		}
		out[key] = parts[2]
	}
	if len(out) == 0 || len(b) == 0 {
		return nil, fmt.Errorf("%s: no cgroup lines", file)
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
