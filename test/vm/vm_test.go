// Package vm runs layerprobe against a container engine in a real virtual
// machine, as developer workstations run theirs (Docker Desktop, Lima,
// Colima, OrbStack, Podman machine): a Debian 12 guest under QEMU with
// Debian's dockerd, a host directory shared into it with virtio-9p at the
// same path (Lima's 9p mounts), and the engine's socket forwarded to this
// host over ssh (Lima's and Colima's way). layerprobe runs on the host and
// must see topology vm: host native, bind through the 9p share, volume and
// container on the VM's disk.
package vm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// binary is the layerprobe binary the test runs, built once.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	var err error
	if binary, err = testharness.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testharness.RemoveBinary()
	os.Exit(code)
}

// The guest's root file system is testharness.DebianRoot: debootstrap's
// minimal base with systemd, the kernel (Debian's linux-image-amd64,
// booted by QEMU directly), Debian's Docker engine, fio, and sshd for the
// socket's forwarding; test/ops's box is made from the same one.

// guestFiles are written into the guest's root file system. lp-share
// mounts the virtio-9p share (tag lpshare) where the kernel command line's
// lp.share= says, with Lima's options for a writable 9p mount; it runs
// after systemd-tmpfiles has emptied /tmp, where the test's share lives.
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

// guestImage is the cached guest: a raw ext4 disk, the kernel and initrd
// taken out of it, and the ssh key root accepts.
type guestImage struct {
	dir, disk, kernel, initrd, key string
}

// cacheDir keeps the guest between runs (debootstrap takes minutes); its
// name hashes the recipe, so a changed recipe builds a new one.
func cacheDir() string {
	h := sha256.New()
	fmt.Fprintln(h, "layerprobe test guest 2", testharness.DebianPackages)
	for _, k := range sortedKeys(guestFiles) {
		fmt.Fprintln(h, k, guestFiles[k])
	}
	base := cmp.Or(os.Getenv("LAYERPROBE_TEST_CACHE"), "/var/cache/layerprobe-test")
	return filepath.Join(base, "vm-"+hex.EncodeToString(h.Sum(nil))[:16])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}

func tool(t *testing.T, name string) string {
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
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// buildGuest makes the guest image from a copy of the Debian root, unless
// the cache has it. It builds in a temporary directory beside the cache
// and renames it into place, so a killed build leaves no half image.
func buildGuest(t *testing.T) guestImage {
	t.Helper()
	dir := cacheDir()
	g := guestImage{dir: dir, disk: filepath.Join(dir, "disk.img"), kernel: filepath.Join(dir, "vmlinuz"),
		initrd: filepath.Join(dir, "initrd.img"), key: filepath.Join(dir, "key")}
	if fileExists(filepath.Join(dir, "done")) {
		return g
	}
	mkfs, keygen := tool(t, "mkfs.ext4"), tool(t, "ssh-keygen")
	debian := testharness.DebianRoot(t)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
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
	if out, err := run(t, time.Minute, nil, keygen, "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(tmp, "key")); err != nil {
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
	if out, err := run(t, time.Minute, nil, "chroot", root, "systemctl", "enable", "systemd-networkd", "lp-share.service"); err != nil {
		t.Fatalf("systemctl enable: %v\n%s", err, out)
	}
	// Nothing waits for the network to be "online": sshd and dockerd
	// start as soon as they can, which is all the test needs.
	_, _ = run(t, time.Minute, nil, "chroot", root, "systemctl", "disable", "systemd-networkd-wait-online.service")
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
	if err := os.Truncate(createFile(t, disk), 6<<30); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, 5*time.Minute, nil, mkfs, "-q", "-F", "-L", "lproot", "-d", root, disk); err != nil {
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

func createFile(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
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

// guestCmdline trims the guest's boot to what the test uses. apparmor=0:
// Debian's kernel enables AppArmor, and dockerd then wants
// apparmor_parser, which the guest does not need. quiet: fewer console
// writes, each one emulated. mitigations=off: the guest's speculative
// execution mitigations cost emulated instructions on every system call
// and protect nothing in a throwaway test guest. The blacklisted modules
// drive devices the guest has not got (-nodefaults) or nested KVM; the
// masked units are a login manager, a getty, a clock sync and a scrub
// that nothing here needs. no_timer_check: at boot the kernel waits a
// few busy-loop iterations for the emulated timer's first interrupt
// through the IO-APIC, and an emulator that the rest of the suite keeps
// off the CPU can miss them: "IO-APIC + timer doesn't work!", a panic
// 0.05 s into a fresh-clone run's boot. The check guards against broken
// chipsets, which QEMU's is not.
const guestCmdline = "apparmor=0 quiet mitigations=off no_timer_check" +
	" modprobe.blacklist=kvm,kvm_amd,kvm_intel,bochs,drm,parport_pc,pcspkr,floppy,sr_mod,sg" +
	" systemd.mask=systemd-logind.service systemd.mask=getty@tty1.service" +
	" systemd.mask=systemd-timesyncd.service systemd.mask=e2scrub_reap.service"

// vmEngine is the running guest and its forwarded engine socket.
type vmEngine struct {
	share  string // the host directory shared into the guest at the same path
	socket string // the guest's docker.sock, forwarded to this host
	dir    string
}

// bootGuest boots the guest with the share and forwards its engine's socket.
func bootGuest(t *testing.T, g guestImage) *vmEngine {
	t.Helper()
	qemu, ssh := tool(t, "qemu-system-x86_64"), tool(t, "ssh")
	// Short: unix socket paths have a 108-byte limit.
	dir, err := os.MkdirTemp("", "lpvm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	v := &vmEngine{share: filepath.Join(dir, "share"), socket: filepath.Join(dir, "docker.sock"), dir: dir}
	if err := os.MkdirAll(v.share, 0o755); err != nil {
		t.Fatal(err)
	}
	port := testharness.MustFreePort(t)
	console := filepath.Join(dir, "console.log")
	a := accel()
	// -nodefaults -vga none: no VGA, CD-ROM, floppy or parallel port for
	// the guest to probe and drive. Under TCG every instruction of the
	// guest's boot is this machine's CPU, which the rest of the suite
	// shares; a loaded machine took over five minutes to boot the guest
	// with them.
	args := []string{"-accel", a, "-smp", "2", "-m", "2048", "-nodefaults", "-vga", "none", "-display", "none", "-no-reboot",
		"-kernel", g.kernel, "-initrd", g.initrd,
		"-append", "root=/dev/vda rw console=ttyS0 panic=-1 " + guestCmdline + " lp.share=" + v.share,
		// snapshot=on: the guest's writes go to a temporary overlay, the
		// cached disk stays as built.
		"-drive", "file=" + g.disk + ",format=raw,if=virtio,snapshot=on",
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22", port), "-device", "virtio-net-pci,netdev=n0",
		"-virtfs", "local,path=" + v.share + ",mount_tag=lpshare,security_model=none,id=lpshare",
		"-serial", "file:" + console}
	if strings.HasPrefix(a, "kvm") {
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
	sshArgs := []string{"-i", g.key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=10", "-p", strconv.Itoa(port)}
	// Idle, the guest is up in about 30 s under TCG; the wait is for a
	// machine that the whole suite loads.
	testharness.Eventually(t, 12*time.Minute, 3*time.Second, "the guest's sshd and dockerd", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("qemu exited: %s", qout.String())
		}
		out, err := run(t, 30*time.Second, nil, ssh, append(sshArgs, "root@127.0.0.1", "docker version --format '{{.Server.Version}}' && mountpoint -q "+v.share)...)
		return err == nil, out
	})
	t.Logf("guest up with %s in %s", a, time.Since(start).Round(time.Second))
	// The socket's forwarding, as Lima and Colima forward theirs.
	fwd := exec.Command(ssh, append(sshArgs, "-nNT", "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=5",
		"-L", v.socket+":/run/docker.sock", "root@127.0.0.1")...)
	var fout bytes.Buffer
	fwd.Stdout, fwd.Stderr = &fout, &fout
	fp, err := testharness.Start(fwd)
	if err != nil {
		t.Fatalf("ssh -L: %v", err)
	}
	t.Cleanup(func() { fp.Stop(5 * time.Second) })
	testharness.Eventually(t, time.Minute, time.Second, "the forwarded engine socket", func() (bool, string) {
		if !fp.Running() {
			t.Fatalf("ssh -L exited: %s", fout.String())
		}
		out, err := run(t, 30*time.Second, []string{"DOCKER_HOST=unix://" + v.socket}, tool(t, "docker"), "info", "--format", "{{.Name}}")
		return err == nil && strings.TrimSpace(out) == "lpvm", out
	})
	return v
}

// TestEngineInVM boots the guest, runs `layerprobe run` and an agent
// cycle against its engine from this host, and checks the topology: every
// target measured, host on this host's disk (native), bind through the
// 9p share, the host arm's cgroup not applicable, and every ratio labelled
// as against the native host disk.
func TestEngineInVM(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "needs root (debootstrap, QEMU's 9p share as root)")
	}
	g := buildGuest(t)
	v := bootGuest(t, g)

	scratch := filepath.Join(v.share, "layerprobe")
	cfg := filepath.Join(v.dir, "config.yaml")
	// No topology key: layerprobe must find the VM itself (the data root
	// is not on this host and the engine answers from another kernel or
	// host name). Two workloads, the data path and the metadata path:
	// every execution in the emulated guest costs this machine's CPU, which
	// the rest of the test suite shares, and the topology is the same for
	// all four.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("workloads: [seqwrite, smallfiles]\nengines:\n  - name: vm\n    host: unix://%s\n    scratch_dir: %s\n", v.socket, scratch)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LAYERPROBE_LOCK_FILE=" + filepath.Join(v.dir, "lock")}

	// The agent first: its first cycle imports the probe image and keeps
	// it, and the run below, while the agent still runs, finds it in the
	// engine instead of importing it again (a minute through the
	// forwarded socket into an emulated guest).
	// The agent holds its measurement lock as long as it runs: a lock of
	// its own, so that the run can measure while the agent waits out its
	// interval (an hour) after the first cycle.
	stopAgent := agentCycle(t, cfg, []string{"LAYERPROBE_LOCK_FILE=" + filepath.Join(v.dir, "agent.lock")}, v)
	defer stopAgent()

	start := time.Now()
	// The run measures the data path alone: the agent's cycle above
	// measured small files through the share already, and each of their
	// executions through 9p in the emulated guest costs this machine
	// about a minute and a half of CPU.
	out, err := runOut(t, 8*time.Minute, env, binary, "run", "--config", cfg, "--profile", "smoke", "--rounds", "2", "--workloads", "seqwrite", "--output", "json", "--quiet")
	if err != nil {
		t.Fatalf("layerprobe run: %v\n%s", err, testharness.Tail(out.stderr, 30))
	}
	t.Logf("layerprobe run against the VM's engine: %s", time.Since(start).Round(time.Second))
	var r report.Run
	if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
		t.Fatalf("run JSON: %v\n%s", err, out.stdout)
	}
	if len(r.Engines) != 1 {
		t.Fatalf("engines: %d", len(r.Engines))
	}
	e := r.Engines[0]
	if e.Error != nil {
		t.Fatalf("engine error: %+v", e.Error)
	}
	if e.Topology != "vm" || e.Baseline != "native host disk" || e.Share != "9p" {
		t.Errorf("topology %q, baseline %q, share %q; want vm, native host disk, 9p (from the probe container's mountinfo)", e.Topology, e.Baseline, e.Share)
	}
	if e.HostArmCgroup != "not_applicable" {
		t.Errorf("host_arm_cgroup %q, want not_applicable", e.HostArmCgroup)
	}
	if e.DataRoot != "/var/lib/docker" {
		t.Errorf("data root %q, want the guest's /var/lib/docker", e.DataRoot)
	}
	ok := map[measure.Target]int{}
	for _, s := range e.Samples {
		if s.OK() {
			ok[s.Target]++
		}
	}
	for _, tg := range measure.Targets {
		if ok[tg] == 0 {
			t.Errorf("target %s: no successful sample (%v)", tg, ok)
		}
	}
	for _, res := range e.Results {
		if res.Target == measure.TargetBind {
			t.Logf("bind/%s vs native host: %+v", res.Workload, res)
		}
	}
}

type outputs struct{ stdout, stderr string }

func runOut(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (outputs, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return outputs{o.String(), e.String()}, err
}

// agentCycle runs the agent against the VM's engine until its first steady
// cycle, then checks /api/v1/engines and /metrics: topology vm, share 9p,
// and no layerprobe_host_arm_cgroup_joined series (its alert cannot fire
// for an arm that cannot join by design).
func agentCycle(t *testing.T, cfg string, env []string, v *vmEngine) (stop func()) {
	t.Helper()
	port := testharness.MustFreePort(t)
	state := filepath.Join(v.dir, "state")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	agentCfg := filepath.Join(v.dir, "agent.yaml")
	// The busy-host guards off, as in every agent test: the rest of the
	// suite loads this machine's disk and CPUs meanwhile, and a skipped
	// cycle would measure nothing. The bind mount alone beside the host:
	// the share is what sets an engine in a VM apart (the run below
	// measures the container and the volume), and every execution in the
	// emulated guest costs this machine's CPU.
	agentYAML := string(b) + fmt.Sprintf("targets: [bind]\nprofile: smoke\nagent:\n  listen_address: 127.0.0.1:%d\n  state_dir: %s\n  interval: 1h\n  jitter: 0\n"+
		"  cold_interval: 0s\n  max_io_pressure: 100\n  max_disk_util: 1\n  churn_quiet_period: 0s\n  budget:\n    rounds: 1\n", port, state)
	if err := os.WriteFile(agentCfg, []byte(agentYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "agent", "--config", agentCfg)
	cmd.Env = append(os.Environ(), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() { p.Stop(30 * time.Second) }
	defer func() {
		if t.Failed() {
			stop()
		}
	}()
	start := time.Now()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 10 * time.Second}
	var engines struct {
		Engines []struct {
			Name          string `json:"name"`
			Topology      string `json:"topology"`
			Share         string `json:"share"`
			Baseline      string `json:"baseline"`
			HostArmCgroup string `json:"host_arm_cgroup"`
			LastCycle     *struct {
				Result string `json:"result"`
			} `json:"last_cycle"`
		} `json:"engines"`
	}
	testharness.Eventually(t, 8*time.Minute, 5*time.Second, "the agent's first cycle on the VM's engine", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("agent exited:\n%s", testharness.Tail(log.String(), 30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := testharness.GetJSON(ctx, client, base+"/api/v1/engines", &engines); err != nil {
			return false, err.Error()
		}
		if len(engines.Engines) == 1 && engines.Engines[0].LastCycle != nil {
			return true, ""
		}
		return false, "no cycle yet"
	})
	t.Logf("the agent's first cycle on the VM's engine: %s", time.Since(start).Round(time.Second))
	e := engines.Engines[0]
	if e.LastCycle.Result != "ok" || e.Topology != "vm" || e.Share != "9p" || e.Baseline != "native host disk" || e.HostArmCgroup != "not_applicable" {
		t.Errorf("agent's engine: %+v (cycle %+v); want an ok cycle, topology vm, share 9p, baseline native host disk, host arm not_applicable\n%s",
			e, *e.LastCycle, testharness.Tail(log.String(), 20))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, m, err := testharness.Scrape(ctx, client, base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if _, found := m["layerprobe_host_arm_cgroup_joined"]; found {
		t.Errorf("/metrics has layerprobe_host_arm_cgroup_joined for an engine in a VM; its alert would fire")
	}
	if _, found := m["layerprobe_overhead_ratio"]; !found {
		t.Errorf("/metrics has no layerprobe_overhead_ratio after the cycle")
	}
	return stop
}
