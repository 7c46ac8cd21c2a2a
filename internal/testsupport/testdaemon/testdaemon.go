//go:build linux

// Package testdaemon starts private container engines for tests: dockerd,
// Podman's Docker-compatible API service, or containerd without Docker.
//
// Every daemon lives in its own short directory under /tmp (its data root,
// exec root, pid file, socket, config file and log), talks only through its
// own unix socket and never touches the machine's own engines: no bridge, no
// iptables, its own containerd started by dockerd inside the exec root; for
// Podman its own containers.conf and storage.conf (graph root, run root,
// temporary and network directories inside the daemon's directory). The
// data root can sit on the root file system or on a fresh btrfs or xfs file
// system in a loop file, so tests can exercise several storage drivers and
// backing file systems on one machine. A private containerd is configured
// the same way: its own root, state and sockets, no CRI plugin unless a
// test (a kubelet's engine) asks for it with its own CRI configuration.
//
// Cleanup is registered with t.Cleanup and is thorough because a leaked
// daemon, mount or loop device outlives the test binary: it stops the daemon,
// kills the containerd and shim processes that belong to its exec root and
// the processes of its containers, unmounts everything under its directory
// (deepest first), detaches the loop device and removes the directory.
package testdaemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// Engines Options.Engine can name.
const (
	EngineDocker = "docker" // dockerd (the default)
	EnginePodman = "podman" // podman system service, rootful
	// EngineContainerd is containerd on its own, as on a Kubernetes node
	// (StartContainerd).
	EngineContainerd = "containerd"
)

// Options choose the engine and its storage.
type Options struct {
	// Engine is EngineDocker ("" too), EnginePodman or EngineContainerd.
	Engine string
	// Driver is the storage driver: overlay2, btrfs, vfs or fuse-overlayfs
	// for dockerd ("" = overlay2), overlay for Podman ("" = overlay); for
	// containerd the snapshotter: overlayfs, btrfs or native ("" =
	// overlayfs).
	Driver string
	// Backing is the file system under the data root: "" for a directory on
	// the root file system, "btrfs" or "xfs" for a fresh file system of
	// SizeMiB in a loop file, BackingRAM for ext4 in a loop file in a
	// tmpfs (a device without a disk's noise, for the benchmark's quiet
	// device). The btrfs driver needs Backing "btrfs" (it is chosen when
	// left empty).
	Backing string
	// SizeMiB sizes the loop file (sparse) for Backing btrfs or xfs; 0 = 1024.
	SizeMiB int
	// User, when not 0, runs Podman rootless as this uid (and gid), in a
	// user namespace of its own: the daemon's directory is the user's,
	// with its home and runtime directories. Docker daemons run as root.
	User int
	// EngineLimits, for Podman, leaves out the containers.conf limits
	// below and starts the service with a hard open-file limit of
	// ConstrainedNoFile: a user's Podman on a constrained host, whose
	// default container limits (1048576) exceed what the host allows.
	// Only containers that set their own limits start there.
	EngineLimits bool
	// CRI, for containerd, turns its CRI plugin on (a kubelet's engine)
	// with this TOML as the plugin's own table, the lines below
	// [plugins."io.containerd.grpc.v1.cri"]. The socket is then
	// <Dir>/run/containerd.sock, in a directory of its own as a node's
	// /run/containerd: a pod that mounts the socket's directory gets
	// nothing else of the daemon's.
	CRI string
}

// ConstrainedNoFile is the hard open-file limit of a Podman service started
// with Options.EngineLimits (a CI runner's, for example).
const ConstrainedNoFile = 20000

// Daemon is a running private dockerd, Podman service or containerd.
type Daemon struct {
	Host     string // unix://<Dir>/docker.sock
	DataRoot string // <Dir>/root
	ExecRoot string // <Dir>/exec
	Dir      string // the daemon's private directory under /tmp
	// TempDir is Podman's TMPDIR, <Dir>/tmp: what its API spools there
	// goes with the daemon, and a test can see what it left.
	TempDir string

	t       testing.TB
	opts    Options
	logPath string
	loopDev string // /dev/loopN when Backing is a loop file system

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of the daemon.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	err    error         // Wait's result, readable after exited is closed
}

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	// shutdownTimeout is how long dockerd waits for containers on shutdown
	// before killing them; short, so a test's Stop does not take the
	// default 15 s per stubborn container.
	shutdownTimeout = 5
)

// Require skips the test (or fails it when env CI is set) unless this
// machine can run private daemons: root, dockerd, containerd and runc.
func Require(t testing.TB) {
	t.Helper()
	if err := prerequisites(EngineDocker, ""); err != nil {
		testharness.SkipOrFail(t, "testdaemon: %v", err)
	}
}

func prerequisites(engine, driver string) error {
	if os.Geteuid() != 0 {
		return errors.New("private container engines need root")
	}
	bins := []string{"dockerd", "containerd", "runc"}
	switch engine {
	case EnginePodman:
		bins = []string{"podman", "conmon", "runc"}
	case EngineContainerd:
		bins = []string{"containerd", "containerd-shim-runc-v2", "runc"}
	}
	if driver == "fuse-overlayfs" {
		bins = append(bins, "fuse-overlayfs")
		if _, err := os.Stat("/dev/fuse"); err != nil {
			return fmt.Errorf("fuse-overlayfs needs /dev/fuse: %w", err)
		}
	}
	for _, bin := range bins {
		if _, err := LookPath(bin); err != nil {
			return fmt.Errorf("%s not found: %w", bin, err)
		}
	}
	return nil
}

// LookPath finds a binary in PATH or in the sbin directories, which a
// non-login root shell may lack in PATH.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not in PATH or sbin", name)
}

// Start starts a private engine (dockerd unless opts.Engine says otherwise)
// and waits until it answers (/_ping; containerd's version call). Its
// cleanup is registered with t.Cleanup.
func Start(t testing.TB, opts Options) *Daemon {
	t.Helper()
	if opts.Engine == "" {
		opts.Engine = EngineDocker
	}
	if opts.Driver == "" {
		opts.Driver = map[string]string{EngineDocker: "overlay2", EnginePodman: "overlay", EngineContainerd: "overlayfs"}[opts.Engine]
	}
	if opts.Driver == "btrfs" && opts.Backing == "" {
		opts.Backing = "btrfs"
	}
	if opts.SizeMiB == 0 {
		opts.SizeMiB = 1024
	}
	switch opts.Engine + "/" + opts.Driver {
	case "docker/overlay2", "docker/btrfs", "docker/vfs", "docker/fuse-overlayfs", "podman/overlay",
		"containerd/overlayfs", "containerd/btrfs", "containerd/native":
	default:
		t.Fatalf("testdaemon: unsupported engine and driver %s/%s (want docker with overlay2, btrfs, vfs or fuse-overlayfs, podman with overlay, or containerd with overlayfs, btrfs or native)",
			opts.Engine, opts.Driver)
	}
	if err := prerequisites(opts.Engine, opts.Driver); err != nil {
		testharness.SkipOrFail(t, "testdaemon: %v", err)
	}
	if opts.User != 0 && (opts.Engine != EnginePodman || opts.Backing != "") {
		t.Fatalf("testdaemon: a rootless daemon is Podman on the root file system")
	}
	switch opts.Backing {
	case "":
	case "btrfs", "xfs", BackingRAM:
		if err := loopPrerequisites(loopFS(opts.Backing)); err != nil {
			testharness.SkipOrFail(t, "testdaemon: %v", err)
		}
	default:
		t.Fatalf("testdaemon: unsupported backing %q (want \"\", btrfs, xfs or %s)", opts.Backing, BackingRAM)
	}

	// Not t.TempDir(): its long path would push the socket path past the
	// 108-byte sun_path limit.
	dir, err := os.MkdirTemp("/tmp", "lptd")
	if err != nil {
		t.Fatalf("testdaemon: create dir: %v", err)
	}
	sock := map[string]string{EngineDocker: "docker.sock", EnginePodman: "podman.sock", EngineContainerd: "containerd.sock"}[opts.Engine]
	if opts.CRI != "" {
		if opts.Engine != EngineContainerd {
			t.Fatalf("testdaemon: CRI is containerd's")
		}
		sock = filepath.Join("run", sock)
		if err := os.Mkdir(filepath.Join(dir, "run"), 0o711); err != nil {
			t.Fatalf("testdaemon: %v", err)
		}
	}
	d := &Daemon{
		Host:     "unix://" + filepath.Join(dir, sock),
		DataRoot: filepath.Join(dir, "root"),
		ExecRoot: filepath.Join(dir, "exec"),
		Dir:      dir,
		t:        t,
		opts:     opts,
		logPath:  filepath.Join(dir, opts.Engine+".log"),
	}
	if opts.Engine == EngineContainerd {
		d.ExecRoot = filepath.Join(dir, "state")
	}
	t.Cleanup(d.cleanup)

	if err := os.MkdirAll(d.DataRoot, 0o710); err != nil {
		t.Fatalf("testdaemon: %v", err)
	}
	if opts.Engine == EnginePodman {
		// Before handOver: a rootless Podman's TMPDIR is its user's.
		d.TempDir = filepath.Join(d.Dir, "tmp")
		if err := os.MkdirAll(d.TempDir, 0o700); err != nil {
			t.Fatalf("testdaemon: %v", err)
		}
	}
	if opts.User != 0 {
		if err := d.handOver(); err != nil {
			t.Fatalf("testdaemon: %v", err)
		}
	}
	if err := d.writeConfig(); err != nil {
		t.Fatalf("testdaemon: %v", err)
	}
	if opts.Backing != "" {
		if err := d.setupLoop(); err != nil {
			t.Fatalf("testdaemon: %s loop file system: %v", opts.Backing, err)
		}
	}
	if err := d.start(); err != nil {
		t.Fatalf("testdaemon: %v\n%s", err, d.logTail())
	}
	return d
}

// BackingRAM is Options.Backing for ext4 on a loop file in a tmpfs.
const BackingRAM = "ext4-ram"

// loopFS is the file system a loop backing formats.
func loopFS(backing string) string {
	if backing == BackingRAM {
		return "ext4"
	}
	return backing
}

func loopPrerequisites(fs string) error {
	for _, bin := range []string{"losetup", "mkfs." + fs} {
		if _, err := LookPath(bin); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no loop device support: %w", err)
	}
	b, err := os.ReadFile("/proc/filesystems")
	if err == nil && !slices.ContainsFunc(strings.Fields(string(b)), func(s string) bool { return s == fs }) {
		return fmt.Errorf("kernel does not support %s", fs)
	}
	return nil
}

// setupLoop makes a sparse loop file, formats it and mounts it on DataRoot.
func (d *Daemon) setupLoop() error {
	img := filepath.Join(d.Dir, "disk.img")
	if d.opts.Backing == BackingRAM {
		// The loop file in memory: a tmpfs a little larger than it.
		ram := filepath.Join(d.Dir, "ram")
		if err := os.Mkdir(ram, 0o700); err != nil {
			return err
		}
		if err := syscall.Mount("tmpfs", ram, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", d.opts.SizeMiB+16)); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", ram, err)
		}
		img = filepath.Join(ram, "disk.img")
	}
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(d.opts.SizeMiB) << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("size loop file: %w", err)
	}
	mkfs := []string{"mkfs." + d.opts.Backing, "-f", "-q", img}
	switch d.opts.Backing {
	case BackingRAM:
		mkfs = []string{"mkfs.ext4", "-F", "-q", img}
	case "xfs":
		// As RHEL formats it (and mkfs.xfs defaults to since 5.1):
		// d_type for overlay, and shared extents, so copy-up can clone.
		mkfs = []string{"mkfs.xfs", "-f", "-q", "-n", "ftype=1", "-m", "reflink=1", img}
	}
	if out, err := run(mkfs...); err != nil {
		return fmt.Errorf("%s: %w: %s", mkfs[0], err, out)
	}
	out, err := run("losetup", "--find", "--show", img)
	if err != nil {
		return fmt.Errorf("losetup: %w: %s", err, out)
	}
	d.loopDev = strings.TrimSpace(out)
	if err := syscall.Mount(d.loopDev, d.DataRoot, loopFS(d.opts.Backing), 0, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", d.loopDev, d.DataRoot, err)
	}
	return nil
}

func run(argv ...string) (string, error) {
	p, err := LookPath(argv[0])
	if err != nil {
		return "", err
	}
	out, err := exec.Command(p, argv[1:]...).CombinedOutput()
	return string(out), err
}

// StartContainerd starts a private containerd (no Docker) with opts.Driver
// as its snapshotter (overlayfs, btrfs or native; "" = overlayfs): Start
// with Engine EngineContainerd. Host is its socket, DataRoot its root,
// ExecRoot its state directory.
func StartContainerd(t testing.TB, opts Options) *Daemon {
	t.Helper()
	opts.Engine = EngineContainerd
	return Start(t, opts)
}

// handOver gives a rootless daemon's directory to its user, with a home
// and a runtime directory of its own, and lets everyone reach the socket.
func (d *Daemon) handOver() error {
	for _, sub := range []string{"home", "config", "xdg"} {
		if err := os.MkdirAll(filepath.Join(d.Dir, sub), 0o700); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(d.Dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, d.opts.User, d.opts.User)
	})
	if err != nil {
		return err
	}
	return os.Chmod(d.Dir, 0o755)
}

// writeConfig writes the engine's configuration files into its directory.
// For dockerd an empty daemon.json keeps the machine's
// /etc/docker/daemon.json (which could conflict with the flags) out of the
// test. Podman reads containers.conf and storage.conf from the paths in
// its environment (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF) instead of
// /etc/containers and /usr/share/containers. containerd gets its root,
// state, sockets and plugin directories under the daemon's directory, no
// CRI plugin (it would want CNI; Options.CRI turns it on for a kubelet) and no debug or
// metrics listener.
func (d *Daemon) writeConfig() error {
	switch d.opts.Engine {
	case EngineDocker:
		return os.WriteFile(filepath.Join(d.Dir, "daemon.json"), []byte("{}\n"), 0o600)
	case EngineContainerd:
		return d.writeContainerdConfig()
	}
	storage := fmt.Sprintf("[storage]\ndriver = %q\ngraphroot = %q\nrunroot = %q\n",
		d.opts.Driver, d.DataRoot, d.ExecRoot)
	// The limits: Podman's default open-file and process limits
	// (1048576) need CAP_SYS_RESOURCE above the hard limits its service
	// inherits, which a restricted root (a container, some VMs) lacks;
	// these stay below. runc: crun 1.8 refuses a hybrid cgroup hierarchy.
	// cgroupfs and file events: no systemd needed.
	limits := fmt.Sprintf("default_ulimits = [\"nofile=%[1]d:%[1]d\", \"nproc=%[2]d:%[2]d\"]\n", podmanNoFile, podmanNProc)
	if d.opts.EngineLimits {
		limits = ""
	}
	containers := fmt.Sprintf(`[containers]
%[2]s
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = %[1]q
runtime = "runc"
tmp_dir = %[3]q
static_dir = %[4]q
volume_path = %[5]q

[network]
network_config_dir = %[6]q
`, filepath.Join(d.Dir, "events.log"), limits, filepath.Join(d.ExecRoot, "libpod-tmp"),
		filepath.Join(d.DataRoot, "libpod"), filepath.Join(d.DataRoot, "volumes"), filepath.Join(d.Dir, "networks"))
	if d.opts.User != 0 {
		// A rootless store ignores graphroot.
		storage += fmt.Sprintf("rootless_storage_path = %q\n", d.DataRoot)
	}
	for name, content := range map[string]string{"storage.conf": storage, "containers.conf": containers} {
		path := filepath.Join(d.Dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
		if err := os.Lchown(path, max(d.opts.User, 0), max(d.opts.User, 0)); err != nil {
			return err
		}
	}
	return nil
}

func (d *Daemon) writeContainerdConfig() error {
	sock := strings.TrimPrefix(d.Host, "unix://")
	disabled := `disabled_plugins = ["io.containerd.grpc.v1.cri"]`
	if d.opts.CRI != "" {
		disabled = ""
	}
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
%s

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, d.DataRoot, d.ExecRoot, disabled, sock, sock+".ttrpc", filepath.Join(d.Dir, "opt"))
	if d.opts.CRI != "" {
		conf += "\n[plugins.\"io.containerd.grpc.v1.cri\"]\n" + d.opts.CRI
	}
	return os.WriteFile(filepath.Join(d.Dir, "containerd.toml"), []byte(conf), 0o600)
}

// Env is the environment a client of a rootless daemon runs with: its
// user's home and runtime directories. Empty for a daemon run as root.
func (d *Daemon) Env() []string {
	if d.opts.User == 0 {
		return nil
	}
	return []string{"HOME=" + filepath.Join(d.Dir, "home"), "XDG_RUNTIME_DIR=" + filepath.Join(d.Dir, "xdg"),
		"XDG_CONFIG_HOME=" + filepath.Join(d.Dir, "config")}
}

// User is the uid a rootless daemon runs as, 0 for root.
func (d *Daemon) User() int { return d.opts.User }

// Podman's container limits (see writeConfig): enough for any test, below
// what the machine's own processes may have.
const (
	podmanNoFile = 4096
	podmanNProc  = 4096
)

// command is the engine's program, arguments and environment.
func (d *Daemon) command() (string, []string, []string, error) {
	if d.opts.Engine == EnginePodman {
		bin, err := LookPath("podman")
		if err != nil {
			return "", nil, nil, err
		}
		env := append(daemonEnv(),
			"TMPDIR="+d.TempDir,
			"CONTAINERS_CONF="+filepath.Join(d.Dir, "containers.conf"),
			"CONTAINERS_STORAGE_CONF="+filepath.Join(d.Dir, "storage.conf"))
		env = append(env, d.Env()...)
		// --time=0: serve until stopped, not only while clients talk.
		args := []string{"system", "service", "--time=0", d.Host}
		if d.opts.EngineLimits {
			prlimit, err := LookPath("prlimit")
			if err != nil {
				return "", nil, nil, err
			}
			args = append([]string{fmt.Sprintf("--nofile=%d:%d", ConstrainedNoFile, ConstrainedNoFile), "--", bin}, args...)
			bin = prlimit
		}
		return bin, args, env, nil
	}
	if d.opts.Engine == EngineContainerd {
		bin, err := LookPath("containerd")
		if err != nil {
			return "", nil, nil, err
		}
		return bin, []string{"--config", filepath.Join(d.Dir, "containerd.toml"), "--log-level", "info"}, daemonEnv(), nil
	}
	bin, err := LookPath("dockerd")
	if err != nil {
		return "", nil, nil, err
	}
	return bin, d.args(), daemonEnv(), nil
}

func (d *Daemon) args() []string {
	return []string{
		"--data-root", d.DataRoot,
		"--exec-root", d.ExecRoot,
		"--pidfile", filepath.Join(d.Dir, "dockerd.pid"),
		"--config-file", filepath.Join(d.Dir, "daemon.json"),
		"-H", d.Host,
		"--bridge", "none",
		"--iptables=false",
		"--ip6tables=false", // 20.10 has the flag (default false); say it anyway
		"--ip-masq=false",
		"--storage-driver", d.opts.Driver,
		"--shutdown-timeout", strconv.Itoa(shutdownTimeout),
	}
}

// start launches the daemon and waits until it answers.
func (d *Daemon) start() error {
	d.mu.Lock()
	running := d.proc != nil
	d.mu.Unlock()
	if running {
		return errors.New("daemon already running")
	}
	bin, args, env, err := d.command()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	// Its own process group: a ^C on the test does not reach dockerd before
	// the cleanup can stop it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if d.opts.User != 0 {
		u := uint32(d.opts.User)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u, Gid: u}
		cmd.Dir = d.Dir
	}
	err = cmd.Start()
	logf.Close() // the child holds its own descriptor
	if err != nil {
		return fmt.Errorf("start %s: %w", d.opts.Engine, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	d.mu.Lock()
	d.proc = p
	d.mu.Unlock()

	sock := strings.TrimPrefix(d.Host, "unix://")
	ping := pingSocket
	if d.opts.Engine == EngineContainerd {
		ping = pingContainerd
	}
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(sock) == nil {
			return nil
		}
		select {
		case <-p.exited:
			d.mu.Lock()
			d.proc = nil
			d.mu.Unlock()
			return fmt.Errorf("%s exited during startup: %v", d.opts.Engine, p.err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within %s", d.opts.Engine, sock, startTimeout)
		}
	}
}

// daemonEnv is the test's environment without the variables that would
// point dockerd (or its containerd) at anything but its own directories.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
			"CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINER_HOST", "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE":
			continue
		case "PATH":
			kv += ":/usr/local/sbin:/usr/sbin:/sbin"
		}
		env = append(env, kv)
	}
	return env
}

func pingSocket(sock string) error {
	c := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		}},
	}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/_ping: %s", resp.Status)
	}
	return nil
}

// pingContainerd asks containerd's version service.
func pingContainerd(sock string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{})
	return err
}

// Stop stops the daemon: SIGTERM, then SIGKILL if it has not exited after 30 s.
// Stopping a stopped daemon does nothing.
func (d *Daemon) Stop() {
	d.t.Helper()
	d.signalAndWait(syscall.SIGTERM, stopTimeout)
}

// Kill kills dockerd with SIGKILL, the way a crash would: containers are not
// stopped and their shims keep running. dockerd's containerd dies with it
// (dockerd starts it with a parent-death signal); Kill waits until it has
// gone, so that Restart starts a fresh one rather than trying to reuse a
// dying process.
func (d *Daemon) Kill() {
	d.t.Helper()
	d.signalAndWait(syscall.SIGKILL, stopTimeout)
	b, err := os.ReadFile(filepath.Join(d.ExecRoot, "containerd", "containerd.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	// Not its command line: a zombie has none left.
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "containerd" {
		return // gone already, or the pid was reused
	}
	for procExists(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if procExists(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procExists reports whether /proc has an entry for pid, zombies included:
// dockerd takes a zombie containerd for a live one.
func procExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Restart stops the daemon if it runs and starts it again on the same data
// root.
func (d *Daemon) Restart() {
	d.t.Helper()
	d.Stop()
	if err := d.start(); err != nil {
		d.t.Fatalf("testdaemon: restart: %v\n%s", err, d.logTail())
	}
}

func (d *Daemon) signalAndWait(sig syscall.Signal, timeout time.Duration) {
	d.mu.Lock()
	p := d.proc
	d.proc = nil
	d.mu.Unlock()
	if p == nil {
		return
	}
	if d.opts.User != 0 {
		// Rootless Podman serves from a child it re-executed inside its
		// user namespace; the signal goes to the whole process group.
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	} else {
		_ = p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.exited:
	case <-time.After(timeout):
		d.t.Logf("testdaemon: %s (pid %d) ignored %v for %s; killing it", d.opts.Engine, p.cmd.Process.Pid, sig, timeout)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// cleanup removes every trace of the daemon; it runs even when the test
// failed half way through Start.
func (d *Daemon) cleanup() {
	t := d.t
	d.Stop()
	if t.Failed() {
		t.Logf("testdaemon: %s log (%s):\n%s", d.opts.Engine, d.logPath, d.logTail())
	}
	// A killed dockerd leaves containerd, the shims and the containers'
	// processes behind; they pin mounts and would outlive the test.
	killLeftovers(t, d.Dir, d.containerIDs(), d.pausePID())
	if err := unmountUnder(d.Dir); err != nil {
		t.Errorf("testdaemon: %v", err)
	}
	if d.loopDev != "" {
		if out, err := run("losetup", "-d", d.loopDev); err != nil {
			t.Errorf("testdaemon: losetup -d %s: %v: %s", d.loopDev, err, out)
		}
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		t.Errorf("testdaemon: remove %s: %v", d.Dir, err)
	}
}

// containerIDs lists the IDs of the containers the daemon knows, from its
// data root (dockerd's containers/, Podman's <driver>-containers/) or its
// task state (containerd, every namespace), so their processes can be
// found after a kill.
func (d *Daemon) containerIDs() []string {
	var ids []string
	if d.opts.Engine == EngineContainerd {
		nss, _ := os.ReadDir(filepath.Join(d.ExecRoot, "io.containerd.runtime.v2.task"))
		for _, ns := range nss {
			ents, _ := os.ReadDir(filepath.Join(d.ExecRoot, "io.containerd.runtime.v2.task", ns.Name()))
			for _, e := range ents {
				// Short IDs would match unrelated cgroups.
				if e.IsDir() && len(e.Name()) >= 12 {
					ids = append(ids, e.Name())
				}
			}
		}
		return ids
	}
	for _, sub := range []string{"containers", d.opts.Driver + "-containers"} {
		ents, _ := os.ReadDir(filepath.Join(d.DataRoot, sub))
		for _, e := range ents {
			if e.IsDir() && len(e.Name()) == 64 {
				ids = append(ids, e.Name())
			}
		}
	}
	return ids
}

// pausePID is the pid of rootless Podman's pause process, which holds its
// user namespace open and whose command line names nothing of the
// daemon's directory; 0 if there is none.
func (d *Daemon) pausePID() int {
	b, err := os.ReadFile(filepath.Join(d.ExecRoot, "libpod-tmp", "pause.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "catatonit" {
		return 0 // gone, or the pid was reused
	}
	return pid
}

// killLeftovers SIGKILLs every process whose command line names dir
// (containerd, containerd-shim*, conmon), whose cgroup names one of the
// container IDs, or that is one of extra (when not 0), and waits briefly
// for them to go.
func killLeftovers(t testing.TB, dir string, ids []string, extra ...int) {
	self := os.Getpid()
	var victims []int
	for _, pid := range extra {
		if pid > 1 {
			victims = append(victims, pid)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		if belongs(pid, dir, ids) {
			victims = append(victims, pid)
		}
	}
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range victims {
		for processExists(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processExists(pid) {
			t.Errorf("testdaemon: process %d survived SIGKILL", pid)
		}
	}
}

func belongs(pid int, dir string, ids []string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if bytes.Contains(cmdline, []byte(dir+"/")) {
		return true
	}
	if len(ids) == 0 {
		return false
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	for _, id := range ids {
		if bytes.Contains(cg, []byte(id)) {
			return true
		}
	}
	return false
}

// processExists reports whether pid is alive and not a zombie (a zombie
// child of ours has already let go of its mounts).
func processExists(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised comm, which may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first,
// repeating while mounts remain (mounts can be stacked on one point).
func unmountUnder(dir string) error {
	for range 10 {
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
		}
	}
	points, _ := mountsUnder(dir)
	if len(points) > 0 {
		return fmt.Errorf("mounts left under %s: %v", dir, points)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir, deepest first and, at
// equal depth, the most recent first.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	points := make([]string, len(mounts))
	for i, m := range mounts {
		points[i] = m.Mountpoint
	}
	slices.Reverse(points) // mountinfo lists mounts oldest first
	slices.SortStableFunc(points, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	return slices.Compact(points), nil
}

// logTail returns the end of the daemon's log without the gRPC connection
// chatter, for failure messages.
func (d *Daemon) logTail() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(no %s log: %v)", d.opts.Engine, err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(l, "module=grpc") {
			lines = append(lines, l)
		}
	}
	const max = 120
	if len(lines) > max {
		lines = append([]string{"..."}, lines[len(lines)-max:]...)
	}
	return strings.Join(lines, "\n")
}

// Running reports whether the daemon's process is alive.
func (d *Daemon) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.proc != nil
}

// LoopDevice is the loop device (/dev/loopN) holding the data root's file
// system, or "" when the data root is a directory on the root file system.
func (d *Daemon) LoopDevice() string { return d.loopDev }

// Log returns the daemon's log so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}
