package fio

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

const mib = 1 << 20

// profiles are the only fio workloads layerprobe ever runs. They are
// compiled in on purpose: fio options can delete files and run commands
// (exec_prerun), so nothing a user or an API client sends reaches fio.
var profiles = []Profile{
	{
		// quick measures the seed article's sequential and random write
		// jobs (1 MiB direct writes at queue depth 1; 4 KiB direct random
		// writes from 4 threads at queue depth 1) and a WAL-like fsync job,
		// as many short executions on preconditioned files, paired round by
		// round, until the interval is narrow enough or the bytes are
		// spent. docs/methodology.md has the reasons and the measurements
		// behind each number.
		Name: "quick",
		Description: "light default: the seed article's write jobs, a WAL-like fsync job and a package install's small files in short, paired executions " +
			"on preconditioned files, repeated until every interval is within the target precision or the byte budget is spent",
		Steady:    true,
		MinRounds: 6,
		Jobs: []Job{
			{
				Workload:     measure.SeqWrite,
				FilePerRound: true, // placement varies between files: see Job.FilePerRound
				Options:      []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1", "iodepth=1"},
				// 4 MiB, written once over the preconditioned file: a
				// round's noise hardly falls with a longer execution (far
				// less than the square root of the bytes), so the smallest
				// execution buys the most rounds per byte; wrapping a
				// smaller file was noisier still; a smaller file written
				// once was not (docs/methodology.md, "Alternatives
				// measured").
				FileBytes: 4 * mib,
				Runtime:   250 * time.Millisecond,
				// No ramp: fio counts ramp I/O towards the byte cap, and a
				// fast device can use the cap up within the ramp, leaving
				// nothing measured (docs/methodology.md, "Short
				// executions"). A 1 MiB direct write has no warm-up worth
				// excluding.
				Ramp:         0,
				IOBytes:      4 * mib,
				Timeout:      time.Minute,
				InFlightRate: true, // whole-ms runtimes would quantize a 10 ms execution's rate
			},
			{
				Workload: measure.RandWrite,
				// A file per round, as for seqwrite: on a fast disk, runs
				// on one file per target spread several times what their
				// intervals promised, and runs with a file per round spread
				// as promised, for more bytes per round. The file is a
				// quarter of what an execution writes (its random writes
				// cover it about four times): placement still varies from
				// round to round, and layout, which was the largest share
				// of a default run's bytes, costs a quarter of the bytes.
				// docs/methodology.md ("Sequential and random writes get a
				// file per round") has the runs that compare the two.
				FilePerRound: true,
				Options:      []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=1"},
				Clones:       4,
				FileBytes:    4 * mib,
				Runtime:      250 * time.Millisecond,
				Ramp:         20 * time.Millisecond,
				IOBytes:      16 * mib,
				Timeout:      time.Minute,
			},
			{
				// Buffered writes with an fsync after each one, from one
				// thread: the path a database's WAL takes. A quarter of a
				// second holds a thousand fsyncs or more on an SSD, enough
				// for a p99; a longer execution buys fewer rounds per byte
				// (docs/methodology.md, "Alternatives measured").
				Workload: measure.Fsync,
				// Four files in turn (Job.RotateFiles): with one file per
				// target, default runs spread more than their intervals
				// promised, a placement error fixed within each run. Four
				// files leave a quarter of its variance for three more
				// layouts per target; a file per round would double an
				// fsync round's bytes (docs/methodology.md, "fsync rotates
				// four files").
				RotateFiles: 4,
				Options:     []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1"},
				FileBytes:   8 * mib,
				Runtime:     250 * time.Millisecond,
				Ramp:        50 * time.Millisecond,
				IOBytes:     16 * mib,
				Timeout:     time.Minute,
			},
			{
				// A package install's shape, on the metadata path the
				// three jobs above do not take: 1000 files of 0-16 KiB
				// (sized as a real node_modules tree's) in 200
				// directories, created, written, stat'ed and deleted by
				// the probe helper (package smallfiles; fio cannot build
				// the tree). 1000 files, not more: a larger tree's
				// execution under load lasts as long as the three fio
				// jobs' together (docs/methodology.md, "Small files: the
				// probe helper, not fio").
				Workload: measure.SmallFiles,
				Files:    1000,
				Timeout:  time.Minute,
			},
		},
	},
	{
		// smoke exists for tests and a first sanity check of a host: a
		// round takes a fraction of a second. Its p99 rests on a few
		// hundred samples, too few to trust for decisions.
		Name:          "smoke",
		Description:   "tiny executions of the default's jobs for tests and a first sanity check; too few samples for trustworthy p99",
		Steady:        true,
		DefaultRounds: 6,
		MinRounds:     6,
		Jobs: []Job{
			{
				Workload:     measure.SeqWrite,
				FilePerRound: true,
				Options:      []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1", "iodepth=1"},
				FileBytes:    4 * mib,
				Runtime:      100 * time.Millisecond,
				Ramp:         0, // a fast burst could write the whole 8 MiB cap within a ramp, leaving nothing measured
				IOBytes:      8 * mib,
				Timeout:      time.Minute,
				InFlightRate: true,
			},
			{
				Workload:  measure.RandWrite,
				Options:   []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=1"},
				Clones:    4,
				FileBytes: 4 * mib,
				Runtime:   50 * time.Millisecond,
				// No ramp: 4 MiB is 256 writes per thread, which a fast
				// disk can finish within a short ramp, leaving no latency
				// sample (no_io) and failing an agent cycle of the
				// end-to-end tests.
				Ramp:    0,
				IOBytes: 4 * mib,
				Timeout: time.Minute,
			},
			{
				Workload:    measure.Fsync,
				RotateFiles: 4, // as quick's
				Options:     []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1"},
				FileBytes:   2 * mib,
				// 250 ms, not the others' 100: on a loaded disk a write
				// and its fsync take tens of milliseconds, and 100 ms held
				// so few I/Os that a round could end with reads only (no
				// write or fsync latency, so no pair for those metrics),
				// withholding an agent's interval in the end-to-end tests.
				Runtime: 250 * time.Millisecond,
				Ramp:    10 * time.Millisecond,
				IOBytes: 8 * mib,
				Timeout: time.Minute,
			},
			{
				Workload: measure.SmallFiles,
				Files:    300, // the first 300 of quick's tree, about 1 MiB
				Timeout:  time.Minute,
			},
		},
	},
	{
		// long runs quick's random-write and fsync jobs with the same
		// pairing for 5 s per execution, and its sequential job on a 256
		// MiB file written once; every job on preconditioned files of its
		// own per round: a slow, expensive cross-check of what the default
		// reports (tens of GiB per run on an SSD), and the reference the
		// benchmark compares quick with.
		Name: "long",
		Description: "the default's random-write and fsync jobs with 5 s executions after a 1 s ramp and its sequential " +
			"job on a 256 MiB file, each on files of its own per round, 8 rounds: a slow, precise cross-check of the default (writes tens of GiB on an SSD)",
		Steady:        true,
		DefaultRounds: 8,
		MinRounds:     6,
		Jobs: []Job{
			{
				Workload:     measure.SeqWrite,
				FilePerRound: true,
				Options:      []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1", "iodepth=1"},
				// Written once, as quick's 8 MiB file is, but 32 times its
				// size: it tells whether quick's small file biases the
				// sequential figure. Wrapping a small file for 5 s instead
				// was no reference: its rounds were far noisier than
				// quick's, and with a ramp fio ended some executions having
				// measured nothing (Job.Ramp; docs/methodology.md, "Short
				// executions"). No ramp, as quick's.
				FileBytes:    256 * mib,
				Runtime:      5 * time.Second,
				IOBytes:      256 * mib,
				Timeout:      2 * time.Minute,
				InFlightRate: true, // as quick's, so that the two compare like with like
			},
			{
				Workload: measure.RandWrite,
				// A file per round, as for fsync, so that the interval
				// includes where the files lie: with one file per target for
				// the whole run, two runs of the fsync job on overlay2 read
				// the container with disjoint intervals (docs/methodology.md,
				// "Limits").
				FilePerRound: true,
				Options:      []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=1"},
				Clones:       4,
				FileBytes:    16 * mib,
				Runtime:      5 * time.Second,
				Ramp:         time.Second,
				IOBytes:      16 << 30,
				Timeout:      2 * time.Minute,
			},
			{
				Workload:     measure.Fsync,
				FilePerRound: true,
				Options:      []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1"},
				FileBytes:    8 * mib,
				Runtime:      5 * time.Second,
				Ramp:         time.Second,
				IOBytes:      16 << 30,
				Timeout:      2 * time.Minute,
			},
		},
	},
	{
		Name: "seed",
		Description: "the seed article's three fio commands (4 GiB sequential, 4x2 GiB random write, " +
			"4x2 GiB random read/write with fsync=1, 60 s each), three rounds, for comparison",
		DefaultRounds: 3,
		Jobs: []Job{
			{
				Workload:  measure.SeqWrite,
				Options:   []string{"ioengine=libaio", "direct=1", "bs=1M", "size=4G", "numjobs=1", "rw=write", "runtime=60s", "group_reporting=1"},
				FileBytes: 4096 * mib,
				Timeout:   15 * time.Minute,
			},
			{
				Workload:  measure.RandWrite,
				Options:   []string{"ioengine=libaio", "direct=1", "bs=4k", "size=2G", "numjobs=4", "rw=randwrite", "runtime=60s", "group_reporting=1"},
				FileBytes: 4 * 2048 * mib,
				Timeout:   15 * time.Minute,
			},
			{
				Workload:  measure.Fsync,
				Options:   []string{"ioengine=libaio", "direct=1", "fsync=1", "bs=4k", "size=2G", "numjobs=4", "rw=randrw", "runtime=60s", "group_reporting=1"},
				FileBytes: 4 * 2048 * mib,
				Timeout:   15 * time.Minute,
			},
		},
	},
}

// DefaultProfile is the profile used when none is configured.
const DefaultProfile = "quick"

// ProfileNames lists the built-in profiles.
func ProfileNames() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	return names
}

// LookupProfile returns the built-in profile with that name.
func LookupProfile(name string) (Profile, error) {
	i := slices.IndexFunc(profiles, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		return Profile{}, fmt.Errorf("unknown profile %q, want one of %s", name, strings.Join(ProfileNames(), ", "))
	}
	p := profiles[i]
	p.Jobs = slices.Clone(p.Jobs)
	for j := range p.Jobs {
		p.Jobs[j].Options = slices.Clone(p.Jobs[j].Options)
		if job := &p.Jobs[j]; job.Helper() {
			// The tree is fixed, so its size is known: what the
			// free-space check asks for, with a block per directory.
			tree := smallfiles.NewTree(smallfiles.Spec{Files: job.Files, MaxBytes: job.IOBytes})
			job.FileBytes = tree.Bytes() + int64(len(tree.Dirs))*4096
		}
	}
	return p, nil
}

// Only returns the profile with the jobs of these workloads alone, in the
// profile's own order; none keeps every job. Operators pick workloads (a
// database host may want fsync alone, and cheaper cycles) but never a
// job's options: those stay the built-in profile's.
func (p Profile) Only(ws []measure.Workload) (Profile, error) {
	if len(ws) == 0 {
		return p, nil
	}
	for _, w := range ws {
		if !slices.ContainsFunc(p.Jobs, func(j Job) bool { return j.Workload == w }) {
			return Profile{}, fmt.Errorf("profile %q has no workload %q, want one of %s", p.Name, w, strings.Join(p.WorkloadNames(), ", "))
		}
	}
	p.Jobs = slices.DeleteFunc(slices.Clone(p.Jobs), func(j Job) bool { return !slices.Contains(ws, j.Workload) })
	return p, nil
}

// WorkloadNames lists the profile's workloads in its order.
func (p Profile) WorkloadNames() []string {
	names := make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		names[i] = string(j.Workload)
	}
	return names
}
