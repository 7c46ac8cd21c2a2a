package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultLockPath is the host-wide lock every layerprobe process takes while
// it runs fio, so an agent and a manual `layerprobe run` never measure at the
// same time and skew each other.
const DefaultLockPath = "/run/lock/layerprobe.lock"

// ErrLocked means another process holds the lock.
var ErrLocked = errors.New("lock held by another process")

// LockedError is TryLock's error while another process holds the lock. It
// matches ErrLocked (errors.Is) and says who holds it, for the operator.
type LockedError struct {
	Path string
	// Holder describes the holder from the pid it wrote into the file:
	// "held by pid N", or "holder pid unknown" while it has not yet.
	Holder string
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v (%s, lock file %s)", ErrLocked, e.Holder, e.Path)
}

// Unwrap makes a LockedError match ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held flock(2) on a file.
type Lock struct{ f *os.File }

// TryLock takes the lock at path without waiting, creating the file (and
// its directory) if needed, and writes this process's pid into it. flock
// rather than a pid file alone: the kernel drops the lock when its holder
// dies, even by SIGKILL, so a crashed process never leaves a stale lock.
// While another process holds it, the error is a *LockedError.
func TryLock(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	// No O_TRUNC: the file holds the current holder's pid until we own it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, Holder: holder(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Best effort: the pid only helps the operator find the other process.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// holder describes the lock's holder from the pid it wrote.
func holder(path string) string {
	b, err := os.ReadFile(path)
	pid := strings.TrimSpace(string(b))
	if err != nil || pid == "" {
		// The holder may be between taking the lock and writing its pid.
		return "holder pid unknown"
	}
	return "held by pid " + pid
}

// Unlock releases the lock. The file stays: removing it would race with
// another process that has it open and is about to lock it.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	cerr := l.f.Close()
	l.f = nil
	return errors.Join(err, cerr)
}
