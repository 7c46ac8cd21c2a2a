package fio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Execution says how a command treats the job's file.
type Execution int

// Executions.
const (
	// Fresh lays out a new file, runs the job once and removes the file
	// (fio's unlink=1): the seed article's way, and the cold probe's, whose
	// point is a file that did not exist a moment ago.
	Fresh Execution = iota
	// Steady runs one short, bounded execution on the file Layout wrote,
	// and keeps it for the next execution.
	Steady
	// Layout writes the job's file in full (1 MiB writes, then fsync), so
	// that every later Steady execution overwrites allocated, written
	// blocks on every target alike.
	Layout
)

// FileName is the name of a job's file in its directory: the same name on
// every target, each target in a directory of its own.
func FileName(w measure.Workload) string { return RoundFileName(w, 0) }

// RoundFileName is the name of a job's file number k (Job.FilePerRound):
// file 0 is FileName, file k > 0 is <workload>.<k>.dat.
func RoundFileName(w measure.Workload, k int) string {
	if k <= 0 {
		return string(w) + ".dat"
	}
	return string(w) + "." + strconv.Itoa(k) + ".dat"
}

// Command returns the full argv (argv[0] is binary) that runs job with its
// file number k (RoundFileName; 0 but for a job with FilePerRound, which
// lays out and measures file k in round k) in directory dir, as how says.
//
// The builder adds JSON output with latency histograms (json+), no ETA
// lines (they would corrupt the JSON stream on a TTY), the job name (the
// workload), the directory and kb_base=1024 so "4k" means 4096 bytes
// whatever the fio version's default. The job's own options follow, each as
// --<opt>, and for jobs with time and byte bounds (Job.Runtime) the size,
// byte cap, runtime, ramp and clones that Job describes. Nothing is
// validated: profiles are compiled in and trusted, and Command never adds
// exec_prerun or exec_postrun; the only file it names is RoundFileName.
//
// dir must be a directory the agent owns and created for this measurement:
// fio creates, overwrites and (Fresh) unlinks files in it. fio reads ':' in
// a directory as a separator between several directories, so Command
// escapes every ':' in dir as `\:`, fio's own escape.
//
// Stopping fio: by default fio forks each job into a process of its own
// session (setsid), so SIGKILL to fio or to its process group would leave
// the job process writing until its runtime ends (verified with fio 3.33).
// Command therefore adds --thread: jobs are threads of the one fio process,
// and a SIGKILL (or the parent-death signal) stops all of them. Send SIGTERM
// first anyway: fio then stops its jobs, prints partial JSON and exits 128,
// which Parse reports as measure.ReasonCrashed (prefer the context's
// reason).
//
// --clocksource=clock_gettime: fio's default on x86 with an invariant TSC
// is its own CPU clock, which it calibrates at every start by spinning on
// the clock. A measurement runs fio hundreds of times, so that calibration
// was a large share of fio's CPU time (docs/methodology.md, "Short
// executions"). clock_gettime(CLOCK_MONOTONIC) through the vDSO needs no
// calibration and costs tens of nanoseconds more per timestamp, nothing
// beside the microseconds of an I/O.
func Command(binary string, job Job, dir string, how Execution, k int) []string {
	argv := make([]string, 0, 16+len(job.Options))
	argv = append(argv,
		binary,
		"--output-format=json+",
		"--eta=never",
		"--directory="+strings.ReplaceAll(dir, ":", `\:`),
		"--kb_base=1024",
		"--thread",
		"--clocksource=clock_gettime",
	)
	if how == Layout {
		return append(argv,
			"--name="+string(job.Workload)+"-layout",
			"--filename="+RoundFileName(job.Workload, k),
			"--rw=write", "--bs=1M", "--ioengine=psync",
			"--size="+strconv.FormatInt(job.FileBytes, 10),
			"--end_fsync=1", "--unlink=0",
		)
	}
	argv = append(argv, "--name="+string(job.Workload))
	if how == Steady {
		argv = append(argv, "--filename="+RoundFileName(job.Workload, k), "--unlink=0")
	} else {
		argv = append(argv, "--unlink=1")
	}
	if job.Runtime > 0 {
		// Bounded by time and bytes, whichever comes first: without
		// time_based fio stops at the io_size cap or at runtime. Ramp I/O
		// counts towards io_size, so the cap bounds what is written.
		argv = append(argv,
			"--size="+strconv.FormatInt(job.FileBytes, 10),
			"--io_size="+strconv.FormatInt(job.ioSize(), 10),
			"--runtime="+strconv.FormatInt(max(job.Runtime.Milliseconds(), 1), 10)+"ms",
		)
		if how == Steady && job.Ramp > 0 {
			argv = append(argv, "--ramp_time="+strconv.FormatInt(job.Ramp.Milliseconds(), 10)+"ms")
		}
		if job.clones() > 1 {
			argv = append(argv, "--numjobs="+strconv.Itoa(job.clones()), "--group_reporting=1")
		}
	}
	for _, opt := range job.Options {
		argv = append(argv, "--"+opt)
	}
	return argv
}

// HelperCommand returns the argv that runs a helper job (Job.Helper) in
// directory dir: the probe helper's smallfiles verb of helper, the
// layerprobe binary, with the job's files and byte cap. Its flags are
// fio's where they mean the same (--name, --directory), so that what
// reads fio commands reads this one too. Like Command it takes nothing
// but the compiled-in job and an agent-owned directory.
func HelperCommand(helper string, job Job, dir string) []string {
	argv := []string{helper, "probe-helper", "smallfiles",
		"--name=" + string(job.Workload), "--directory=" + dir, "--files=" + strconv.Itoa(job.Files)}
	if job.IOBytes > 0 {
		argv = append(argv, "--max-bytes="+strconv.FormatInt(job.IOBytes, 10))
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
