package main

import (
	"bytes"
	"context"
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// layerprobe builds for darwin/arm64 and darwin/amd64 (a Mac running it
// against an engine in a VM): the Linux-only parts (cgroups, FICLONE, the
// advisor's cgroup mounts, the parent-death signal) are build-tagged, with
// darwin answers. The binaries are Mach-O of their architecture.
func TestDarwinBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiles twice")
	}
	t.Parallel()
	dir := t.TempDir()
	for arch, cpu := range map[string]macho.Cpu{"arm64": macho.CpuArm64, "amd64": macho.CpuAmd64} {
		bin := filepath.Join(dir, "layerprobe-darwin-"+arch)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "nomsgpack", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("GOOS=darwin GOARCH=%s go build: %v\n%s", arch, err, out.String())
			continue
		}
		f, err := macho.Open(bin)
		if err != nil {
			t.Errorf("darwin/%s: not a Mach-O binary: %v", arch, err)
			continue
		}
		if f.Cpu != cpu {
			t.Errorf("darwin/%s binary is for %v", arch, f.Cpu)
		}
		f.Close()
	}
}
