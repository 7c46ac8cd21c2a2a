package asshipped

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// Source is what the deployments are made of: a checkout of the
// repository (its deploy/ files), the release binary built from it (`make
// build`) and the .deb of its `make release`.
type Source struct {
	Root, Bin, Deb string
}

// Path is a path of the checkout.
func (s Source) Path(p string) string { return filepath.Join(s.Root, filepath.FromSlash(p)) }

// UnitFile is the shipped systemd unit, in the repository.
const UnitFile = "deploy/systemd/layerprobe.service"

// UnitDirectives parses a systemd unit: key to values, per section.
func UnitDirectives(t testing.TB, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[section+"."+k] = append(out[section+"."+k], v)
	}
	return out
}

// BuildAgentImage builds the agent's image, layerprobe:local, from the
// source's deploy/docker/Dockerfile and binary, in the host's engine, on
// the Debian image base (BASE_IMAGE) already there.
func BuildAgentImage(t testing.TB, h Host, src Source, base string) {
	t.Helper()
	ctx := filepath.Join(t.TempDir(), "context")
	if err := os.MkdirAll(filepath.Join(ctx, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src.Bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "bin", "layerprobe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if r := Docker(h, 30*time.Minute, "build", "--network", "host", "--build-arg", "BASE_IMAGE="+base,
		"-f", src.Path("deploy/docker/Dockerfile"), "-t", "layerprobe:local", ctx); r.Err != nil {
		t.Fatalf("docker build:\n%s", testharness.Tail(r.Stdout+r.Stderr, 30))
	}
	t.Logf("the agent image built: %s", time.Since(start).Round(time.Second))
}

// journal is the journal of layerprobe.service in the host.
func journal(t testing.TB, h Host) func() string {
	return func() string {
		return h.Exec(t, time.Minute, "journalctl", "-u", "layerprobe", "--no-pager").Stdout
	}
}

// unitAgent is the agent of layerprobe.service in the host, listening on
// port.
func unitAgent(t testing.TB, h Host, port int) Agent {
	log := journal(t, h)
	return Agent{
		Port: port,
		PID: func() int {
			r := h.Exec(t, time.Minute, "systemctl", "show", "-p", "MainPID", "--value", "layerprobe")
			n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
			return n
		},
		Alive: func() string {
			r := h.Exec(t, time.Minute, "systemctl", "is-active", "layerprobe")
			if st := strings.TrimSpace(r.Stdout); st != "active" && !unanswered(r) {
				return "layerprobe.service is " + st + "\n" + testharness.Tail(log(), 20)
			}
			return ""
		},
		Log: log,
	}
}

// RunUnit installs the source's deploy/systemd/layerprobe.service,
// unchanged, and its binary where the unit's ExecStart= runs it, with
// LoadedAgentConfig as /etc/layerprobe/config.yaml (what the unit's comment
// tells a user to do), and starts it with `systemctl enable --now`. It is
// stopped and removed when t ends.
func RunUnit(t testing.TB, h Host, src Source) Agent {
	t.Helper()
	port := testharness.MustFreePort(t)
	if r := h.Exec(t, time.Minute, "mkdir", "-p", "/etc/layerprobe"); r.Err != nil {
		t.Fatal(r)
	}
	cfg := AgentConfigFile(t, h, "unit", fmt.Sprintf("127.0.0.1:%d", port))
	bin := CopyToShare(t, h, src.Bin, "unit/layerprobe", 0o755)
	unit := CopyToShare(t, h, src.Path(UnitFile), "unit/layerprobe.service", 0o644)
	exe := strings.Fields(strings.Join(UnitDirectives(t, src.Path(UnitFile))["Service.ExecStart"], " "))
	if len(exe) == 0 || !filepath.IsAbs(exe[0]) {
		t.Fatalf("ExecStart=%v", exe)
	}
	for _, c := range [][]string{
		{"install", "-m", "0755", bin, exe[0]},
		{"install", "-m", "0644", unit, "/etc/systemd/system/"},
		{"install", "-m", "0644", cfg, "/etc/layerprobe/config.yaml"},
		{"systemctl", "daemon-reload"},
	} {
		if r := h.Exec(t, time.Minute, c...); r.Err != nil {
			t.Fatal(r)
		}
	}
	installed := time.Now()
	if r := h.Exec(t, time.Minute, "systemctl", "enable", "--now", "layerprobe"); r.Err != nil {
		t.Fatalf("systemctl enable --now layerprobe:\n%s", r)
	}
	a := unitAgent(t, h, port)
	a.Installed = installed
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of layerprobe.service:\n%s", testharness.Tail(a.Log(), 40))
		}
		h.Exec(t, 2*time.Minute, "systemctl", "disable", "--now", "layerprobe")
		h.Exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe", "/etc/systemd/system/layerprobe.service", "/etc/layerprobe", exe[0])
		h.Exec(t, time.Minute, "systemctl", "daemon-reload")
	})
	return a
}

// RunDeb installs the source's .deb with apt, as a user would, its
// configuration put in place beforehand (dpkg keeps it: --force-confold);
// its postinst enables and starts the unit it carries. It is purged when t
// ends.
func RunDeb(t testing.TB, h Host, src Source) Agent {
	t.Helper()
	port := testharness.MustFreePort(t)
	deb := CopyToShare(t, h, src.Deb, "deb/layerprobe.deb", 0o644)
	cfg := AgentConfigFile(t, h, "deb", fmt.Sprintf("127.0.0.1:%d", port))
	if r := h.Exec(t, time.Minute, "install", "-D", "-m", "0644", cfg, "/etc/layerprobe/config.yaml"); r.Err != nil {
		t.Fatal(r)
	}
	installed := time.Now()
	r := h.Exec(t, 10*time.Minute, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends",
		"-o", "Dpkg::Options::=--force-confold", deb)
	if r.Err != nil {
		t.Fatalf("apt-get install ./layerprobe.deb:\n%s", r)
	}
	a := unitAgent(t, h, port)
	a.Installed = installed
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of layerprobe.service:\n%s", testharness.Tail(a.Log(), 40))
		}
		h.Exec(t, 5*time.Minute, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "layerprobe")
		h.Exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe")
	})
	for _, c := range [][]string{{"is-enabled", "layerprobe"}, {"is-active", "layerprobe"}} {
		if r := h.Exec(t, time.Minute, append([]string{"systemctl"}, c...)...); r.Err != nil {
			t.Fatalf("systemctl %v after the install: %s", c, r)
		}
	}
	if r := h.Exec(t, time.Minute, "systemctl", "show", "-p", "FragmentPath", "layerprobe"); !strings.Contains(r.Stdout, "/lib/systemd/system/layerprobe.service") {
		t.Errorf("the running unit is not the package's: %s", r.Stdout)
	}
	return a
}

// RunCompose starts the agent service of the source's
// deploy/compose/docker-compose.yml with compose (the command line of
// Docker Compose v2 on this machine, against the host's engine), its
// image layerprobe:local (BuildAgentImage), with an override that sets the
// test's configuration file, published on a free port (LAYERPROBE_PORT).
// It is taken down when t ends.
func RunCompose(t testing.TB, h Host, src Source, compose []string) Agent {
	t.Helper()
	port := testharness.MustFreePort(t)
	cfg := AgentConfigFile(t, h, "compose", ":9811")
	// The override sets the test's agent configuration; the published
	// port is LAYERPROBE_PORT (docker-proxy listens on the host's
	// loopback).
	override := filepath.Join(t.TempDir(), "override.yml")
	if err := os.WriteFile(override, fmt.Appendf(nil, "services:\n  layerprobe:\n    volumes:\n      - %s:/etc/layerprobe/config.yaml:ro\n", cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(timeout time.Duration, args ...string) Result {
		return Run(timeout, src.Path("deploy/compose"), append(h.DockerEnv(), "COMPOSE_PROJECT_NAME=lpops", fmt.Sprintf("LAYERPROBE_PORT=%d", port)), compose[0],
			append(append(compose[1:len(compose):len(compose)], "--file", "docker-compose.yml", "--file", override), args...)...)
	}
	installed := time.Now()
	if r := run(5*time.Minute, "up", "-d", "--no-deps", "--no-build", "layerprobe"); r.Err != nil {
		t.Fatalf("docker compose up:\n%s", r)
	}
	logs := func() string {
		r := run(time.Minute, "logs", "--no-color", "layerprobe")
		return r.Stdout + r.Stderr
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", testharness.Tail(logs(), 40))
		}
		run(5*time.Minute, "down", "--volumes", "--timeout", "60")
	})
	return Agent{
		Port: port,
		PID: func() int {
			id := strings.TrimSpace(run(time.Minute, "ps", "-q", "layerprobe").Stdout)
			if id == "" {
				return 0
			}
			return ContainerPID(h, id)
		},
		Alive: func() string {
			if r := run(time.Minute, "ps", "--services", "--filter", "status=running"); !strings.Contains(r.Stdout, "layerprobe") && !unanswered(r) {
				return "the layerprobe service is not running:\n" + testharness.Tail(logs(), 20)
			}
			return ""
		},
		Log: logs, Installed: installed,
	}
}

// RunPod starts the pod of the source's
// deploy/kubernetes/20-daemonset.yaml with `docker run`, every flag
// derived from the manifest (RunFlags) in the cgroup namespace cgroupNS,
// on the host's network, its ConfigMap LoadedAgentConfig. It is stopped
// and removed when t ends.
func RunPod(t testing.TB, h Host, src Source, cgroupNS string) Agent {
	t.Helper()
	port := testharness.MustFreePort(t)
	cfg := AgentConfigFile(t, h, "configmap", fmt.Sprintf("127.0.0.1:%d", port))
	pod := DaemonSetPod(t, src.Path("deploy/kubernetes/20-daemonset.yaml"))
	flags, image, args := RunFlags(t, pod, map[string]string{"layerprobe-config": filepath.Dir(cfg)}, nil, cgroupNS)
	const name = "lpops-daemonset"
	argv := append(append(append([]string{"run", "-d", "--name", name, "--network", "host"}, flags...), image), args...)
	t.Logf("the pod: docker %s", strings.Join(argv, " "))
	installed := time.Now()
	if r := Docker(h, 2*time.Minute, argv...); r.Err != nil {
		t.Fatalf("docker run (the DaemonSet's pod):\n%s", r)
	}
	logs := func() string {
		r := Docker(h, time.Minute, "logs", name)
		return r.Stdout + r.Stderr
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", testharness.Tail(logs(), 40))
		}
		Docker(h, 2*time.Minute, "stop", "-t", "60", name)
		Docker(h, time.Minute, "rm", "-f", "-v", name)
		h.Exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe")
	})
	return Agent{
		Port: port,
		PID:  func() int { return ContainerPID(h, name) },
		Alive: func() string {
			r := Docker(h, time.Minute, "inspect", "-f", "{{.State.Status}}", name)
			if st := strings.TrimSpace(r.Stdout); st != "running" && (!unanswered(r) || strings.Contains(r.Stderr, "No such")) {
				return "the pod's container is " + st + ":\n" + testharness.Tail(logs(), 20)
			}
			return ""
		},
		Log: logs, Installed: installed,
	}
}

// unanswered says a status command gave no answer: it failed with nothing
// on stdout (a loaded guest's ssh or the command timed out). That is no
// verdict on the agent: Alive then says it runs, and the wait that asks
// goes on until an answer or its own deadline.
func unanswered(r Result) bool {
	return r.Err != nil && strings.TrimSpace(r.Stdout) == ""
}
