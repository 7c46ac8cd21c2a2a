package engine

import (
	"context"
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

// Reach is how an engine client tells an engine it could not reach from
// one that answered with an error. Only the transport's way of saying
// "no connection" differs between the clients; the rest is the same for
// every engine.
type Reach struct {
	Name     string // the configured engine's name
	Runtime  string // "Docker engine", "containerd"
	Endpoint string
	// NoConnection tells whether err is the client's failure to connect.
	NoConnection func(err error) bool
	// Cause names, in a few words, why the client could not connect: the
	// clients' own messages are paragraphs, or drop the reason.
	Cause func(err error) string
}

// Unreachable returns an UnreachableError when err means the engine could
// not be reached: no connection, or no answer before the deadline. It is
// nil for any other error, and for a cancelled context: a caller that gave
// up is not an engine that is down.
func (r Reach) Unreachable(err error) error {
	if err == nil {
		return nil
	}
	var u *UnreachableError
	if errors.As(err, &u) {
		return u
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &UnreachableError{Runtime: r.Runtime, Endpoint: r.Endpoint, Cause: "no answer before the deadline", Err: err}
	case errors.Is(err, context.Canceled):
		return nil
	case r.NoConnection != nil && r.NoConnection(err):
		cause := "no connection"
		if r.Cause != nil {
			cause = r.Cause(err)
		}
		return &UnreachableError{Runtime: r.Runtime, Endpoint: r.Endpoint, Cause: cause, Err: err}
	}
	return nil
}

// Fail wraps err with the operation's name; an engine that cannot be
// reached is reported as such, in one line, and any other error names the
// engine.
func (r Reach) Fail(op string, err error) error {
	if u := r.Unreachable(err); u != nil {
		return fmt.Errorf("%s: %w", op, u)
	}
	return fmt.Errorf("%s on engine %s: %w", op, r.Name, err)
}
