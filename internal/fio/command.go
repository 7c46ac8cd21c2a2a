package fio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Command returns the full argv (argv[0] is binary) that runs job with its
// files in directory dir.
//
// The builder adds JSON output, no ETA lines (they would corrupt the JSON
// stream on a TTY), the job name (the workload), the directory, unlink=1 so
// fio removes its files after the job, and kb_base=1024 so "4k" means 4096
// bytes whatever the fio version's default. The job's own options follow,
// each as --<opt>. Nothing is validated: profiles are compiled in and
// trusted, and Command never adds filename, exec_prerun or exec_postrun.
//
// dir must be a directory the agent owns and created for this run: fio
// creates, overwrites and unlinks files named after the job in it. fio reads
// ':' in a directory as a separator between several directories, so Command
// escapes every ':' in dir as `\:`, fio's own escape.
//
// Stopping fio: by default fio forks each job into a process of its own
// session (setsid), so SIGKILL to fio or to its process group would leave
// the job process writing until its runtime ends (verified with fio 3.33).
// Command therefore adds --thread: jobs are threads of the one fio process,
// and a SIGKILL (or the parent-death signal) stops all of them. Send SIGTERM
// first anyway: fio then stops its jobs, unlinks their files, prints partial
// JSON and exits 128, which Parse reports as measure.ReasonCrashed (prefer the
// context's reason).
func Command(binary string, job Job, dir string) []string {
	argv := make([]string, 0, 8+len(job.Options))
	argv = append(argv,
		binary,
		"--output-format=json",
		"--eta=never",
		"--name="+string(job.Workload),
		"--directory="+strings.ReplaceAll(dir, ":", `\:`),
		"--unlink=1",
		"--kb_base=1024",
		"--thread",
	)
	for _, opt := range job.Options {
		argv = append(argv, "--"+opt)
	}
	return argv
}

// Version runs `binary --version` and returns what fio prints, e.g.
// "fio-3.33". A missing or non-executable binary gives an error that names
// it and wraps the exec error, so FailureFromRunError classifies it as
// measure.ReasonFioMissing.
func Version(ctx context.Context, binary string) (string, error) {
	cmd := exec.CommandContext(ctx, binary, "--version")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("fio version of %q: %w", binary, ctxErr)
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("fio version of %q: %w: %s", binary, err, trimMessage(msg))
		}
		return "", fmt.Errorf("fio version of %q: %w", binary, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "fio-") {
		return "", fmt.Errorf("fio version of %q: %w: unexpected output %q", binary, errNotFio, trimMessage(line))
	}
	return line, nil
}

// errNotFio is wrapped when a binary answers --version with something that
// is not a fio version.
var errNotFio = errors.New("not a fio binary")
