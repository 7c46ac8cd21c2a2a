//go:build !linux

package cgroup

import (
	"fmt"
	"runtime"
)

// errUnsupported is what Of and Join answer where there are no Linux
// cgroups (darwin): the engine runs in a VM there, and its containers'
// cgroups are the VM's, out of the host's reach.
var errUnsupported = fmt.Errorf("cgroups are not supported on %s: the engine's containers run in a VM whose cgroups this host cannot join", runtime.GOOS)

// Of reports that cgroups cannot be joined on this system.
func Of(int, string) ([]string, error) { return nil, errUnsupported }

// Join reports that cgroups cannot be joined on this system.
func Join([]string) error { return errUnsupported }
