// Package fio holds layerprobe's built-in fio workload profiles, builds fio
// command lines from them and parses fio's JSON output into the data
// model's job results (measure.JobResult).
//
// No user input ever reaches a fio command line: profiles are compiled in and
// the only variable part of a command is the directory, which the caller
// derives from agent-owned paths.
package fio

import (
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Profile is a fixed, built-in set of fio jobs plus how many rounds a
// `layerprobe run` makes by default.
type Profile struct {
	Name          string
	Description   string
	DefaultRounds int
	Jobs          []Job
}

// Job is one built-in fio job of a profile.
type Job struct {
	Workload measure.Workload
	// Options are fio command-line options (without the leading "--") that
	// define the job, e.g. "rw=randwrite". They never contain filename,
	// directory, output or exec options: the builder adds those.
	Options []string
	// FileBytes is the size of the file(s) the job lays out on the target:
	// the free-space check needs at least this much (plus a margin).
	FileBytes int64
	// Timeout bounds one execution of the job, including layout.
	Timeout time.Duration
}
