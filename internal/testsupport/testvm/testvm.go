// Package testvm boots the Debian 12 guest that the tests and the
// benchmark run under QEMU for what this machine's kernel is not: an engine
// in a VM (test/vm's TestEngineInVM: a host directory shared into the guest
// with virtio-9p at the same path, as Lima shares one, and the engine's
// socket forwarded over ssh, as Lima and Colima forward theirs) and a
// cgroup v2 host (systemd as PID 1 on the unified hierarchy, Debian's
// kernel and Debian's dockerd).
//
// The guest's root file system is testharness.DebianRoot: debootstrap's
// minimal base with systemd, the kernel (Debian's linux-image-amd64, booted
// by QEMU directly), Debian's Docker engine, fio, and sshd. The image is
// built once per machine and cached; every boot writes to a throwaway
// overlay.
//
// It is for tests only; nothing in the shipped binary imports it.
package testvm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// guestFiles are written into the guest's root file system. lp-share
// mounts the virtio-9p share (tag lpshare) where the kernel command line's
// lp.share= says, with Lima's options for a writable 9p mount; it runs
// after systemd-tmpfiles has emptied /tmp, where a test's share lives.
var guestFiles = map[string]string{
	"etc/hostname":                        "lpvm\n",
	"etc/fstab":                           "/dev/vda / ext4 rw,errors=remount-ro 0 1\n",
	"etc/systemd/network/10-lp.network":   "[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n",
	"etc/docker/daemon.json":              `{"bridge": "none", "iptables": false, "ip6tables": false, "storage-driver": "overlay2"}` + "\n",
	"etc/systemd/system/lp-share.service": "[Unit]\nDescription=Mount the host's shared directory\nAfter=local-fs.target systemd-tmpfiles-setup.service\nBefore=docker.service\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/lp-share\n[Install]\nWantedBy=multi-user.target\n",
	"usr/local/sbin/lp-share": `#!/bin/sh
set -e
for arg in $(cat /proc/cmdline); do
  case $arg in
    lp.share=*)
      dir=${arg#lp.share=}
      mkdir -p "$dir"
      mount -t 9p -o trans=virtio,version=9p2000.L,msize=131072,cache=mmap,rw lpshare "$dir"
      ;;
  esac
done
`,
}

// Image is the cached guest: a raw ext4 disk, the kernel and initrd taken
// out of it, and the ssh key root accepts.
type Image struct {
	Dir, Disk, Kernel, Initrd, Key string
}

// cacheDir keeps the guest between runs (debootstrap takes minutes); its
// name hashes the recipe, so a changed recipe builds a new one.
func cacheDir() string {
	h := sha256.New()
	fmt.Fprintln(h, "layerprobe test guest 2", testharness.DebianPackages)
	keys := make([]string, 0, len(guestFiles))
	for k := range guestFiles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintln(h, k, guestFiles[k])
	}
	base := cmp.Or(os.Getenv("LAYERPROBE_TEST_CACHE"), "/var/cache/layerprobe-test")
	return filepath.Join(base, "vm-"+hex.EncodeToString(h.Sum(nil))[:16])
}

// Tool finds an executable in PATH or /usr/sbin, or skips t (fails in
// CI: testharness.SkipOrFail).
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if p2 := "/usr/sbin/" + name; fileExists(p2) {
			return p2
		}
		testharness.SkipOrFail(t, "%s: %v (scripts/install-deps.sh installs it)", name, err)
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// run runs a command with a timeout and returns its combined output.
func run(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// BuildImage makes the guest image from a copy of the Debian root, unless
// the cache has it. It builds in a temporary directory beside the cache
// and renames it into place, so a killed build leaves no half image. Two
// test processes that need it at once (test/vm and the benchmark, or two
// packages of `make test`) build it once: a file lock makes the second
// wait for the first.
func BuildImage(t testing.TB) Image {
	t.Helper()
	dir := cacheDir()
	g := Image{Dir: dir, Disk: filepath.Join(dir, "disk.img"), Kernel: filepath.Join(dir, "vmlinuz"),
		Initrd: filepath.Join(dir, "initrd.img"), Key: filepath.Join(dir, "key")}
	if fileExists(filepath.Join(dir, "done")) {
		return g
	}
	mkfs, keygen := Tool(t, "mkfs.ext4"), Tool(t, "ssh-keygen")
	debian := testharness.DebianRoot(t)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	if fileExists(filepath.Join(dir, "done")) {
		return g
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "building-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	root := filepath.Join(tmp, "root")
	testharness.CopyTree(t, debian, root)
	for p, content := range guestFiles {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(time.Minute, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(tmp, "key")); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(filepath.Join(tmp, "key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "root/.ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "root/.ssh/authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(time.Minute, nil, "chroot", root, "systemctl", "enable", "systemd-networkd", "lp-share.service"); err != nil {
		t.Fatalf("systemctl enable: %v\n%s", err, out)
	}
	// Nothing waits for the network to be "online": sshd and dockerd
	// start as soon as they can, which is all the tests need.
	_, _ = run(time.Minute, nil, "chroot", root, "systemctl", "disable", "systemd-networkd-wait-online.service")
	for _, k := range []struct{ glob, to string }{{"boot/vmlinuz-*", "vmlinuz"}, {"boot/initrd.img-*", "initrd.img"}} {
		m, _ := filepath.Glob(filepath.Join(root, k.glob))
		if len(m) != 1 {
			t.Fatalf("the guest's %s: %v", k.glob, m)
		}
		b, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, k.to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disk := filepath.Join(tmp, "disk.img")
	f, err := os.Create(disk)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(disk, 6<<30); err != nil {
		t.Fatal(err)
	}
	if out, err := run(5*time.Minute, nil, mkfs, "-q", "-F", "-L", "lproot", "-d", root, disk); err != nil {
		t.Fatalf("mkfs.ext4 -d: %v\n%s", err, out)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest image built in %s (from the Debian root with docker.io, fio and the kernel)", time.Since(start).Round(time.Second))
	return g
}

// accel picks QEMU's accelerator: KVM where /dev/kvm boots an unmodified
// guest, TCG otherwise. A /dev/kvm served by kvm_pvm (the
// pagetable-based VM that nested sandboxes offer) runs only guests with
// PVM support: Debian's kernel hangs there in its decompressor, right
// after the real-mode setup prints "Probing EDD". LAYERPROBE_VM_ACCEL
// overrides the choice.
func accel() string {
	if a := os.Getenv("LAYERPROBE_VM_ACCEL"); a != "" {
		return a
	}
	if !fileExists("/dev/kvm") || fileExists("/sys/module/kvm_pvm") {
		return "tcg,thread=multi"
	}
	return "kvm"
}

// guestCmdline trims the guest's boot to what the tests use. apparmor=0:
// Debian's kernel enables AppArmor, and dockerd then wants
// apparmor_parser, which the guest does not need. quiet: fewer console
// writes, each one emulated. mitigations=off: the guest's speculative
// execution mitigations cost emulated instructions on every system call
// and protect nothing in a throwaway test guest. The blacklisted modules
// drive devices the guest has not got (-nodefaults) or nested KVM; the
// masked units are a login manager, two gettys, a clock sync and a scrub
// that nothing here needs. no_timer_check: at boot the kernel waits a
// few busy-loop iterations for the emulated timer's first interrupt
// through the IO-APIC, and an emulator that the rest of the suite keeps
// off the CPU can miss them: "IO-APIC + timer doesn't work!", a panic
// 0.05 s into a fresh-clone run's boot. The check guards against broken
// chipsets, which QEMU's is not.
const guestCmdline = "apparmor=0 quiet mitigations=off no_timer_check" +
	" modprobe.blacklist=kvm,kvm_amd,kvm_intel,bochs,drm,parport_pc,pcspkr,floppy,sr_mod,sg" +
	" systemd.mask=systemd-logind.service systemd.mask=getty@tty1.service" +
	" systemd.mask=systemd-timesyncd.service systemd.mask=e2scrub_reap.service systemd.mask=serial-getty@ttyS0.service"

// Options is how a guest boots.
type Options struct {
	// Cmdline is added to the kernel command line (guestCmdline).
	Cmdline string
	// Memory is the guest's RAM in MiB (2048 unless set).
	Memory int
	// Wait is how long the boot may take until sshd, dockerd and the
	// share answer (12 minutes unless set).
	Wait time.Duration
}

// Guest is a running guest: Share is a directory of this machine that the
// guest sees at the same path (virtio-9p), Dir a directory of the test's
// beside it (not shared).
type Guest struct {
	Share, Dir string
	// Accel is QEMU's accelerator (accel), Booted how long the boot took
	// until sshd, dockerd and the share answered.
	Accel  string
	Booted time.Duration

	ssh     string
	sshArgs []string
}

// Boot boots the guest from img with a share, and waits for its sshd, its
// dockerd and the share. The guest stops when t ends; its console's tail
// is logged when t failed.
func Boot(t testing.TB, img Image, o Options) *Guest {
	t.Helper()
	qemu, ssh := Tool(t, "qemu-system-x86_64"), Tool(t, "ssh")
	// Short: unix socket paths have a 108-byte limit.
	dir, err := os.MkdirTemp("", "lpvm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g := &Guest{Share: filepath.Join(dir, "share"), Dir: dir, Accel: accel(), ssh: ssh}
	if err := os.MkdirAll(g.Share, 0o755); err != nil {
		t.Fatal(err)
	}
	port := testharness.MustFreePort(t)
	console := filepath.Join(dir, "console.log")
	// -nodefaults -vga none: no VGA, CD-ROM, floppy or parallel port for
	// the guest to probe and drive. Under TCG every instruction of the
	// guest's boot is this machine's CPU, which the rest of the suite
	// shares; a loaded machine took over five minutes to boot the guest
	// with them.
	args := []string{"-accel", g.Accel, "-smp", "2", "-m", strconv.Itoa(cmp.Or(o.Memory, 2048)), "-nodefaults", "-vga", "none", "-display", "none", "-no-reboot",
		"-kernel", img.Kernel, "-initrd", img.Initrd,
		"-append", strings.TrimSpace("root=/dev/vda rw console=ttyS0 panic=-1 " + guestCmdline + " lp.share=" + g.Share + " " + o.Cmdline),
		// snapshot=on: the guest's writes go to a temporary overlay, the
		// cached disk stays as built.
		"-drive", "file=" + img.Disk + ",format=raw,if=virtio,snapshot=on",
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22", port), "-device", "virtio-net-pci,netdev=n0",
		"-virtfs", "local,path=" + g.Share + ",mount_tag=lpshare,security_model=none,id=lpshare",
		"-serial", "file:" + console}
	if strings.HasPrefix(g.Accel, "kvm") {
		args = append(args, "-cpu", "host")
	} else {
		args = append(args, "-cpu", "max")
	}
	cmd := exec.Command(qemu, args...)
	var qout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qout, &qout
	cmd.Env = append(os.Environ(), "TMPDIR="+dir) // the snapshot overlay
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatalf("qemu: %v", err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(console)
			t.Logf("guest console (tail):\n%s", testharness.Tail(string(b), 40))
		}
	})
	start := time.Now()
	g.sshArgs = []string{"-i", img.Key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=30", "-o", "ServerAliveInterval=15", "-p", strconv.Itoa(port)}
	// Idle, the guest is up in about 30 s under TCG; the wait is for a
	// machine that the whole suite loads.
	testharness.Eventually(t, cmp.Or(o.Wait, 12*time.Minute), 3*time.Second, "the guest's sshd and dockerd", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("qemu exited: %s", qout.String())
		}
		r := g.Run(30*time.Second, "docker version --format '{{.Server.Version}}' && mountpoint -q "+g.Share)
		return r.Err == nil, r.String()
	})
	g.Booted = time.Since(start)
	t.Logf("guest up with %s in %s", g.Accel, g.Booted.Round(time.Second))
	return g
}

// Result is what a command in the guest printed.
type Result struct {
	Stdout, Stderr string
	Err            error
}

func (r Result) String() string {
	return fmt.Sprintf("err: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
}

// Run runs a shell command line as root in the guest, over ssh, within
// timeout.
func (g *Guest) Run(timeout time.Duration, script string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.ssh, append(append([]string{}, g.sshArgs...), "root@127.0.0.1", script)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%q did not finish in the guest within %s: %w", script, timeout, errors.Join(err, ctx.Err()))
	}
	return Result{out.String(), errb.String(), err}
}

// Exec runs argv in the guest, each argument quoted for the guest's shell.
func (g *Guest) Exec(timeout time.Duration, argv ...string) Result {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return g.Run(timeout, strings.Join(q, " "))
}

// Quote quotes s for a POSIX shell.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Forward forwards the guest's unix socket remote to the local path
// local over ssh (Lima's and Colima's way to reach a guest's engine),
// until t ends.
func (g *Guest) Forward(t testing.TB, local, remote string) {
	t.Helper()
	g.forward(t, local+":"+remote, func() bool { return fileExists(local) })
}

// ForwardPort forwards a free port of this machine's loopback to port on
// the guest's loopback over ssh, until t ends, and returns it.
func (g *Guest) ForwardPort(t testing.TB, port int) int {
	t.Helper()
	local := testharness.MustFreePort(t)
	g.forward(t, fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", local, port), func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", local), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return local
}

// forward runs `ssh -L spec` until t ends, once listening says its local
// end listens.
func (g *Guest) forward(t testing.TB, spec string, listening func() bool) {
	t.Helper()
	fwd := exec.Command(g.ssh, append(append([]string{}, g.sshArgs...), "-nNT", "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=5",
		"-L", spec, "root@127.0.0.1")...)
	fp, err := testharness.Start(fwd)
	if err != nil {
		t.Fatalf("ssh -L: %v", err)
	}
	t.Cleanup(func() { fp.Stop(5 * time.Second) })
	testharness.Eventually(t, 2*time.Minute, time.Second, "the forwarding "+spec, func() (bool, string) {
		if !fp.Running() {
			t.Fatalf("ssh -L %s exited: %s", spec, fp.Log.String())
		}
		return listening(), "not listening yet"
	})
}

// CgroupV2 checks that the guest runs on the unified hierarchy (cgroup v2)
// with the cpu controller, and its Docker on it with systemd's cgroup
// driver, as Debian 12 and every current distribution run them.
func (g *Guest) CgroupV2() error {
	r := g.Run(time.Minute, "stat -f -c %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers; docker info --format '{{.CgroupVersion}} {{.CgroupDriver}}'")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Err != nil || len(lines) != 3 || lines[0] != "cgroup2fs" || !strings.Contains(" "+lines[1]+" ", " cpu ") || lines[2] != "2 systemd" {
		return fmt.Errorf("the guest is not on cgroup v2 with the cpu controller and Docker on it (want cgroup2fs, the controllers, Docker's \"2 systemd\"):\n%s", r)
	}
	return nil
}

// V2Cmdline boots the guest's systemd on the unified hierarchy (Options'
// Cmdline). Debian 12's systemd does so by default; a test says so rather
// than rely on it.
const V2Cmdline = "systemd.unified_cgroup_hierarchy=1"
