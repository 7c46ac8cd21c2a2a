package fio

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

func TestCommand(t *testing.T) {
	job := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite", "bs=4k"}}
	got := Command("/usr/bin/fio", job, "/var/lib/layerprobe/scratch/a:b", Fresh, 0)
	want := []string{
		"/usr/bin/fio",
		"--output-format=json+",
		"--eta=never",
		`--directory=/var/lib/layerprobe/scratch/a\:b`,
		"--kb_base=1024",
		"--thread",
		"--clocksource=clock_gettime",
		"--name=randwrite",
		"--unlink=1",
		"--rw=randwrite",
		"--bs=4k",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Command =\n%q\nwant\n%q", got, want)
	}

	bounded := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite"}, Clones: 4, FileBytes: 16 << 20,
		Runtime: 250 * time.Millisecond, Ramp: 20 * time.Millisecond, IOBytes: 16 << 20}
	steady := Command("fio", bounded, "/d", Steady, 0)
	for _, w := range []string{"--filename=randwrite.dat", "--unlink=0", "--size=16777216", "--io_size=4194304",
		"--runtime=250ms", "--ramp_time=20ms", "--numjobs=4", "--group_reporting=1", "--rw=randwrite"} {
		if !slices.Contains(steady, w) {
			t.Errorf("Steady command %q lacks %s", steady, w)
		}
	}
	// A fresh execution of a bounded job (the cold probe's) has no ramp:
	// its first moments are the point.
	fresh := Command("fio", bounded, "/d", Fresh, 0)
	if slices.ContainsFunc(fresh, func(a string) bool { return strings.HasPrefix(a, "--ramp_time") }) || !slices.Contains(fresh, "--unlink=1") {
		t.Errorf("Fresh command %q: want unlink and no ramp", fresh)
	}
	layout := Command("fio", bounded, "/d", Layout, 0)
	for _, w := range []string{"--name=randwrite-layout", "--filename=randwrite.dat", "--rw=write", "--size=16777216", "--end_fsync=1", "--unlink=0"} {
		if !slices.Contains(layout, w) {
			t.Errorf("Layout command %q lacks %s", layout, w)
		}
	}

	// Every built-in job: no option may name other files or run commands.
	for _, name := range ProfileNames() {
		p, err := LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			for _, how := range []Execution{Fresh, Steady, Layout} {
				for _, arg := range Command("fio", j, "/d", how, 0)[1:] {
					for _, bad := range []string{"--exec_", "--output=", "--directory=/d/", "--write_"} {
						if strings.HasPrefix(arg, bad) {
							t.Errorf("profile %s job %s: forbidden argument %q", name, j.Workload, arg)
						}
					}
					if strings.HasPrefix(arg, "--filename") && arg != "--filename="+FileName(j.Workload) {
						t.Errorf("profile %s job %s: file %q", name, j.Workload, arg)
					}
				}
			}
			if j.Helper() {
				if j.FileBytes <= 0 || j.Timeout <= 0 || j.MaxWriteBytes(Steady) <= 0 || j.MaxWriteBytes(Layout) != 0 {
					t.Errorf("profile %s job %s: a helper job needs FileBytes, a timeout, bytes to write and no layout", name, j.Workload)
				}
				continue
			}
			if p.Steady && (j.Runtime <= 0 || j.IOBytes <= 0 || j.FileBytes <= 0) {
				t.Errorf("profile %s job %s: a steady job needs Runtime, IOBytes and FileBytes", name, j.Workload)
			}
			// fio's rw defaults to read, a sequential mode.
			if sequential := !strings.HasPrefix(rwMode(j), "rand"); j.Ramp > 0 && sequential && j.ioSize() > j.FileBytes {
				t.Errorf("profile %s job %s: a ramp on a sequential job that wraps its file (io_size %d > size %d) "+
					"lets fio end the execution at the end of a pass, measuring part of it or nothing", name, j.Workload,
					j.ioSize(), j.FileBytes)
			}
			if j.FilePerRound && !p.Steady {
				t.Errorf("profile %s job %s: a file per round needs a steady profile (a fresh one has a new file every execution)", name, j.Workload)
			}
			if j.RotateFiles != 0 && (j.RotateFiles < 2 || j.FilePerRound || !p.Steady) {
				t.Errorf("profile %s job %s: RotateFiles %d wants at least 2 files, a steady profile and no file per round", name, j.Workload, j.RotateFiles)
			}
		}
	}
}

// runRealFio runs one execution of job in dir with the fio at bin and
// parses it.
func runRealFio(t *testing.T, bin string, job Job, dir string, how Execution) measure.JobResult {
	t.Helper()
	argv := Command(bin, job, dir, how, 0)
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return ParseExecution(job, how, out, nil, 0)
}

// TestRampOutlastingTheCapOnRealFio: a random job whose byte cap runs out
// within its ramp (64 writes of 4 KiB, a 5 s ramp) is a failed execution,
// not the ramp's figures: fio reports the ramp's I/O without latencies.
func TestRampOutlastingTheCapOnRealFio(t *testing.T) {
	bin := testharness.RequireFio(t)
	dir := t.TempDir()
	job := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=1"},
		FileBytes: 4 << 20, Runtime: time.Second, Ramp: 5 * time.Second, IOBytes: 256 << 10, Timeout: time.Minute}
	run := func(how Execution) measure.JobResult { return runRealFio(t, bin, job, dir, how) }
	if lay := run(Layout); !lay.OK() {
		t.Fatalf("layout: %v", lay.Failure)
	}
	res := run(Steady)
	if res.OK() || res.Failure.Reason != measure.ReasonNoIO || !strings.Contains(res.Failure.Message, "within the ramp") {
		t.Fatalf("steady execution ending within its ramp: failure %v, write %+v; want no_io", res.Failure, res.Write)
	}
	if res.BytesWritten <= 0 || res.BytesWritten > 256<<10 {
		t.Errorf("bytes written %d, want the ramp's, within the 256 KiB cap", res.BytesWritten)
	}
}

// TestSteadyExecutionsOnRealFio: the layout writes the file, a steady
// execution overwrites it within its byte cap and keeps it; with a ramp
// on a file it does not wrap, every execution measures I/O and counts the
// ramp's bytes.
func TestSteadyExecutionsOnRealFio(t *testing.T) {
	bin := testharness.RequireFio(t)
	dir := t.TempDir()
	// No ramp: this job wraps its file 8 times (Job.Ramp).
	job := Job{Workload: measure.SeqWrite, Options: []string{"rw=write", "bs=1M", "ioengine=libaio", "direct=1"}, FileBytes: 8 << 20,
		Runtime: 5 * time.Second, IOBytes: 64 << 20, Timeout: time.Minute}
	run := func(how Execution) measure.JobResult { return runRealFio(t, bin, job, dir, how) }
	lay := run(Layout)
	if !lay.OK() || lay.BytesWritten != 8<<20 {
		t.Fatalf("layout: %+v", lay)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName(job.Workload)))
	if err != nil || fi.Size() != 8<<20 {
		t.Fatalf("layout file: %v %v", fi, err)
	}
	res := run(Steady)
	if !res.OK() {
		t.Fatalf("steady: %v", res.Failure)
	}
	// The cap (64 MiB) ends the execution long before 5 s; what was
	// written is the cap, never more.
	if res.Write.Bytes <= 0 || res.BytesWritten > 64<<20 || res.BytesWritten < res.Write.Bytes {
		t.Errorf("steady: %d bytes written (%d measured), want at most the 64 MiB cap", res.BytesWritten, res.Write.Bytes)
	}
	if res.Write.Histogram == nil || res.Write.Histogram.Empty() {
		t.Error("steady: no latency histogram from json+")
	}
	if _, err := os.Stat(filepath.Join(dir, FileName(job.Workload))); err != nil {
		t.Errorf("steady execution removed its file: %v", err)
	}

	// A ramp on a file as large as the cap: fio counts the ramp's I/O
	// towards the cap, so the measured bytes fall short of it and the
	// bytes written, ramp included, reach it. Several executions, as the
	// wrapping case failed in about one in five.
	dir = t.TempDir()
	job.FileBytes, job.Ramp = 64<<20, 5*time.Millisecond
	if lay := run(Layout); !lay.OK() {
		t.Fatalf("layout with ramp: %v", lay.Failure)
	}
	for i := range 8 {
		res := run(Steady)
		if !res.OK() {
			t.Fatalf("steady with ramp, execution %d: %v", i, res.Failure)
		}
		// A ramp whose first write outlasted it measured the whole cap.
		rampCounted := res.Write.Bytes == 64<<20 || res.BytesWritten > res.Write.Bytes
		if res.Write.Bytes <= 0 || !rampCounted || res.BytesWritten > 64<<20 {
			t.Errorf("steady with ramp, execution %d: %d bytes written (%d measured), want the ramp's bytes counted "+
				"within the 64 MiB cap", i, res.BytesWritten, res.Write.Bytes)
		}
	}
}

// TestRoundFilesOnRealFio: the layout and the execution of file k name
// the same file, a new one beside file 0, which a steady execution of
// file k leaves as it found it: there in full, file 0 untouched.
func TestRoundFilesOnRealFio(t *testing.T) {
	bin := testharness.RequireFio(t)
	dir := t.TempDir()
	job := Job{Workload: measure.SeqWrite, Options: []string{"rw=write", "bs=1M", "ioengine=psync"}, FileBytes: 4 << 20,
		Runtime: time.Second, IOBytes: 4 << 20, Timeout: time.Minute, FilePerRound: true}
	if got := RoundFileName(job.Workload, 0); got != FileName(job.Workload) {
		t.Errorf("RoundFileName(0) = %q, want FileName %q", got, FileName(job.Workload))
	}
	for _, k := range []int{0, 1, 12} {
		for _, how := range []Execution{Layout, Steady} {
			argv := Command(bin, job, dir, how, k)
			if !slices.Contains(argv, "--filename="+RoundFileName(job.Workload, k)) {
				t.Fatalf("file %d: %v does not name %s", k, argv, RoundFileName(job.Workload, k))
			}
			if out, err := exec.Command(argv[0], argv[1:]...).Output(); err != nil {
				t.Fatalf("%v: %v", argv, err)
			} else if res := ParseExecution(job, how, out, nil, 0); !res.OK() {
				t.Fatalf("file %d %v: %v", k, how, res.Failure)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if fi, err := e.Info(); err != nil || fi.Size() != 4<<20 {
			t.Errorf("%s: %v %v, want 4 MiB", e.Name(), fi, err)
		}
	}
	if want := []string{"seqwrite.1.dat", "seqwrite.12.dat", "seqwrite.dat"}; !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}
}

func TestVersion(t *testing.T) {
	bin := testharness.RequireFio(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := Version(ctx, bin)
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if !strings.HasPrefix(v, "fio-3.") {
		t.Errorf("Version = %q, want fio-3.x", v)
	}
}

func TestVersionErrors(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "no-fio")
	_, err := Version(ctx, missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Version(missing) = %v, want an error naming %s", err, missing)
	}
	if f := FailureFromRunError(err); f.Reason != measure.ReasonFioMissing {
		t.Errorf("FailureFromRunError(%v) = %v, want %s", err, f, measure.ReasonFioMissing)
	}
	_, err = Version(ctx, "layerprobe-no-such-fio-binary")
	if f := FailureFromRunError(err); err == nil || f.Reason != measure.ReasonFioMissing {
		t.Errorf("Version(not in PATH) = %v, want %s", err, measure.ReasonFioMissing)
	}
	notExec := filepath.Join(t.TempDir(), "fio")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// execve needs an execute bit even for root.
	_, err = Version(ctx, notExec)
	if f := FailureFromRunError(err); err == nil || f.Reason != measure.ReasonFioMissing {
		t.Errorf("Version(not executable) = %v, want %s", err, measure.ReasonFioMissing)
	}
	if echo, lerr := exec.LookPath("echo"); lerr == nil {
		if _, err = Version(ctx, echo); !errors.Is(err, errNotFio) {
			t.Errorf("Version(echo) = %v, want errNotFio", err)
		}
	}
}

func TestFailureFromRunError(t *testing.T) {
	exitErr := exec.Command("sh", "-c", "kill -9 $$").Run()
	for _, c := range []struct {
		err  error
		want measure.Reason
	}{
		{context.DeadlineExceeded, measure.ReasonTimeout},
		{errors.Join(errors.New("signal: killed"), context.DeadlineExceeded), measure.ReasonTimeout},
		{context.Canceled, measure.ReasonCanceled},
		{exec.ErrNotFound, measure.ReasonFioMissing},
		{&exec.Error{Name: "fio", Err: exec.ErrNotFound}, measure.ReasonFioMissing},
		{os.ErrNotExist, measure.ReasonFioMissing},
		{os.ErrPermission, measure.ReasonFioMissing},
		{exitErr, measure.ReasonCrashed},
		{errors.New("OCI runtime exec failed"), measure.ReasonExec},
	} {
		f := FailureFromRunError(c.err)
		if f == nil || f.Reason != c.want {
			t.Errorf("FailureFromRunError(%v) = %v, want %s", c.err, f, c.want)
		}
	}
	if f := FailureFromRunError(nil); f != nil {
		t.Errorf("FailureFromRunError(nil) = %v", f)
	}
}

// TestRealFio runs every quick-profile job with real fio in a temp dir:
// layout, one steady execution, and a fresh one elsewhere (the cold
// probe's), which must leave nothing behind.
func TestRealFio(t *testing.T) {
	bin := testharness.RequireFio(t)
	p, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, job Job, dir string, how Execution) measure.JobResult {
		ctx, cancel := context.WithTimeout(context.Background(), job.Timeout)
		defer cancel()
		argv := Command(bin, job, dir, how, 0)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = t.TempDir()
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		runErr := cmd.Run()
		var exitErr *exec.ExitError
		if runErr != nil && !errors.As(runErr, &exitErr) {
			t.Fatalf("run fio: %v (%v)", runErr, FailureFromRunError(runErr))
		}
		res := ParseExecution(job, how, []byte(stdout.String()), []byte(stderr.String()), cmd.ProcessState.ExitCode())
		if res.Failure != nil {
			t.Fatalf("%s: %v", strings.Join(argv, " "), res.Failure)
		}
		return res
	}
	for _, job := range p.Jobs {
		if job.Helper() {
			continue // TestSmallFilesOutputParses
		}
		t.Run(string(job.Workload), func(t *testing.T) {
			dir := t.TempDir()
			if lay := run(t, job, dir, Layout); lay.BytesWritten != job.FileBytes || lay.BytesWritten > job.MaxWriteBytes(Layout) {
				t.Errorf("layout wrote %d bytes, want %d (bound %d)", lay.BytesWritten, job.FileBytes, job.MaxWriteBytes(Layout))
			}
			res := run(t, job, dir, Steady)
			ops := map[string]measure.Op{"write": res.Write}
			if job.Workload == measure.Fsync {
				ops["read"], ops["sync"] = res.Read, res.Sync
			}
			for name, op := range ops {
				if !(op.IOPS > 0) || op.IOs <= 0 || !(op.LatencyP99Sec > 0) || op.Histogram == nil {
					t.Errorf("%s: %+v, want IOPS, IOs, p99 > 0 and a histogram", name, op)
				}
			}
			// The probe keeps a byte budget by MaxWriteBytes: real fio must
			// never write more.
			if !strings.HasPrefix(res.FioVersion, "fio-") || res.Runtime <= 0 || res.BytesWritten <= 0 || res.BytesWritten > job.MaxWriteBytes(Steady) {
				t.Errorf("FioVersion=%q Runtime=%v BytesWritten=%d (bound %d)", res.FioVersion, res.Runtime, res.BytesWritten, job.MaxWriteBytes(Steady))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != FileName(job.Workload) {
				t.Errorf("after a steady execution %s holds %v, want only %s", dir, entries, FileName(job.Workload))
			}
			fresh := t.TempDir()
			if res := run(t, job, fresh, Fresh); res.BytesWritten > job.MaxWriteBytes(Fresh) {
				t.Errorf("fresh execution wrote %d bytes, bound %d", res.BytesWritten, job.MaxWriteBytes(Fresh))
			}
			if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
				t.Errorf("fio left files in %s (unlink=1): %v", fresh, entries)
			}
		})
	}
}

// TestMaxWriteBytes: what an execution and a round can write, from the
// jobs' caps and files.
func TestMaxWriteBytes(t *testing.T) {
	const m = 1 << 20
	randrw := Job{Workload: measure.Fsync, Options: []string{"rw=randrw"}, FileBytes: 8 * m, Runtime: time.Second, IOBytes: 32 * m}
	write := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite"}, FileBytes: 16 * m, Runtime: time.Second, IOBytes: 16 * m, Clones: 4}
	sized := Job{Workload: measure.SeqWrite, Options: []string{"rw=write", "size=4G"}, FileBytes: 4096 * m}
	tiny := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite"}, FileBytes: m, Runtime: time.Second, IOBytes: 1, Clones: 2}
	for _, c := range []struct {
		name string
		job  Job
		how  Execution
		want int64
	}{
		{"steady: the byte cap", randrw, Steady, 32 * m},
		{"fresh reader: the cap and the file fio lays out", randrw, Fresh, 40 * m},
		{"fresh writer: the cap alone", write, Fresh, 16 * m},
		{"layout: the file", write, Layout, 16 * m},
		{"no runtime: the file its size writes", sized, Fresh, 4096 * m},
		{"a cap below a block: a block per clone", tiny, Steady, 2 * 4096},
	} {
		if got := c.job.MaxWriteBytes(c.how); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}

	for _, c := range []struct {
		profile string
		targets int
		want    int64
		w       measure.Workload
	}{
		// fsync's 16 MiB cap and the file of one of its first rounds
		// (RotateFiles: 8 MiB) beat randwrite's cap and its round's file
		// (4+16 MiB).
		{"quick", 4, 4 * 24 * m, measure.Fsync},
		{"quick", 3, 3 * 24 * m, measure.Fsync},
		{"long", 4, 4 * (16<<30 + 16*m), measure.RandWrite},
		// seed's fsync job reads: fio lays out its 8 GiB and writes up
		// to as much again.
		{"seed", 4, 4 * 2 * 8192 * m, measure.Fsync},
	} {
		p, err := LookupProfile(c.profile)
		if err != nil {
			t.Fatal(err)
		}
		if got, w := p.MaxRoundBytes(c.targets); got != c.want || w != c.w {
			t.Errorf("%s on %d targets: %d (%s), want %d (%s)", c.profile, c.targets, got, w, c.want, c.w)
		}
	}
}

// TestMeasurementBytes: what a measurement of some rounds can write is
// its executions at their caps and, for a steady profile, every file it
// lays out (a helper job has none); what its files hold at once is every
// job's file on every target when it is steady, the largest file when
// each execution lays out its own and removes it.
func TestMeasurementBytes(t *testing.T) {
	const m = 1 << 20
	quick, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	var tree, files int64
	for _, j := range quick.Jobs {
		files += j.FileBytes
		if j.Helper() {
			tree = j.MaxWriteBytes(Steady)
		}
	}
	// 6 rounds on 4 targets: seqwrite 4 MiB an execution and a file a
	// round, randwrite 16 MiB and a 4 MiB file a round, fsync 16 MiB and
	// its 4 files in turn, smallfiles its tree.
	want := int64(24*4*m+24*4*m) + (24*16*m + 24*4*m) + (24*16*m + 16*8*m) + 24*tree
	if got := quick.MaxBytes(6, 4); got != want {
		t.Errorf("quick, 6 rounds on 4 targets: %d, want %d", got, want)
	}
	if got := quick.FileSpace(4); got != 4*files {
		t.Errorf("quick's files on 4 targets: %d, want %d", got, 4*files)
	}
	seed, err := LookupProfile("seed")
	if err != nil {
		t.Fatal(err)
	}
	// Fresh executions: no layouts of their own, but fsync's reader lays
	// out its 8 GiB in every execution.
	if got, want := seed.MaxBytes(3, 4), int64(12*(4096*m+8192*m+2*8192*m)); got != want {
		t.Errorf("seed, 3 rounds on 4 targets: %d, want %d", got, want)
	}
	if got := seed.FileSpace(4); got != 8192*m {
		t.Errorf("seed's files on 4 targets: %d, want the largest, %d", got, 8192*m)
	}
}

// TestFileOf: a target's k-th execution measures file k with a file per
// round, k mod RotateFiles with files in turn, and file 0 otherwise; and
// a measurement lays out as many files as FileOf names.
func TestFileOf(t *testing.T) {
	for _, c := range []struct {
		name  string
		job   Job
		files []int // FileOf(0..9)
	}{
		{"one file", Job{}, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"a file per round", Job{FilePerRound: true}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"four in turn", Job{RotateFiles: 4}, []int{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}},
		{"one in turn is one file", Job{RotateFiles: 1}, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		var got []int
		for k := range 10 {
			got = append(got, c.job.FileOf(k))
		}
		if !slices.Equal(got, c.files) {
			t.Errorf("%s: files %v, want %v", c.name, got, c.files)
		}
		for n := range 11 {
			distinct := map[int]bool{0: true} // the start's layout, even before an execution
			for k := range n {
				distinct[c.job.FileOf(k)] = true
			}
			if got := c.job.LayoutFiles(n); got != len(distinct) {
				t.Errorf("%s: LayoutFiles(%d) = %d, want %d", c.name, n, got, len(distinct))
			}
		}
	}
}
