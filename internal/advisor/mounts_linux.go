//go:build linux

package advisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// mounts finds the mount points of the v1 blkio hierarchy and of the v2
// hierarchy when it has the io controller.
func (c cgroups) mounts() (v1, v2 string, err error) {
	f, err := os.Open(filepath.Join(c.procRoot, "self", "mountinfo"))
	if err != nil {
		return "", "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	ms, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (bool, bool) {
		return m.FSType != "cgroup" && m.FSType != "cgroup2", false
	})
	if err != nil {
		return "", "", fmt.Errorf("read mountinfo: %w", err)
	}
	for _, m := range ms {
		switch m.FSType {
		case "cgroup":
			if slices.Contains(strings.Split(m.VFSOptions, ","), "blkio") && v1 == "" {
				v1 = m.Mountpoint
			}
		case "cgroup2":
			if ctl, err := os.ReadFile(filepath.Join(m.Mountpoint, "cgroup.controllers")); err == nil &&
				slices.Contains(strings.Fields(string(ctl)), "io") && v2 == "" {
				v2 = m.Mountpoint
			}
		}
	}
	return v1, v2, nil
}
