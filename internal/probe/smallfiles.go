package probe

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// executeHelper runs a job of the probe helper (fio.Job.Helper: the
// smallfiles workload) on target, as execute runs a fio job: the same
// directory, the same cgroups for the host arm, the same parser. The job
// has no file to lay out, and it removes its own tree; what a killed
// execution leaves, the end of the measurement removes with the job files.
func (s *Session) executeHelper(ctx context.Context, p *engine.Probe, target measure.Target, job fio.Job, how fio.Execution) measure.JobResult {
	if how == fio.Layout {
		return measure.JobResult{Workload: job.Workload}
	}
	jctx, cancel := context.WithTimeout(ctx, s.jobTimeout(job))
	defer cancel()
	if target == measure.TargetHost {
		bin, err := s.helperBinary()
		if err != nil {
			return measure.JobResult{Failure: &measure.Failure{Reason: measure.ReasonExec, Message: "locate the layerprobe binary for the host arm: " + err.Error()}}
		}
		stdout, stderr, code, err := runHost(jctx, s.hostArgv(fio.HelperCommand(bin, job, s.hostDir)))
		return resultOf(jctx, job, fio.Steady, stdout, stderr, code, err)
	}
	out, err := s.eng.Exec(jctx, p, fio.HelperCommand(engine.ContainerHelper, job, s.containerDir(target)))
	return resultOf(jctx, job, fio.Steady, out.Stdout, out.Stderr, out.ExitCode, err)
}

// helperBinary is the program that runs the host arm of a helper job.
func (s *Session) helperBinary() (string, error) {
	if s.opts.HelperBinary != "" {
		return s.opts.HelperBinary, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	// A Go test binary given the helper's arguments would run its own
	// tests again, each starting more: a test that forgot to set
	// Options.HelperBinary fails its job instead.
	if strings.HasSuffix(self, ".test") {
		return "", fmt.Errorf("%s is a test binary, not layerprobe: set the session's HelperBinary", self)
	}
	return self, nil
}
