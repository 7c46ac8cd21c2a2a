package advisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/internal/hostfs"
)

// devices names block devices the way the cgroup files do ("major:minor"
// of the whole disk), by way of /sys, so it needs no /dev (the hardened
// systemd unit has a private one without block devices).
type devices struct {
	sysRoot string // /sys
}

// of returns the whole disk holding path. A file system with an anonymous
// device number (btrfs, overlay) is looked up by its mount's source. Only
// the top of a stack is named: a container's writes reach the disk under a
// loop or device-mapper device too, and cgroups count them on both.
func (d devices) of(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	if dev, err := d.disk(fmt.Sprintf("%d:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))); err == nil {
		return dev, nil
	}
	m, err := hostfs.MountOf(path)
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	if !strings.HasPrefix(m.Source, "/dev/") {
		return "", fmt.Errorf("device of %s: mount source %q is not a device", path, m.Source)
	}
	b, err := os.ReadFile(filepath.Join(d.sysRoot, "class", "block", filepath.Base(m.Source), "dev"))
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	return d.disk(strings.TrimSpace(string(b)))
}

// disk maps major:minor to its whole disk's major:minor: cgroups count per
// disk, not per partition.
func (d devices) disk(majmin string) (string, error) {
	sys, err := filepath.EvalSymlinks(filepath.Join(d.sysRoot, "dev", "block", majmin))
	if err != nil {
		return "", fmt.Errorf("no block device %s: %w", majmin, err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	b, err := os.ReadFile(filepath.Join(sys, "dev"))
	if err != nil {
		return "", fmt.Errorf("block device %s: %w", majmin, err)
	}
	return strings.TrimSpace(string(b)), nil
}
