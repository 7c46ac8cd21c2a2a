package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
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
	m, err := MountOf(path)
	if err != nil {
		return "", fmt.Errorf("device of %s: %w", path, err)
	}
	src := m.Source
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
