package hostfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Reflink reports whether the file system holding dir can share extents
// between files (FICLONE: btrfs, xfs with reflink=1, bcachefs, ...). On such a
// file system overlayfs copies a file up by cloning it, so copy-up costs
// little whatever the file's size. The answer comes from trying: a clone of
// a one-page file in dir, removed again. Only "not supported" answers
// false; any other failure is an error.
func Reflink(dir string) (bool, error) {
	src, err := os.CreateTemp(dir, ".layerprobe-reflink-*")
	if err != nil {
		return false, fmt.Errorf("reflink check: %w", err)
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.Write(make([]byte, 4096)); err != nil {
		return false, fmt.Errorf("reflink check: %w", err)
	}
	dst, err := os.CreateTemp(dir, ".layerprobe-reflink-*")
	if err != nil {
		return false, fmt.Errorf("reflink check: %w", err)
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL),
		errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOSYS):
		// EINVAL: ext4 and others reject the ioctl itself on some kernels.
		return false, nil
	}
	return false, fmt.Errorf("reflink check in %s: %w", filepath.Clean(dir), err)
}
