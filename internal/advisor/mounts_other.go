//go:build !linux

package advisor

import (
	"fmt"
	goruntime "runtime"
)

// mounts has no cgroup file systems to find where there are no Linux
// cgroups (darwin, whose engines run in a VM): the advisor's per-container
// block I/O counters are the VM's there.
func (c cgroups) mounts() (v1, v2 string, err error) {
	return "", "", fmt.Errorf("cgroup block I/O accounting is not supported on %s", goruntime.GOOS)
}
