//go:build !linux

package resident

import (
	"fmt"
	"runtime"
)

// TrimExecutable is Linux's (madvise, fadvise); elsewhere it says so.
func TrimExecutable() (Trimmed, error) {
	return Trimmed{}, fmt.Errorf("trim executable: not supported on %s", runtime.GOOS)
}
