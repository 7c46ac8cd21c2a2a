package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dirLock is the exclusive flock on the state directory's agent.lock. flock
// rather than a pid file alone: the kernel drops it when the holder dies,
// even by SIGKILL, so a crashed agent never blocks the next one.
type dirLock struct {
	f *os.File
}

// lockDir takes the lock without waiting. When another process holds it,
// the error wraps ErrLocked and names the lock file and the holder's pid,
// which the holder wrote into the file.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	// No O_TRUNC: the file holds the current holder's pid until we own it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s, lock file %s)", ErrLocked, holder(path), path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Best effort: the pid only helps the operator find the other agent.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
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

// release unlocks and closes the lock file. The file stays: removing it
// would race with another process that has it open and is about to lock it.
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	err = errors.Join(err, l.f.Close())
	l.f = nil
	return err
}
