package hostfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ownerPrefix starts every owner token, so sweeps recognise our directories.
const ownerPrefix = "lp-"

// Owner identifies the process that created a container, volume or scratch
// directory: boot id, pid and the process start time. The start time makes a
// recycled pid harmless: a new process with the same pid has another start
// time, so its leftovers are not mistaken for a live owner's.
type Owner struct {
	Boot      string
	PID       int
	StartTime uint64 // clock ticks since boot, field 22 of /proc/PID/stat
}

func (o Owner) String() string {
	return fmt.Sprintf("%s%s-%d-%d", ownerPrefix, o.Boot, o.PID, o.StartTime)
}

// ParseOwner parses a token made by Owner.String.
func ParseOwner(token string) (Owner, error) {
	rest, ok := strings.CutPrefix(token, ownerPrefix)
	if !ok {
		return Owner{}, fmt.Errorf("owner token %q: missing prefix %q", token, ownerPrefix)
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || parts[0] == "" {
		return Owner{}, fmt.Errorf("owner token %q: want %sBOOT-PID-START", token, ownerPrefix)
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("owner token %q: bad pid", token)
	}
	st, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return Owner{}, fmt.Errorf("owner token %q: bad start time", token)
	}
	return Owner{Boot: parts[0], PID: pid, StartTime: st}, nil
}

var (
	selfOnce sync.Once
	self     Owner
	selfErr  error
)

// Self returns this process's owner identity.
func Self() (Owner, error) {
	selfOnce.Do(func() {
		boot, err := bootID()
		if err != nil {
			selfErr = err
			return
		}
		st, err := startTime(os.Getpid())
		if err != nil {
			selfErr = err
			return
		}
		self = Owner{Boot: boot, PID: os.Getpid(), StartTime: st}
	})
	return self, selfErr
}

// Alive reports whether the process that owns token still runs. A malformed
// token or one from an earlier boot is dead. Processes in another pid
// namespace look dead too: the README names that limitation.
func Alive(token string) bool {
	o, err := ParseOwner(token)
	if err != nil {
		return false
	}
	boot, err := bootID()
	if err != nil || boot != o.Boot {
		return false
	}
	st, err := startTime(o.PID)
	return err == nil && st == o.StartTime
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
	if len(id) > 12 {
		id = id[:12]
	}
	return id, nil
}

func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after the last ')' are fixed.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat of pid %d", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse stat of pid %d: %d fields", pid, len(fields))
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse start time of pid %d: %w", pid, err)
	}
	return v, nil
}
