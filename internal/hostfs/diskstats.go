package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysBlock is where the kernel lists block devices' statistics.
var sysBlock = "/sys/block"

// WrittenBytes returns how many bytes the block device (/dev/NAME, a
// whole disk as DeviceOf returns) has written since boot: the sectors
// written field of /sys/block/NAME/stat, in the kernel's 512-byte
// sectors whatever the device's own sector size. Every writer of the
// device counts, so a caller that attributes a difference to one action
// takes it over a short window, and more than once.
func WrittenBytes(dev string) (int64, error) {
	name := filepath.Base(dev)
	b, err := os.ReadFile(filepath.Join(sysBlock, name, "stat"))
	if err != nil {
		return 0, fmt.Errorf("written bytes of %s: %w", dev, err)
	}
	f := strings.Fields(string(b))
	// Documentation/block/stat.rst: field 7 is sectors written.
	if len(f) < 7 {
		return 0, fmt.Errorf("written bytes of %s: %d fields in its stat, want at least 7", dev, len(f))
	}
	n, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("written bytes of %s: %w", dev, err)
	}
	return n * 512, nil
}
