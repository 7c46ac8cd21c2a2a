// Command layerprobe measures how much slower storage is inside Docker
// containers (writable layer, bind mounts, named volumes) than on the host.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/layerprobe/layerprobe/internal/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and something failed
	exitUsage   = 2 // bad flags or an invalid configuration
)

// usageError marks errors that are the caller's to fix (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// silentError carries an exit code for a failure already reported in the
// command's output.
type silentError struct{ code int }

func (s silentError) Error() string { return fmt.Sprintf("exit status %d", s.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var s silentError
	if errors.As(err, &s) {
		return s.code
	}
	fmt.Fprintln(os.Stderr, "layerprobe:", err)
	var u usageError
	if errors.As(err, &u) || errors.Is(err, config.ErrInvalid) {
		return exitUsage
	}
	return exitFailure
}
