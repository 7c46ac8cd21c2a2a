package ops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The tests in this file run each shipped deployment as it is shipped (the
// systemd unit under a real systemd, the .deb, the compose file with
// Docker Compose v2, the DaemonSet's pod spec with `docker run`:
// asshipped's) on a private engine whose CPUs are kept busy by other
// containers, and check what a user of that deployment gets: the agent
// says its host arm joined the probe container's CPU cgroups, no warning
// says otherwise, and the host arm's processes, watched in /proc while the
// cycle runs, really are in those cgroups (asshipped.CheckLoadedAgent).
// The benchmark's cgroupv2 section runs the same in a cgroup v2 guest.

// boxInit mounts the cgroup v1 hierarchies in the box's own cgroup
// namespace, each as the kernel groups its controllers (systemd would mount
// cpu and cpuacct together, which fails where the machine has them apart,
// and would leave both out), then starts systemd. On a cgroup v2 machine it
// mounts nothing: systemd mounts the unified hierarchy itself.
const boxInit = `#!/bin/sh
set -e
if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  awk '$1 !~ /^#/ && $2 != 0 && $4 == 1 { c[$2] = c[$2] ? c[$2] "," $1 : $1 } END { for (h in c) print c[h] }' /proc/cgroups |
  while read -r ctrls; do
    mkdir -p "/sys/fs/cgroup/$ctrls"
    mount -t cgroup -o "$ctrls" cgroup "/sys/fs/cgroup/$ctrls"
  done
  mkdir -p /sys/fs/cgroup/systemd
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
fi
exec /sbin/init
`

// boxShare is where the box sees the test's shared directory: the box's
// engine socket for the test's docker CLI and Docker Compose, and the
// agents' configuration files.
const boxShare = "/lpshare"

// testBox is a Debian host in a container of a private engine
// (asshipped.Host): systemd as PID 1, Debian's dockerd (data root
// /var/lib/docker, socket /var/run/docker.sock, as a user's host has them),
// confined to one CPU at a low weight so that its load leaves the rest of
// the machine to the other tests. It shares this machine's network.
type testBox struct {
	name   string
	outer  []string // environment of the docker CLI for the outer engine
	inner  []string // ... and for the box's own engine
	share  string   // the shared directory, on this machine
	docker string
	bin    string // layerprobe as `make build` builds it (no test hooks)
}

// Exec runs a command in the box.
func (b *testBox) Exec(t testing.TB, timeout time.Duration, argv ...string) asshipped.Result {
	t.Helper()
	r := run(t, timeout, "", b.outer, b.docker, append([]string{"exec", b.name}, argv...)...)
	return asshipped.Result{Stdout: r.stdout, Stderr: r.stderr, Err: r.err}
}

func (b *testBox) DockerEnv() []string { return b.inner }
func (b *testBox) Share() string       { return b.share }
func (b *testBox) SharedAt() string    { return boxShare }

// URL: the box shares this machine's network.
func (b *testBox) URL(_ testing.TB, port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// ArmsPoll: the box runs natively, and the smoke profile's host arms live
// a few hundred milliseconds.
func (b *testBox) ArmsPoll() time.Duration { return 3 * time.Millisecond }

// startBox makes the box's root file system from a copy of the Debian root
// (testharness.DebianRoot, debootstrap's), imports it into a private
// engine and boots it.
func startBox(t *testing.T) *testBox {
	t.Helper()
	docker := tool(t, "docker")
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	tmp := t.TempDir()
	b := &testBox{name: "lpops-box", outer: []string{"DOCKER_HOST=" + d.Host}, share: filepath.Join(tmp, "share"), docker: docker}
	b.inner = []string{"DOCKER_HOST=unix://" + filepath.Join(b.share, "docker.sock")}

	start := time.Now()
	debian := testharness.DebianRoot(t)
	root := filepath.Join(tmp, "root")
	// Without the VM guest's part of the Debian root, which a container
	// host does not boot (the kernel and its modules), and without
	// documentation and locales, which nothing in the box reads.
	testharness.CopyTree(t, debian, root, "boot", "usr/lib/modules", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info")
	t.Logf("the box's root from the Debian root: %s", time.Since(start).Round(time.Second))
	for p, content := range map[string]string{
		// Masked: sshd (the guest's; the box shares this machine's
		// network and port 22) and udev (a container's /sys is read-only).
		"etc/systemd/system/ssh.service":                  "",
		"etc/systemd/system/ssh.socket":                   "",
		"etc/systemd/system/systemd-udevd.service":        "",
		"etc/systemd/system/systemd-udev-trigger.service": "",
		"etc/systemd/system/systemd-udevd-control.socket": "",
		"etc/systemd/system/systemd-udevd-kernel.socket":  "",
		// The engine: no default bridge and no iptables (the box shares
		// this machine's network; a compose project's network is a bridge
		// of its own, its port published by docker-proxy), and a second
		// socket in the shared directory.
		"etc/docker/daemon.json":                     `{"bridge": "none", "iptables": false, "ip6tables": false, "storage-driver": "overlay2"}` + "\n",
		"etc/systemd/system/docker.socket.d/lp.conf": "[Socket]\nListenStream=" + boxShare + "/docker.sock\n",
		"usr/local/sbin/lp-box-init":                 boxInit,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if content == "" {
			if err := os.Symlink("/dev/null", filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(b.share, 0o755); err != nil {
		t.Fatal(err)
	}
	tarInto(t, b.outer, docker, root, nil, "import", "--change", `CMD ["/usr/local/sbin/lp-box-init"]`, "-", "layerprobe-box:test")

	// Every capability but CAP_SYS_RESOURCE, which a restricted root may
	// lack (--privileged asks for all); its own cgroup namespace, where
	// lp-box-init mounts the hierarchies writable; the engine's data root
	// on this machine's disk (overlay2 cannot stack on the box's own
	// overlay root); one CPU, at a quarter of the default weight, so
	// that the box's busy loop takes from the tests beside it only what
	// they leave.
	dataRoot := filepath.Join(tmp, "docker")
	if err := os.MkdirAll(dataRoot, 0o711); err != nil {
		t.Fatal(err)
	}
	r := run(t, time.Minute, "", b.outer, docker, "run", "-d", "--name", b.name, "--hostname", "lpbox",
		"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--cgroupns", "private", "--device-cgroup-rule", "a *:* rwm", "--cpuset-cpus", "0", "--cpu-shares", "256",
		"--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
		"-v", dataRoot+":/var/lib/docker", "-v", b.share+":"+boxShare,
		"--network", "host", "-e", "container=docker", "layerprobe-box:test")
	if r.err != nil {
		t.Fatalf("docker run (the box):\n%s", r)
	}
	t.Cleanup(func() {
		run(t, 2*time.Minute, "", b.outer, docker, "exec", b.name, "systemctl", "poweroff")
		run(t, 2*time.Minute, "", b.outer, docker, "rm", "-f", "-v", b.name)
	})
	// is-system-running needs systemd's bus, which comes up a moment
	// after the container starts.
	var state asshipped.Result
	testharness.Eventually(t, 3*time.Minute, time.Second, "systemd in the box to finish booting", func() (bool, string) {
		if st := run(t, time.Minute, "", b.outer, docker, "inspect", "-f", "{{.State.Status}}", b.name); strings.TrimSpace(st.stdout) != "running" {
			t.Fatalf("the box is %s:\n%s", st.stdout, run(t, time.Minute, "", b.outer, docker, "logs", b.name))
		}
		state = b.Exec(t, 3*time.Minute, "systemctl", "is-system-running", "--wait")
		switch st := strings.TrimSpace(state.Stdout); st {
		case "", "offline", "starting", "initializing": // no bus yet, or booting
			return false, state.String()
		}
		return true, ""
	})
	if st := strings.TrimSpace(state.Stdout); st != "running" {
		t.Fatalf("systemd in the box: %q\n%s", st, b.Exec(t, time.Minute, "systemctl", "--failed", "--no-pager").Stdout)
	}
	if r := asshipped.Docker(b, time.Minute, "info", "--format", "{{.Driver}} {{.DockerRootDir}}"); strings.TrimSpace(r.Stdout) != "overlay2 /var/lib/docker" {
		t.Fatalf("the box's dockerd: %s", r)
	}
	t.Logf("the box booted: %s", time.Since(start).Round(time.Second))
	// The agent image, from the repository's Dockerfile, on the box's
	// root file system as its Debian base, without what an agent image
	// never runs: the engine's own binaries and apt's lists (the
	// Dockerfile's apt-get update fetches them again). About 280 MiB
	// instead of 626 imported into the box's engine.
	tarInto(t, b.inner, docker, root, []string{"usr/sbin/dockerd", "usr/sbin/docker-proxy", "usr/sbin/runc", "usr/bin/docker", "usr/bin/docker-init",
		"usr/bin/containerd*", "usr/bin/ctr", "var/lib/apt/lists"}, "import", "-", "layerprobe-base:test")
	t.Logf("the agent image's base imported: %s", time.Since(start).Round(time.Second))
	bin := filepath.Join(tmp, "layerprobe")
	if err := testharness.Build(context.Background(), bin, testharness.ReleaseTags); err != nil {
		t.Fatalf("build the release binary: %v", err)
	}
	b.bin = bin
	asshipped.BuildAgentImage(t, b, asshipped.Source{Root: repoRoot, Bin: bin}, "layerprobe-base:test")
	t.Logf("the box is ready: %s", time.Since(start).Round(time.Second))
	return b
}

// tarInto streams dir as a tar archive (testharness.TarCommand, without
// the paths in exclude) into `docker args...` (an import).
func tarInto(t *testing.T, env []string, docker, dir string, exclude []string, args ...string) {
	t.Helper()
	tarCmd := testharness.TarCommand(dir, exclude...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(docker, args...)
	imp.Env = append(os.Environ(), env...)
	imp.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := imp.CombinedOutput()
	if werr := tarCmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestShippedDeploymentsUnderLoad runs each shipped deployment as shipped,
// one after the other, on a Debian host (testBox) whose CPU is kept busy
// by containers of its engine:
//   - deploy/systemd/layerprobe.service, unchanged, under the box's systemd
//     (`systemctl enable --now`);
//   - the .deb of `make release`, installed with `apt-get install`, its
//     unit started by the package (the same unit file);
//   - deploy/compose/docker-compose.yml with Docker Compose v2 (`docker
//     compose`), its agent service only, with an override that sets the
//     test's configuration file, published on a free port (LAYERPROBE_PORT);
//   - the pod of deploy/kubernetes/20-daemonset.yaml with `docker run`,
//     every flag derived from the manifest (asshipped.RunFlags), in a
//     cgroup namespace of its own, as a kubelet's runtime gives a pod on
//     cgroup v2: the host arm joins from there (cgroup.Of enters the
//     probe's namespace with the pod's CAP_SYS_ADMIN).
//
// Each agent's first cycle must have its host arm in the probe container's
// CPU cgroups, say so on /metrics and log no warning about it; bind's A/A
// figures are logged, not checked, on a machine the whole suite loads
// (asshipped.Verdict.Report).
func TestShippedDeploymentsUnderLoad(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	compose := composeV2(t)
	// The .deb's subtest needs `make release`: started now, it builds
	// while the box starts and the systemd subtest runs, off this test's
	// path, which is the longest of the package.
	go buildRelease()
	b := startBox(t)
	load := asshipped.StartLoad(t, b)
	src := asshipped.Source{Root: repoRoot, Bin: b.bin}
	check := func(t *testing.T, a asshipped.Agent) {
		t.Helper()
		asshipped.CheckLoadedAgent(t, b, load, a, 12*time.Minute).Report(t, false)
	}

	t.Run("systemd", func(t *testing.T) {
		check(t, asshipped.RunUnit(t, b, src))
	})
	t.Run("deb", func(t *testing.T) {
		src := src
		src.Deb = filepath.Join(releaseDist(t), fmt.Sprintf("layerprobe_%s_%s.deb", versionFile(t), runtime.GOARCH))
		start := time.Now()
		check(t, asshipped.RunDeb(t, b, src))
		if d := time.Since(start); d > 10*time.Minute {
			t.Errorf("the first steady result came %s after apt-get install, want within 10 minutes", d.Round(time.Second))
		}
		t.Logf("apt-get install to the first steady result: %s", time.Since(start).Round(time.Second))
	})
	t.Run("compose", func(t *testing.T) {
		check(t, asshipped.RunCompose(t, b, src, compose))
	})
	// The pod in a cgroup namespace of its own, as a kubelet's runtime
	// gives it on cgroup v2, on this cgroup v1 machine: the host arm joins
	// from there (cgroup.Of enters the probe's namespace with the pod's
	// CAP_SYS_ADMIN).
	t.Run("daemonset", func(t *testing.T) {
		check(t, asshipped.RunPod(t, b, src, asshipped.CgroupNSPrivate))
	})

	// A node labelled for an engine whose socket it does not have: each
	// DaemonSet's pod, its socket's directory an empty one, must start,
	// keep serving, and say what is missing in its log and on /metrics,
	// where a hostPath of type Socket would keep it in ContainerCreating.
	t.Run("daemonset-no-socket", func(t *testing.T) {
		for _, tc := range []struct{ manifest, configMap, configFile, sockDir, sock, engine string }{
			{"deploy/kubernetes/20-daemonset.yaml", "layerprobe-config", "deploy/kubernetes/10-configmap.yaml", "/run", "/var/run/docker.sock", "default"},
			{"deploy/kubernetes/21-daemonset-containerd.yaml", "layerprobe-containerd-config", "deploy/kubernetes/11-configmap-containerd.yaml", "/run/containerd", "/run/containerd/containerd.sock", "node"},
		} {
			name := "lpops-nosock-" + tc.engine
			port := testharness.MustFreePort(t)
			cfgDir := filepath.Join(b.share, name)
			shippedConfig(t, tc.configFile, cfgDir, fmt.Sprintf("127.0.0.1:%d", port))
			// The socket's directory without the socket. On a node, the
			// pod's other hostPaths below it exist (DirectoryOrCreate
			// makes /run/lock), and the runtime mounts them there: it
			// cannot make their mount points in a read-only mount.
			empty := "/tmp/" + name + "-run"
			if r := b.Exec(t, time.Minute, "mkdir", "-p", empty+"/lock"); r.Err != nil {
				t.Fatal(r)
			}
			pod := asshipped.DaemonSetPod(t, repoPath(tc.manifest))
			flags, image, podArgs := asshipped.RunFlags(t, pod, map[string]string{tc.configMap: boxShare + "/" + name},
				// Each its own state directory: two agents never share one.
				map[string]string{tc.sockDir: empty, "/var/lib/layerprobe": "/tmp/" + name + "-state"}, asshipped.CgroupNSPrivate)
			args := append(append(append([]string{"run", "-d", "--name", name, "--network", "host"}, flags...), image), podArgs...)
			if r := asshipped.Docker(b, 2*time.Minute, args...); r.Err != nil {
				t.Fatalf("docker run (%s's pod, no socket):\n%s", tc.manifest, r)
			}
			logs := func() string { r := asshipped.Docker(b, time.Minute, "logs", name); return r.Stdout + r.Stderr }
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("%s log:\n%s", name, testharness.Tail(logs(), 20))
				}
				asshipped.Docker(b, 2*time.Minute, "rm", "-f", "-v", name)
			})
			get := asshipped.Agent{Port: port}.API(t, b)
			want := fmt.Sprintf("layerprobe_engine_up{engine=%q} 0", tc.engine)
			testharness.Eventually(t, 2*time.Minute, 2*time.Second, tc.manifest+"'s agent to say its engine is down", func() (bool, string) {
				if st := strings.TrimSpace(asshipped.Docker(b, time.Minute, "inspect", "-f", "{{.State.Status}}", name).Stdout); st != "running" {
					t.Fatalf("the pod's container is %s:\n%s", st, testharness.Tail(logs(), 20))
				}
				body, err := get("/metrics")
				if err != nil {
					return false, err.Error()
				}
				return strings.Contains(string(body), want), "no " + want
			})
			if body, err := get("/healthz"); err != nil {
				t.Errorf("%s: /healthz: %v %s", tc.manifest, err, body)
			}
			if l := logs(); !strings.Contains(l, "socket "+tc.sock+" does not exist") {
				t.Errorf("%s: the agent's log does not say that %s does not exist:\n%s", tc.manifest, tc.sock, testharness.Tail(l, 20))
			}
		}
	})
}

// shippedConfig writes the config.yaml of the ConfigMap in file into
// dir, listening on addr.
func shippedConfig(t *testing.T, file, dir, addr string) {
	t.Helper()
	var cm k8sObject
	if err := yaml.Unmarshal([]byte(readFile(t, repoPath(file))), &cm); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil || cfg == nil {
		t.Fatalf("%s: config.yaml: %v", file, err)
	}
	agent, _ := cfg["agent"].(map[string]any)
	if agent == nil {
		agent = map[string]any{}
	}
	agent["listen_address"] = addr
	cfg["agent"] = agent
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
