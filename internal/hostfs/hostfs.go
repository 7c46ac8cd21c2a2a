// Package hostfs holds the host-side file system facts layerprobe relies on:
// whether two paths live on the same file system, its name and block device,
// how much space is free, who owns a leftover (owner tokens) and the
// host-wide cycle lock.
package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// SameFilesystem reports whether a and b are on the same file system, in
// the sense that matters here: writes to either land on the same devices.
//
// Equal st_dev is the common case. btrfs gives every subvolume, and zfs
// every dataset, its own st_dev, so when the devices differ the paths are
// compared by the mount that holds them (source and file system type from
// /proc/self/mountinfo): two subvolumes of one btrfs, or two datasets of one
// zpool, are the same file system; a second disk mounted under the data
// root is not.
func SameFilesystem(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	if sa.Dev == sb.Dev {
		return true, nil
	}
	ma, err := MountOf(a)
	if err != nil {
		return false, err
	}
	mb, err := MountOf(b)
	if err != nil {
		return false, err
	}
	return sameStorage(ma, mb), nil
}

// sameStorage decides for two mounts with different st_dev. A btrfs
// subvolume has its own st_dev but shares the mount's source device. A zfs
// mount's source is its dataset, <pool>/<path>: moby's zfs driver makes
// every image and container layer a dataset of its own under the parent
// dataset, mounted below <data root>/zfs/graph, and all datasets of a pool
// write to the pool's devices. Other file systems with differing st_dev are
// different.
func sameStorage(a, b *mountinfo.Info) bool {
	if a.FSType != b.FSType || a.Source == "" {
		return false
	}
	switch a.FSType {
	case "btrfs":
		return a.Source == b.Source
	case "zfs":
		return Zpool(a.Source) == Zpool(b.Source)
	}
	return false
}

// Zpool is the pool of a zfs dataset name: "rpool" for
// "rpool/var/lib/docker/3f2a...".
func Zpool(dataset string) string {
	pool, _, _ := strings.Cut(dataset, "/")
	return pool
}

// InZpool reports whether path is on a zfs dataset of pool: where the zfs
// driver keeps an engine's layers, whatever file system holds its data root
// (the zfs.fsname option may put the parent dataset anywhere).
func InZpool(path, pool string) (bool, error) {
	m, err := MountOf(path)
	if err != nil {
		return false, err
	}
	return mountInZpool(m, pool), nil
}

func mountInZpool(m *mountinfo.Info, pool string) bool {
	return pool != "" && m.FSType == "zfs" && Zpool(m.Source) == pool
}

// MountOf returns the mount holding path, from /proc/self/mountinfo: the
// one with the longest mount point above path and, of several stacked on
// that point, the most recent.
func MountOf(path string) (*mountinfo.Info, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(p))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var best *mountinfo.Info
	for _, m := range mounts {
		if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no mount holds %s", p)
	}
	return best, nil
}

// Space is the free space of a file system, in bytes.
type Space struct {
	Total uint64 // size of the file system
	Avail uint64 // available to unprivileged writers
}

// FreeSpace reports the space of the file system holding path.
func FreeSpace(path string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize) //nolint:gosec // block size is positive
	return Space{Total: st.Blocks * bs, Avail: st.Bavail * bs}, nil
}

// ClearDir removes everything inside dir, keeping dir itself. It is used
// after a job on the host and bind targets: fio unlinks its files on success,
// this catches what a failed or killed job left.
func ClearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SweepScratch removes the per-owner directories in scratch whose owner is no
// longer alive. Only entries named like an owner token are touched, so a
// mistaken scratch_dir cannot make layerprobe delete foreign files.
func SweepScratch(scratch string, alive func(owner string) bool) ([]string, error) {
	entries, err := os.ReadDir(scratch)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read scratch dir %s: %w", scratch, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, ownerPrefix) {
			continue
		}
		if _, err := ParseOwner(name); err != nil {
			continue
		}
		if alive != nil && alive(name) {
			continue
		}
		p := filepath.Join(scratch, name)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
