package fio

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

func quickSmallFiles(t *testing.T) Job {
	t.Helper()
	p, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range p.Jobs {
		if j.Workload == measure.SmallFiles {
			return j
		}
	}
	t.Fatal("quick has no smallfiles job")
	return Job{}
}

// TestSmallFilesOutputParses: a real execution of quick's smallfiles job
// in a temporary directory, rendered as the helper prints it, reads back
// through the parser that reads fio: every operation counted, a rate, a
// histogram, the bytes the job's bound promised and nothing left behind.
func TestSmallFilesOutputParses(t *testing.T) {
	job := quickSmallFiles(t)
	dir := t.TempDir()
	res, err := smallfiles.Run(dir, smallfiles.Spec{Files: job.Files, MaxBytes: job.IOBytes})
	if err != nil {
		t.Fatal(err)
	}
	got := ParseExecution(job, Steady, smallfiles.FioJSON(string(job.Workload), res, nil), nil, 0)
	if !got.OK() {
		t.Fatalf("parse: %v", got.Failure)
	}
	// mkdir, create, stat, unlink and rmdir: three ops per file, two per
	// directory.
	if wantOps := int64(3*res.Files + 2*res.Dirs); got.Write.IOs != wantOps || res.Files != job.Files {
		t.Errorf("ops %d for %d files in %d dirs, want %d", got.Write.IOs, res.Files, res.Dirs, wantOps)
	}
	if !(got.Write.IOPS > 0) || got.Write.Histogram == nil || got.Write.Histogram.Total() != uint64(got.Write.IOs) ||
		!(got.Write.LatencyP99Sec >= got.Write.LatencyP50Sec) || !(got.Write.LatencyP50Sec > 0) {
		t.Errorf("write op %+v: want a rate and a histogram of every op", got.Write)
	}
	if got.BytesWritten != job.MaxWriteBytes(Steady) || got.BytesWritten != res.Bytes {
		t.Errorf("bytes written %d, tree %d, bound %d: want all equal", got.BytesWritten, res.Bytes, job.MaxWriteBytes(Steady))
	}
	if v := measure.MetricValue(measure.HeadlineMetric(job.Workload), got); !(v > 0) {
		t.Errorf("headline %s = %v", measure.HeadlineMetric(job.Workload), v)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the execution left %v behind", entries)
	}
}

// TestSmallFilesFailureIsAJobError: an execution that cannot create its
// tree (its directory is a file: the tests run as root, whom a read-only
// directory would not stop) is a failed job with the errno, as fio's are.
func TestSmallFilesFailureIsAJobError(t *testing.T) {
	job := quickSmallFiles(t)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := smallfiles.Run(blocker, smallfiles.Spec{Files: 10})
	if err == nil || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("run in a file: err = %v, want ENOTDIR", err)
	}
	got := ParseExecution(job, Steady, smallfiles.FioJSON(string(job.Workload), res, err), []byte(err.Error()), 1)
	if got.OK() || got.Failure.Reason != measure.ReasonFioError {
		t.Errorf("failure %+v, want %s", got.Failure, measure.ReasonFioError)
	}
}

// TestHelperCommand: the helper's argv names the verb, the job's
// directory, files and byte cap, and nothing else.
func TestHelperCommand(t *testing.T) {
	job := Job{Workload: measure.SmallFiles, Files: 300, IOBytes: 1 << 20}
	got := HelperCommand("/lp/bin/layerprobe", job, "/lp/layer")
	want := []string{"/lp/bin/layerprobe", "probe-helper", "smallfiles", "--name=smallfiles", "--directory=/lp/layer",
		"--files=300", "--max-bytes=1048576"}
	if !slices.Equal(got, want) {
		t.Errorf("HelperCommand = %q, want %q", got, want)
	}
	if n := job.MaxWriteBytes(Steady); n <= 0 || n > 1<<20 {
		t.Errorf("MaxWriteBytes = %d, want within the cap", n)
	}
}
