package fio

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

const mib = 1 << 20

// profiles are the only fio workloads layerprobe ever runs. They are
// compiled in on purpose: fio options can delete files and run commands
// (exec_prerun), so nothing a user or an API client sends reaches fio.
var profiles = []Profile{
	{
		Name: "quick",
		Description: "light default: I/O-count-sized jobs (32 MiB sequential, 4000 random writes, " +
			"4000 random reads/writes with fsync after every write); about 64 MiB per target and round",
		DefaultRounds: 10,
		Jobs: []Job{
			{
				Workload:  measure.SeqWrite,
				Options:   []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1", "iodepth=4", "size=32M", "runtime=60"},
				FileBytes: 32 * mib,
				Timeout:   3 * time.Minute,
			},
			{
				Workload:  measure.RandWrite,
				Options:   []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=16", "size=32M", "number_ios=4000", "randrepeat=1", "runtime=60"},
				FileBytes: 32 * mib,
				Timeout:   3 * time.Minute,
			},
			{
				// Buffered writes with an fsync after each one: the path a
				// database's WAL takes. About 2000 fsyncs per run give a
				// usable p99 (methodology: >= 2000 samples).
				Workload:  measure.Fsync,
				Options:   []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1", "size=8M", "io_size=16M", "number_ios=4000", "randrepeat=1", "runtime=60"},
				FileBytes: 8 * mib,
				Timeout:   3 * time.Minute,
			},
		},
	},
	{
		// smoke exists for tests and a first sanity check of a host: a
		// round takes a second or two. Its p99 rests on a few hundred
		// samples, too few to trust for decisions.
		Name:          "smoke",
		Description:   "tiny jobs for tests and a first sanity check (8 MiB sequential, 500 random writes, 400 random reads/writes with fsync); too few samples for trustworthy p99",
		DefaultRounds: 6,
		Jobs: []Job{
			{
				Workload:  measure.SeqWrite,
				Options:   []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1", "iodepth=4", "size=8M", "runtime=30"},
				FileBytes: 8 * mib,
				Timeout:   time.Minute,
			},
			{
				Workload:  measure.RandWrite,
				Options:   []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=16", "size=8M", "number_ios=500", "randrepeat=1", "runtime=30"},
				FileBytes: 8 * mib,
				Timeout:   time.Minute,
			},
			{
				Workload:  measure.Fsync,
				Options:   []string{"rw=randrw", "rwmixread=50", "bs=4k", "ioengine=psync", "fsync=1", "size=2M", "number_ios=400", "randrepeat=1", "runtime=30"},
				FileBytes: 2 * mib,
				Timeout:   time.Minute,
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
	return p, nil
}
