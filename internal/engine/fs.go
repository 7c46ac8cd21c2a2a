package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fsNames maps statfs f_type magic numbers to the names Docker uses for
// them in "Backing Filesystem" (moby's fsutils/graphdriver FsNames), so a
// backing file system found by statfs reads the same as one the engine
// reported.
var fsNames = map[int64]string{
	0x61756673: "aufs",
	0x9123683e: "btrfs",
	0x00c36400: "ceph",
	0xff534d42: "cifs",
	0x28cd3d45: "cramfs",
	0x0000f15f: "ecryptfs",
	0xe0f5e1e2: "erofs",
	0x0000ef53: "extfs", // ext2, ext3 and ext4 share the magic
	0xf2f52010: "f2fs",
	0x65735546: "fuse",
	0x47504653: "gpfs",
	0x000072b6: "jffs2",
	0x3153464a: "jfs",
	0x00006969: "nfs",
	0x794c7630: "overlayfs",
	0x858458f6: "ramfs",
	0x52654973: "reiserfs",
	0x0000517b: "smb",
	0xfe534d42: "smb2",
	0x73717368: "squashfs",
	0x01021994: "tmpfs",
	0xa501fcf5: "vxfs",
	0x58465342: "xfs",
	0x2fc12fc1: "zfs",
}

// FSName names the file system holding path the way Docker does ("extfs"
// for ext2/3/4, "xfs", "btrfs", "zfs", "tmpfs", "overlayfs", "nfs", "fuse",
// ...); an unknown magic number yields "unknown(0x...)".
func FSName(path string) (string, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", path, err)
	}
	// f_type is a 32-bit magic in a field whose width and signedness vary
	// by architecture.
	magic := int64(uint32(st.Type))
	if name, ok := fsNames[magic]; ok {
		return name, nil
	}
	return fmt.Sprintf("unknown(%#x)", magic), nil
}

// DeviceOf returns the block device (/dev/NAME) holding path, as the whole
// disk: cgroup v1 blkio throttling accepts only whole disks, and tests use
// this to throttle the data root's device. File systems that report an
// anonymous device number (btrfs) are looked up by their mount source.
func DeviceOf(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	if dev, err := blockDevice(uint64(st.Dev)); err == nil {
		return dev, nil
	}
	src, err := mountSource(path)
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	var sst syscall.Stat_t
	if err := syscall.Stat(src, &sst); err != nil || sst.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return "", fmt.Errorf("device of %s: mount source %s is not a block device", path, src)
	}
	dev, err := blockDevice(uint64(sst.Rdev))
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	return dev, nil
}

// blockDevice maps a device number to /dev/NAME of its whole disk through
// /sys/dev/block.
func blockDevice(dev uint64) (string, error) {
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	sys, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return "", fmt.Errorf("no block device %d:%d: %w", major, minor, err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys) // a partition's directory sits in its disk's
	}
	name := "/dev/" + filepath.Base(sys)
	var st syscall.Stat_t
	if err := syscall.Stat(name, &st); err != nil {
		return "", fmt.Errorf("block device %d:%d: %w", major, minor, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFBLK {
		return "", fmt.Errorf("%s is not a block device", name)
	}
	return name, nil
}

// mountSource returns the source of the mount holding path, from
// /proc/self/mountinfo.
func mountSource(path string) (string, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	best, source := "", ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(postFields) < 2 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, source = mp, unescapeMountinfo(postFields[1])
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if best == "" {
		return "", errors.New("no mount found")
	}
	return source, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
