package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/enginetest"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// otherDiskScratch is a directory on another file system than the test's
// data roots (/dev/shm, a tmpfs).
func otherDiskScratch(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "lpvm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// An engine in a VM (Docker Desktop's answer; its data root is not on
// this host) is measured against a host directory on another file system:
// every target, the host arm's cgroup not applicable (no join is tried),
// the facts saying vm and native host disk.
func TestPrepareEngineInVM(t *testing.T) {
	eng := enginetest.New("/nonexistent/vm/docker")
	eng.UpdateInfo(func(i *engine.Info) { i.OS, i.Hostname = "Docker Desktop", "docker-desktop" })
	opts := testOptions(t)
	opts.ScratchDir = filepath.Join(otherDiskScratch(t), "lp")
	s, err := Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer s.Close(context.Background())
	if got, want := s.Targets(), append([]measure.Target{measure.TargetHost}, allTargets...); !slices.Equal(got, want) {
		t.Errorf("Targets = %v, want %v", got, want)
	}
	f := s.Facts()
	if f.Topology != "vm" || f.VM != "docker-desktop" || f.Baseline != "native host disk" {
		t.Errorf("facts: %+v", f.TopologyFacts)
	}
	if s.HostArmCgroup != HostArmNotApplicable || len(s.hostCgroups.Dirs) != 0 {
		t.Errorf("host arm cgroup %q, cgroups %v; want not_applicable and none", s.HostArmCgroup, s.hostCgroups)
	}
	if !strings.HasPrefix(s.hostDir, opts.ScratchDir) {
		t.Errorf("host directory %s is not under scratch_dir %s", s.hostDir, opts.ScratchDir)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "native host disk") }) {
		t.Errorf("warnings %q do not say the ratios are against the native host disk", s.Warnings)
	}
	// A VM's share serves small files at about 1% of the host's rate: its
	// jobs get longer before they count as hung.
	job := fio.Job{Workload: measure.SmallFiles, Files: 300, Timeout: time.Minute}
	if got := s.jobTimeout(job); got != vmTimeoutFactor*time.Minute {
		t.Errorf("job timeout in a VM: %s, want %s", got, vmTimeoutFactor*time.Minute)
	}
}

// In a VM the arms may run different fio builds: said, not refused.
func TestPrepareEngineInVMDifferentFio(t *testing.T) {
	eng := enginetest.New("/nonexistent/vm/docker")
	eng.UpdateInfo(func(i *engine.Info) { i.Hostname = "lima-default" })
	opts := testOptions(t)
	opts.ScratchDir = otherDiskScratch(t)
	bin := filepath.Join(t.TempDir(), "fio")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho fio-3.38\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts.FioBinary = bin
	s, err := Prepare(context.Background(), eng, opts, discard())
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer s.Close(context.Background())
	if f := s.Facts(); f.HostFioVersion != "fio-3.38" || f.FioVersion != enginetest.FioVersion || f.VM != "lima" {
		t.Errorf("facts: fio %q, host fio %q, vm %q", f.FioVersion, f.HostFioVersion, f.VM)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "different fio builds") }) {
		t.Errorf("warnings %q do not say the fio builds differ", s.Warnings)
	}
}

// An engine in a VM needs a host directory the VM shares; without
// scratch_dir the error names it and the product's usual directory.
func TestPrepareEngineInVMNeedsAHostDir(t *testing.T) {
	eng := enginetest.New("/nonexistent/vm/docker")
	eng.UpdateInfo(func(i *engine.Info) { i.Hostname = "colima" })
	_, err := Prepare(context.Background(), eng, testOptions(t), discard())
	var perr *Error
	if !errors.As(err, &perr) || perr.Code != "host_dir" || !strings.Contains(err.Error(), "scratch_dir") || !strings.Contains(err.Error(), "Colima") {
		t.Errorf("Prepare = %v; want host_dir naming scratch_dir and Colima's directory", err)
	}
	if eng.Live() != 0 {
		t.Errorf("%d probe containers left running", eng.Live())
	}
}

// The same-file-system rule stays for an engine on this host, whatever a
// VM product's answer would say when the configuration says host: a
// scratch directory on another disk is refused.
func TestPrepareHostEngineStillRefusesAnotherDisk(t *testing.T) {
	for _, forced := range []string{"", "host"} {
		eng := enginetest.New(t.TempDir())
		if forced == "host" {
			eng.UpdateInfo(func(i *engine.Info) { i.OS = "Docker Desktop" })
		}
		opts := testOptions(t)
		opts.Topology, opts.ScratchDir = forced, otherDiskScratch(t)
		_, err := Prepare(context.Background(), eng, opts, discard())
		var perr *Error
		if !errors.As(err, &perr) || perr.Code != "different_filesystem" {
			t.Errorf("topology %q: Prepare = %v; want different_filesystem", forced, err)
		}
	}
}
