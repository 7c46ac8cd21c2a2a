//go:build linux

package testdaemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestStartKillRestartCleanup runs each kind of daemon through a crash and
// a restart and then checks that its cleanup left nothing behind.
func TestStartKillRestartCleanup(t *testing.T) {
	Require(t)
	for name, opts := range map[string]Options{
		"docker-overlay2":       {Driver: "overlay2"},
		"docker-fuse-overlayfs": {Driver: "fuse-overlayfs"},
		"podman-overlay":        {Engine: EnginePodman},
		"podman-rootless":       {Engine: EnginePodman, User: 65534},
	} {
		t.Run(name, func(t *testing.T) {
			var d *Daemon
			t.Run("daemon", func(t *testing.T) {
				d = Start(t, opts)
				checkKillRestart(t, d)
			})
			if d == nil {
				t.Fatal("Start did not return a daemon")
			}
			assertGone(t, d.Dir, "")
		})
	}
}

func checkKillRestart(t *testing.T, d *Daemon) {
	t.Helper()
	if len(strings.TrimPrefix(d.Host, "unix://")) >= 100 {
		t.Errorf("socket path %q is too long for sun_path", d.Host)
	}
	if !strings.HasPrefix(d.DataRoot, d.Dir+"/") || !strings.HasPrefix(d.ExecRoot, d.Dir+"/") {
		t.Errorf("data root %q / exec root %q not under %q", d.DataRoot, d.ExecRoot, d.Dir)
	}
	if err := pingSocket(strings.TrimPrefix(d.Host, "unix://")); err != nil {
		t.Fatalf("ping after Start: %v", err)
	}
	if n := len(procsNaming(d.Dir)); n == 0 {
		t.Errorf("no engine process names %s", d.Dir)
	}

	d.Kill()
	if d.Running() {
		t.Errorf("Running() = true after Kill")
	}
	if err := pingSocket(strings.TrimPrefix(d.Host, "unix://")); err == nil {
		t.Errorf("ping succeeded after Kill")
	}
	d.Restart()
	if err := pingSocket(strings.TrimPrefix(d.Host, "unix://")); err != nil {
		t.Fatalf("ping after Restart: %v", err)
	}
	if d.opts.Engine == EngineDocker && !strings.Contains(d.Log(), "API listen on") {
		t.Errorf("dockerd log lacks \"API listen on\":\n%s", d.Log())
	}
}

// TestLoopBacking puts the data root on an xfs loop file system and checks
// that the daemon uses it and that cleanup detaches the loop device.
func TestLoopBacking(t *testing.T) {
	Require(t)
	var d *Daemon
	var dev string
	t.Run("daemon", func(t *testing.T) {
		d = Start(t, Options{Driver: "overlay2", Backing: "xfs", SizeMiB: 512})
		dev = d.LoopDevice()
		if !strings.HasPrefix(dev, "/dev/loop") {
			t.Fatalf("loop device = %q, want /dev/loopN", dev)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(d.DataRoot, &st); err != nil {
			t.Fatal(err)
		}
		const xfsMagic = 0x58465342
		if st.Type != xfsMagic {
			t.Errorf("data root file system magic = %#x, want xfs %#x", st.Type, xfsMagic)
		}
		points, err := mountsUnder(d.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(points) == 0 {
			t.Errorf("no mounts under %s", d.Dir)
		}
	})
	if d == nil {
		t.Fatal("Start did not return a daemon")
	}
	assertGone(t, d.Dir, dev)
}

func assertGone(t *testing.T, dir, loopDev string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after cleanup (stat: %v)", dir, err)
	}
	points, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) > 0 {
		t.Errorf("mounts left after cleanup: %v", points)
	}
	if pids := procsNaming(dir); len(pids) > 0 {
		t.Errorf("processes left after cleanup: %v", pids)
	}
	if loopDev != "" {
		out, err := exec.Command("losetup", "-a").CombinedOutput()
		if err != nil {
			t.Fatalf("losetup -a: %v: %s", err, out)
		}
		if strings.Contains(string(out), dir) {
			t.Errorf("loop device still attached to a file in %s:\n%s", dir, out)
		}
	}
}

func procsNaming(dir string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir+"/") {
			var pid int
			for _, c := range p.Name() {
				pid = pid*10 + int(c-'0')
			}
			if processExists(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestMountsUnderAndUnmount stacks tmpfs mounts under a directory whose
// name mountinfo escapes (a space) and checks that mountsUnder lists them
// deepest first, unescaped, and that unmountUnder removes them all.
func TestMountsUnderAndUnmount(t *testing.T) {
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "a b")
	inner := filepath.Join(dir, "inner")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmountUnder(dir) })
	for _, p := range []string{dir, inner} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", p, err)
		}
	}
	got, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{inner, dir}; !slices.Equal(got, want) {
		t.Errorf("mountsUnder = %q, want %q", got, want)
	}
	if err := unmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := mountsUnder(dir); err != nil || len(got) != 0 {
		t.Errorf("after unmountUnder: %q, %v", got, err)
	}
}
