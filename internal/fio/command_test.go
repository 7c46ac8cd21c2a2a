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
	"github.com/layerprobe/layerprobe/internal/testharness"
)

func TestCommand(t *testing.T) {
	job := Job{Workload: measure.RandWrite, Options: []string{"rw=randwrite", "bs=4k"}}
	got := Command("/usr/bin/fio", job, "/var/lib/layerprobe/scratch/a:b")
	want := []string{
		"/usr/bin/fio",
		"--output-format=json",
		"--eta=never",
		"--name=randwrite",
		`--directory=/var/lib/layerprobe/scratch/a\:b`,
		"--unlink=1",
		"--kb_base=1024",
		"--thread",
		"--rw=randwrite",
		"--bs=4k",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Command =\n%q\nwant\n%q", got, want)
	}
	// Every built-in job: no option may name files or run commands.
	for _, name := range ProfileNames() {
		p, err := LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			for _, arg := range Command("fio", j, "/d")[1:] {
				for _, bad := range []string{"--filename", "--exec_", "--output=", "--directory=/d/", "--write_"} {
					if strings.HasPrefix(arg, bad) {
						t.Errorf("profile %s job %s: forbidden argument %q", name, j.Workload, arg)
					}
				}
			}
		}
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

// TestRealFio runs every quick-profile job with real fio in a temp dir.
func TestRealFio(t *testing.T) {
	bin := testharness.RequireFio(t)
	p, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range p.Jobs {
		t.Run(string(job.Workload), func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), job.Timeout)
			defer cancel()
			argv := Command(bin, job, dir)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = t.TempDir()
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			var exitErr *exec.ExitError
			if runErr != nil && !errors.As(runErr, &exitErr) {
				t.Fatalf("run fio: %v (%v)", runErr, FailureFromRunError(runErr))
			}
			res := Parse(job, []byte(stdout.String()), []byte(stderr.String()), cmd.ProcessState.ExitCode())
			if res.Failure != nil {
				t.Fatalf("%s: %v", strings.Join(argv, " "), res.Failure)
			}
			ops := map[string]measure.Op{"write": res.Write}
			if job.Workload == measure.Fsync {
				ops["read"], ops["sync"] = res.Read, res.Sync
			}
			for name, op := range ops {
				if !(op.IOPS > 0) || op.IOs <= 0 || !(op.LatencyP99Sec > 0) {
					t.Errorf("%s: %+v, want IOPS, IOs and p99 > 0", name, op)
				}
			}
			if !strings.HasPrefix(res.FioVersion, "fio-") || res.Runtime <= 0 || res.BytesWritten <= 0 {
				t.Errorf("FioVersion=%q Runtime=%v BytesWritten=%d", res.FioVersion, res.Runtime, res.BytesWritten)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 0 {
				t.Errorf("fio left files in %s (unlink=1): %v", dir, entries)
			}
		})
	}
}
