//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
	"runtime"
)

// errUnsupported is what Of, Join and Enter answer where there are no
// Linux cgroups (darwin): the engine runs in a VM there, and its
// containers' cgroups are the VM's, out of the host's reach.
var errUnsupported = fmt.Errorf("cgroups are not supported on %s: the engine's containers run in a VM whose cgroups this host cannot join", runtime.GOOS)

// ErrNamespace marks the errors of Of that come from a cgroup namespace
// (Linux only).
var ErrNamespace = errors.New("private cgroup namespace")

// Target is what the host arm joins (Linux only).
type Target struct {
	Dirs      []string
	Namespace string
}

// Of reports that cgroups cannot be joined on this system.
func Of(int, string) (Target, error) { return Target{}, errUnsupported }

// Join reports that cgroups cannot be joined on this system.
func Join([]string) error { return errUnsupported }

// Enter reports that there are no cgroup namespaces on this system.
func Enter(string) error { return errUnsupported }

// PrivateNamespace is false where there are no cgroup namespaces.
func PrivateNamespace() bool { return false }
