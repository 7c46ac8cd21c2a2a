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
	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

// Profile is a fixed, built-in set of fio jobs and how a measurement runs
// them.
type Profile struct {
	Name        string
	Description string
	Jobs        []Job
	// Steady profiles keep one file per job and target for the whole
	// measurement: laid out once (Layout), then overwritten by every
	// execution, so that every target measures the same steady state and
	// no execution pays for layout, allocation or ext4's conversion of
	// unwritten extents (which alone can make a fresh file markedly slower:
	// docs/methodology.md, "The file state is the same on every target").
	// Their executions are short and bounded by time and bytes
	// (Job.Runtime, Job.IOBytes). A profile that is not steady lays out a
	// fresh file for every execution and removes it afterwards, as the
	// seed article's commands do.
	Steady bool
	// DefaultRounds is the number of rounds a measurement makes when none
	// is configured; 0 means adaptive: rounds go on until every headline
	// interval is as narrow as asked or the byte budget is spent (see
	// probe.Plan). MinRounds is the fewest rounds of each job an adaptive
	// measurement makes before it may stop.
	DefaultRounds int
	MinRounds     int
}

// Job is one built-in fio job of a profile.
type Job struct {
	Workload measure.Workload
	// Options are fio command-line options (without the leading "--") that
	// define the job's I/O, e.g. "rw=randwrite". They never contain
	// filename, directory, output or exec options: the builder adds those.
	// A steady profile's options hold no size, runtime or numjobs either:
	// the builder derives them from the fields below.
	Options []string
	// FileBytes is the size of the job's file on each target (shared by
	// its clones): the free-space check needs at least this much (plus a
	// margin), and a steady profile lays out this many bytes per target.
	FileBytes int64
	// Clones is the number of threads running the job at once, each with
	// its own queue (fio's numjobs; 0 means 1). They share one file and
	// fio reports them as one (group_reporting).
	Clones int
	// Runtime bounds the measured part of one execution of a steady job,
	// Ramp the warm-up before it, whose I/O is done but not counted (fio's
	// ramp_time): the first I/Os after fio opens a file pay for set-up
	// that has nothing to do with the storage path.
	//
	// No sequential job may have a ramp and an IOBytes beyond its file
	// (TestCommand): fio 3.33 then ends the execution at the end of the
	// pass over the file under way when the ramp ends, so that it measures
	// a part of one pass or nothing (docs/methodology.md, "Short
	// executions"). Random jobs keep their full runtime, and a sequential
	// job that does not wrap its file is not affected.
	Runtime, Ramp time.Duration
	// IOBytes bounds the bytes one execution of a steady job writes or
	// reads, ramp included, over all clones: on a fast device an execution
	// stops here before Runtime, so that no device can make a round
	// expensive.
	IOBytes int64
	// Timeout bounds one execution of the job, including layout.
	Timeout time.Duration
	// FilePerRound gives each round of a steady job a file of its own on
	// every target, laid out just before the round and kept until the
	// measurement ends, instead of one file for the whole measurement.
	// Where a file's blocks lie on the device is fixed once it is laid
	// out, and for 1 MiB direct sequential writes it matters: files laid
	// out side by side differ in their mean write latency about as much as
	// one execution's noise. With one file per target a measurement's
	// seqwrite ratio carried a fixed placement error its interval could
	// not see: default runs spread between them well beyond what their
	// intervals promised, and so did randwrite's on a disk fast at random
	// writes (docs/methodology.md, "Sequential and random writes get a
	// file per round"). A file per round makes placement vary from round
	// to round, so the rounds stay independent and the interval includes
	// it. The files are kept because ext4 hands a
	// removed file's blocks to the next file of the same size: removing
	// and laying out again gave the same placement every time.
	FilePerRound bool
	// RotateFiles, above 1, gives a steady job that many files of its own
	// on every target, used in turn: a target's k-th execution (from 0)
	// uses file k mod RotateFiles, laid out just before the execution
	// that uses it first (file 0 at the start, as every job's), and kept
	// until the measurement ends. It is FilePerRound for a job whose
	// executions write little beside their file: where a file lies moves
	// its figures a little, and with one file per target that error is
	// fixed for a whole measurement and outside its interval; spread over
	// RotateFiles files it shrinks as 1/√RotateFiles, and the rounds'
	// spread shows it, for RotateFiles-1 layouts per target instead of
	// one per round. Host and the container run every round, so in every
	// round both use their file of the same number: both fresh, or both
	// reused as often. Not with FilePerRound.
	RotateFiles int
	// InFlightRate makes an execution's write rate its bytes over
	// the summed latency of its writes, the time they were in flight,
	// instead of over fio's runtime, which fio reports in whole
	// milliseconds: an 8 MiB sequential execution at 800 MB/s lasts about
	// 10 ms, so whole milliseconds would quantize its rate in steps of
	// 10%, and the A/A target, which writes the host's file system, would
	// read exactly 0 in most rounds. Only for a job of one thread at
	// queue depth 1 that only writes: one write is in flight at a time,
	// so the summed latency is the execution's time less fio's own work
	// between writes (microseconds against a millisecond per 1 MiB
	// write). An execution whose summed latency exceeds its runtime was
	// not one write at a time, and keeps fio's figures.
	InFlightRate bool
	// Files, when positive, makes the job layerprobe's own small-file
	// workload (package smallfiles) instead of a fio job: the probe
	// helper creates, writes, stats and deletes a tree of this many files
	// (HelperCommand) and prints its figures in fio's JSON shape. Options,
	// Clones, Runtime, Ramp and FilePerRound do not apply; IOBytes caps
	// the files' bytes (the helper leaves out the files beyond it), and
	// there is no layout.
	Files int
}

// Helper reports whether the probe helper, not fio, runs the job.
func (j Job) Helper() bool { return j.Files > 0 }

// FileOf is the number of the file (RoundFileName) that a target's k-th
// execution of a steady job (from 0) measures: k for a job with a file
// per round, k mod RotateFiles for one that rotates its files, 0 for a
// job with one file.
func (j Job) FileOf(k int) int {
	switch {
	case j.FilePerRound:
		return k
	case j.RotateFiles > 1:
		return k % j.RotateFiles
	}
	return 0
}

// LayoutFiles is how many files a steady measurement lays out on a target
// that runs n executions of the job (at least the one laid out at the
// start): FileOf's distinct numbers over k < n.
func (j Job) LayoutFiles(n int) int {
	n = max(n, 1)
	switch {
	case j.FilePerRound:
		return n
	case j.RotateFiles > 1:
		return min(n, j.RotateFiles)
	}
	return 1
}

// clones returns the job's clone count, at least 1.
func (j Job) clones() int { return max(j.Clones, 1) }

// ioSize is fio's io_size for one clone of a bounded job: IOBytes shared
// among the clones, at least one 4 KiB block.
func (j Job) ioSize() int64 { return max(j.IOBytes/int64(j.clones()), 4096) }

// MaxWriteBytes is the most one execution of the job can write, as Parse
// counts it in BytesWritten: a bounded job's byte cap over all its clones,
// which fio's io_size enforces with the ramp's I/O included; an unbounded
// job's file, which its own size options make fio write at most once; and
// for a fresh execution of a job that reads, the file fio lays out first.
// A layout writes the file once.
func (j Job) MaxWriteBytes(how Execution) int64 {
	if j.Helper() {
		if how == Layout {
			return 0
		}
		// The tree is fixed (smallfiles.NewTree): its bytes are exact.
		return smallfiles.NewTree(smallfiles.Spec{Files: j.Files, MaxBytes: j.IOBytes}).Bytes()
	}
	if how == Layout {
		return max(j.FileBytes, 0)
	}
	n := max(j.FileBytes, 0)
	if j.Runtime > 0 {
		n = j.ioSize() * int64(j.clones())
	}
	if how == Fresh && jobReads(j) {
		n += max(j.FileBytes, 0)
	}
	return n
}

// WriteBytes is the most execs executions of the job and layouts of its
// file can write together: each execution MaxWriteBytes(how), each layout
// MaxWriteBytes(Layout). What a round, a measurement or a budget's rest
// holds is counted here and nowhere else: the config's check of a byte
// budget (Profile.MaxRoundBytes), the probe's rounds under a byte budget,
// and the agent's estimate of a cycle (Profile.MaxBytes).
func (j Job) WriteBytes(how Execution, execs, layouts int) int64 {
	return j.MaxWriteBytes(how)*int64(execs) + j.MaxWriteBytes(Layout)*int64(layouts)
}

// Execution is how the profile's measured executions treat their files:
// Steady for a steady profile, Fresh otherwise.
func (p Profile) Execution() Execution {
	if p.Steady {
		return Steady
	}
	return Fresh
}

// MaxRoundBytes is the most one round of the profile's costliest job can
// write on the given number of targets (its executions and, for a file per
// round, the round's layout), and that job's workload. A byte budget below
// it may stop a measurement before that job's first round.
func (p Profile) MaxRoundBytes(targets int) (int64, measure.Workload) {
	var most int64
	var w measure.Workload
	for _, j := range p.Jobs {
		// A job whose later executions lay out files of their own
		// (FilePerRound, RotateFiles) has rounds with a file each.
		layouts := 0
		if p.Steady && j.LayoutFiles(2) > 1 {
			layouts = targets
		}
		if n := j.WriteBytes(p.Execution(), targets, layouts); n > most {
			most, w = n, j.Workload
		}
	}
	return most, w
}

// MaxBytes is the most a measurement of the given rounds of every job on
// the given number of targets can write: every execution at its cap and,
// for a steady profile, every file it lays out (Job.LayoutFiles: the
// start's, and those of the rounds with files of their own).
func (p Profile) MaxBytes(rounds, targets int) int64 {
	var n int64
	for _, j := range p.Jobs {
		layouts := 0
		if p.Steady {
			layouts = j.LayoutFiles(rounds) * targets
		}
		n += j.WriteBytes(p.Execution(), rounds*targets, layouts)
	}
	return n
}

// FileSpace is the most the profile's files hold at once on the given
// number of targets' file system when a measurement starts: a steady
// profile keeps every job's file on every target until it ends (a job
// with a file per round keeps more, one a round, and each of those
// layouts checks the free space again before it writes); a fresh
// execution removes its file when it ends, so only the largest is held.
func (p Profile) FileSpace(targets int) int64 {
	var n int64
	for _, j := range p.Jobs {
		if p.Steady {
			n += j.FileBytes * int64(targets)
		} else {
			n = max(n, j.FileBytes)
		}
	}
	return n
}
