package fio

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// FailureFromRunError classifies an error from starting or waiting for fio
// (or from Version) as a measure.Failure; nil for a nil error.
//
//   - context.DeadlineExceeded: ReasonTimeout; context.Canceled:
//     ReasonCanceled. exec.CommandContext reports a killed process as an
//     *exec.ExitError ("signal: killed"), not as the context error, so a
//     caller whose context is done should pass ctx.Err() (or join it).
//   - exec.ErrNotFound, fs.ErrNotExist, fs.ErrPermission: ReasonFioMissing
//     (binary absent or not executable).
//   - *exec.ExitError (fio ran and died, e.g. from a signal): ReasonCrashed.
//     A non-zero exit with output is better handled by Parse.
//   - anything else: ReasonExec.
//
// The reasons are measure's.
func FailureFromRunError(err error) *measure.Failure {
	if err == nil {
		return nil
	}
	msg := trimMessage(err.Error())
	var exitErr *exec.ExitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &measure.Failure{Reason: measure.ReasonTimeout, Message: msg}
	case errors.Is(err, context.Canceled):
		return &measure.Failure{Reason: measure.ReasonCanceled, Message: msg}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return &measure.Failure{Reason: measure.ReasonFioMissing, Message: msg}
	case errors.As(err, &exitErr):
		return &measure.Failure{Reason: measure.ReasonCrashed, Message: msg}
	}
	return &measure.Failure{Reason: measure.ReasonExec, Message: msg}
}
