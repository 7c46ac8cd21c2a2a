package engine

import (
	"errors"
	"fmt"
)

// ErrUnreachable is wrapped by every error that means the engine could not
// be reached at all (no socket, connection refused, no answer in time).
var ErrUnreachable = errors.New("docker engine unreachable")

// ErrImageNotFound is wrapped when a user-named probe image is not present
// on the engine (layerprobe never pulls).
var ErrImageNotFound = errors.New("probe image not found")

// UnreachableError is the one-line error for an engine that cannot be
// reached; it is ErrUnreachable. The clients' own messages span several
// lines of hints.
type UnreachableError struct {
	Runtime  string // "Docker engine", "containerd"
	Endpoint string
	Cause    string
	Err      error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s at %s: %s", e.Runtime, e.Endpoint, e.Cause)
}

// Is makes errors.Is(err, ErrUnreachable) hold.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }
func (e *UnreachableError) Unwrap() error        { return e.Err }
