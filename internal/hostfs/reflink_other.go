//go:build !linux

package hostfs

import (
	"fmt"
	"runtime"
)

// Reflink is Linux's FICLONE check; where there is no FICLONE (darwin's
// clonefile is another call, and the layers are in a VM there anyway) it
// says so.
func Reflink(dir string) (bool, error) {
	return false, fmt.Errorf("reflink check in %s: not supported on %s", dir, runtime.GOOS)
}
