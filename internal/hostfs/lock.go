package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
//
// The lock is shared by every user's layerprobe on the host (a root agent
// and a rootless one measure the same disk), so the file is created
// readable and writable by all; one made read-only for others (by an
// earlier version) is locked through a read-only descriptor, which flock
// accepts, without writing the pid.
func TryLock(path string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	f, writable, err := openLock(path)
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
	if !writable {
		return &Lock{f: f}, nil
	}
	// Write, then cut what is left of a longer earlier pid: truncating
	// first would leave the file empty for a moment, and a process refused
	// the lock then could not say who holds it.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err == nil {
		_ = f.Truncate(int64(len(pid)))
	}
	return &Lock{f: f}, nil
}

// lockMode lets every user's layerprobe open the shared lock for writing.
const lockMode = 0o666

// openLock opens the lock file, creating it when it does not exist. An
// existing file is opened without O_CREAT: in a sticky world-writable
// directory such as /run/lock, fs.protected_regular refuses O_CREAT on a
// file another user owns, even to root. No O_TRUNC: the file holds the
// current holder's pid until the lock is ours.
func openLock(path string) (f *os.File, writable bool, err error) {
	for range 3 {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		switch {
		case err == nil:
			return f, true, nil
		case errors.Is(err, fs.ErrPermission):
			f, err = os.OpenFile(path, os.O_RDONLY, 0)
			return f, false, err
		case !errors.Is(err, fs.ErrNotExist):
			return nil, false, err
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, lockMode)
		if err == nil {
			// The umask narrowed the mode at creation.
			if err := f.Chmod(lockMode); err != nil {
				_ = f.Close()
				return nil, false, err
			}
			return f, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, err
		}
		// Another process created it meanwhile: open it as it is.
	}
	return nil, false, err
}

// holder describes the lock's holder from the pid it wrote.
func holder(path string) string {
	// A holder that has just created the file has not written its pid
	// yet: look again for a moment before giving up.
	for try := 0; ; try++ {
		b, err := os.ReadFile(path)
		first, _, _ := strings.Cut(string(b), "\n")
		if pid := strings.TrimSpace(first); err == nil && pid != "" {
			return "held by pid " + pid
		}
		if err != nil || try == holderTries-1 {
			return "holder pid unknown"
		}
		time.Sleep(holderWait)
	}
}

const (
	holderTries = 10
	holderWait  = 5 * time.Millisecond
)

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
