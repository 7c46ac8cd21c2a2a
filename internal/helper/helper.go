// Package helper is the small program that runs inside the probe container.
// The probe image carries the layerprobe binary itself, so the container's
// long-lived process and its housekeeping need no shell or coreutils:
//
//	layerprobe probe-helper idle          # PID 1: wait for SIGTERM
//	layerprobe probe-helper kill-fio      # stop every fio in the container
//	layerprobe probe-helper clean DIR...  # empty job directories under /lp
//	layerprobe probe-helper copyup FILE...  # time the first write+fsync to each copy-up file
//	layerprobe probe-helper mountinfo     # print the container's mount table
//	layerprobe probe-helper lookup DIR...   # time a stat walk of the cold image's tree, then a first create in each DIR
//
// One verb runs on both sides, as fio does, for the workload fio cannot run:
//
//	layerprobe probe-helper smallfiles --name=W --directory=DIR --files=N [--max-bytes=B]
//
// One verb runs on the host instead, for the host arm of a measurement:
//
//	layerprobe probe-helper cgexec [--cgroupns=NS] DIR... -- PROGRAM ARG...  # join the cgroups, then exec PROGRAM
package helper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/layerprobe/layerprobe/internal/cgroup"
)

// Root is the only tree clean may touch.
const Root = "/lp/"

// Run executes one helper verb.
func Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("probe-helper: want a verb: idle, kill-fio, clean, copyup, lookup, smallfiles, mountinfo or cgexec")
	}
	switch args[0] {
	case "idle":
		return idle(ctx)
	case "kill-fio":
		return KillByName("fio", 3*time.Second)
	case "clean":
		return clean(args[1:])
	case "copyup":
		return copyUp(os.Stdout, args[1:])
	case "lookup":
		return lookup(os.Stdout, args[1:])
	case "smallfiles":
		return smallFiles(os.Stdout, args[1:])
	case "cgexec":
		return cgexec(args[1:])
	case "mountinfo":
		// The probe container's mount table, for the host to name the
		// file system under the bind target (a VM's file sharing).
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return fmt.Errorf("probe-helper mountinfo: %w", err)
		}
		_, err = os.Stdout.Write(b)
		return err
	default:
		return fmt.Errorf("probe-helper: unknown verb %q, want idle, kill-fio, clean, copyup, lookup, smallfiles, mountinfo or cgexec", args[0])
	}
}

// idle blocks until the container is stopped. As PID 1 it also reaps
// orphans, which exec'd fio processes become if their parent shim dies.
func idle(ctx context.Context) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-sig:
			if s == syscall.SIGCHLD {
				reap()
				continue
			}
			return nil
		}
	}
}

func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// KillByName sends SIGTERM to every process whose comm is name, waits up to
// grace for them to exit (fio removes its files on SIGTERM) and then sends
// SIGKILL to the survivors.
func KillByName(name string, grace time.Duration) error {
	pids := pidsNamed(name)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && len(pidsNamed(name)) > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range pidsNamed(name) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return nil
}

func pidsNamed(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			pids = append(pids, pid)
		}
	}
	return pids
}

// clean empties each directory, which must lie under Root: the helper is a
// cleanup tool for layerprobe's own job directories, nothing else.
func clean(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !strings.HasPrefix(d+"/", Root) || d+"/" == Root {
			errs = append(errs, fmt.Errorf("clean %s: only directories under %s", d, Root))
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// CopyUpRoot is the only tree copyup may write to: the cold image's
// copy-up files.
const CopyUpRoot = "/lp/copyup/"

// FirstWriteBytes is the size of the write FirstWrite times: one page, the
// smallest change an application makes to a file.
const FirstWriteBytes = 4096

// FirstWrite times what an application pays for its first small change to
// an existing file: open for writing, one 4 KiB write at offset 0, fsync,
// close. On overlay2 the open of a file that lives in a lower image layer
// copies the whole file up into the writable layer first, and the kernel
// syncs the copy, so the time grows with the file's size; on the host, or
// on a driver that shares extents, it is one page and a flush.
//
// The same function times both arms: the agent calls it on the host file,
// the helper inside the fresh container on the image's file.
func FirstWrite(path string) (time.Duration, error) {
	buf := make([]byte, FirstWriteBytes)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	start := time.Now()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("first write: %w", err)
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return 0, fmt.Errorf("first write: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, fmt.Errorf("first write: fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("first write: close %s: %w", path, err)
	}
	return time.Since(start), nil
}

// CopyUpLine is one line of copyup's JSON output.
type CopyUpLine struct {
	Path    string  `json:"path"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// copyUp times FirstWrite on each file, in the order given (the caller
// randomises it), and writes one JSON line per file. A failure of one file
// is reported in its line and the others are still measured.
func copyUp(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("copyup: no files")
	}
	enc := json.NewEncoder(w)
	for _, p := range files {
		line := CopyUpLine{Path: p}
		if c := filepath.Clean(p); !strings.HasPrefix(c, CopyUpRoot) || c != p {
			line.Error = "only files under " + CopyUpRoot
		} else if d, err := FirstWrite(p); err != nil {
			line.Error = err.Error()
		} else {
			line.Seconds = d.Seconds()
		}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("copyup: %w", err)
		}
	}
	return nil
}

// cgexec joins the cgroup directories before "--" and execs the program
// after it, so that the program and every process it forks start in those
// cgroups (moving a running fio would leave the workers it already forked
// behind). The process group and parent-death signal of the caller's
// exec.Cmd carry over the exec.
//
// --cgroupns=NS (a /proc/<pid>/ns/cgroup file) enters that cgroup
// namespace first: an agent in a private cgroup namespace cannot move a
// process into a cgroup outside it on cgroup v2 (cgroup.Of says which one
// holds both). The namespace is the calling thread's, so the goroutine
// stays on that thread from the setns through the exec, and the program
// starts in the namespace too.
func cgexec(args []string) error {
	ns := ""
	if len(args) > 0 && strings.HasPrefix(args[0], "--cgroupns=") {
		ns, args = strings.TrimPrefix(args[0], "--cgroupns="), args[1:]
		if ns == "" {
			return errors.New("probe-helper cgexec: --cgroupns wants a namespace file")
		}
	}
	i := slices.Index(args, "--")
	if i < 0 || i == len(args)-1 {
		return errors.New("probe-helper cgexec: want [--cgroupns=NS] DIR... -- PROGRAM [ARG...]")
	}
	if ns != "" {
		// Never unlocked: the thread's namespace is no longer this
		// process's own, and the exec or the exit follows.
		runtime.LockOSThread()
		if err := cgroup.Enter(ns); err != nil {
			return fmt.Errorf("probe-helper cgexec: %w", err)
		}
	}
	if err := cgroup.Join(args[:i]); err != nil {
		return fmt.Errorf("probe-helper cgexec: %w", err)
	}
	argv := args[i+1:]
	if err := syscall.Exec(argv[0], argv, os.Environ()); err != nil {
		return fmt.Errorf("probe-helper cgexec: exec %s: %w", argv[0], err)
	}
	return nil
}
