// Package helper is the small program that runs inside the probe container.
// The probe image carries the layerprobe binary itself, so the container's
// long-lived process and its housekeeping need no shell or coreutils:
//
//	layerprobe probe-helper idle          # PID 1: wait for SIGTERM
//	layerprobe probe-helper kill-fio      # stop every fio in the container
//	layerprobe probe-helper clean DIR...  # empty job directories under /lp
package helper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root is the only tree clean may touch.
const Root = "/lp/"

// Run executes one helper verb.
func Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("probe-helper: want a verb: idle, kill-fio or clean")
	}
	switch args[0] {
	case "idle":
		return idle(ctx)
	case "kill-fio":
		return KillByName("fio", 3*time.Second)
	case "clean":
		return clean(args[1:])
	default:
		return fmt.Errorf("probe-helper: unknown verb %q, want idle, kill-fio or clean", args[0])
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
