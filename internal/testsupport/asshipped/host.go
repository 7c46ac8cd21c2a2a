package asshipped

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// Host is a Debian host with systemd as PID 1 and Debian's dockerd (data
// root /var/lib/docker, socket /var/run/docker.sock, as a user's host has
// them) that the deployments run on: test/ops's box, a container of a
// private engine on this machine, or the cgroup v2 guest under QEMU.
type Host interface {
	// Exec runs argv on the host as root.
	Exec(t testing.TB, timeout time.Duration, argv ...string) Result
	// DockerEnv is the environment of a docker CLI (and of Docker
	// Compose) on this machine that talks to the host's engine.
	DockerEnv() []string
	// Share is a directory of this machine that the host sees at
	// SharedAt(): the agents' configuration files, the binaries and
	// packages they install, the watcher's output.
	Share() string
	SharedAt() string
	// URL is the base URL, on this machine, of a service that listens on
	// the host's loopback at port.
	URL(t testing.TB, port int) string
	// ArmsPoll is how often the watcher of the agent's arms scans the
	// host's /proc (lpworkload armcg): a few milliseconds where the host
	// runs natively, longer in an emulated guest, where a scan costs the
	// CPU the arms compete for and a host arm lives seconds.
	ArmsPoll() time.Duration
}

// Result is what a finished command printed.
type Result struct {
	Stdout, Stderr string
	Err            error
}

func (r Result) String() string {
	return fmt.Sprintf("err: %v\nstdout:\n%s\nstderr:\n%s", r.Err, r.Stdout, r.Stderr)
}

// Run runs a command on this machine to completion within timeout, in dir
// ("" for the working directory), with env added to the test's
// environment.
func Run(timeout time.Duration, dir string, env []string, name string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish within %s: %w", name, timeout, errors.Join(err, ctx.Err()))
	}
	return Result{out.String(), errb.String(), err}
}

// Docker runs this machine's docker CLI against the host's engine.
func Docker(h Host, timeout time.Duration, args ...string) Result {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return Result{Err: err}
	}
	return Run(timeout, "", h.DockerEnv(), docker, args...)
}

// ContainerPID gives the PID, in the host, of the process of a container
// of the host's engine, or 0 while it has none.
func ContainerPID(h Host, name string) int {
	r := Docker(h, time.Minute, "inspect", "-f", "{{.State.Pid}}", name)
	n, _ := strconv.Atoi(strings.TrimSpace(r.Stdout))
	return n
}

// CopyToShare copies the file from into the host's share as name, with
// mode, and returns its path in the host.
func CopyToShare(t testing.TB, h Host, from, name string, mode os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(h.Share(), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
	return h.SharedAt() + "/" + name
}

// Load is the busy loops in containers of a host's engine, one per CPU of
// the host, paused while no agent's cycle runs: a deployment's install
// needs no load, and the tests beside it get the CPU.
type Load struct {
	h        Host
	spinners []string
}

// StartLoad imports lpworkload into the host's engine and starts the busy
// loops, paused. They are removed when t ends.
func StartLoad(t testing.TB, h Host) *Load {
	t.Helper()
	imp := exec.Command("docker", "import", "-", "lpworkload:spin")
	imp.Env = append(os.Environ(), h.DockerEnv()...)
	imp.Stdin = bytes.NewReader(testharness.WorkloadImage(t))
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import lpworkload into the host's engine: %v\n%s", err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(h.Exec(t, time.Minute, "nproc").Stdout))
	if err != nil || n < 1 {
		t.Fatalf("nproc in the host: %v", err)
	}
	l := &Load{h: h}
	for i := range n {
		name := fmt.Sprintf("spin%d", i)
		if r := Docker(h, time.Minute, "run", "-d", "--network", "none", "--name", name,
			"lpworkload:spin", testharness.WorkloadEntrypoint, "spin"); r.Err != nil {
			t.Fatalf("start a busy loop:\n%s", r)
		}
		l.spinners = append(l.spinners, name)
	}
	// Removed before the host stops: a paused container's processes are
	// frozen, and a frozen process outlives SIGKILL.
	t.Cleanup(func() {
		Docker(h, time.Minute, append([]string{"unpause"}, l.spinners...)...)
		Docker(h, time.Minute, append([]string{"rm", "-f"}, l.spinners...)...)
	})
	l.Spin(t, false)
	t.Logf("%d busy loop(s) on the host's %d CPU(s)", n, n)
	return l
}

// Spin unpauses (on) or pauses the busy loops.
func (l *Load) Spin(t testing.TB, on bool) {
	t.Helper()
	verb := "pause"
	if on {
		verb = "unpause"
	}
	if r := Docker(l.h, time.Minute, append([]string{verb}, l.spinners...)...); r.Err != nil {
		t.Fatalf("docker %s (the busy loops):\n%s", verb, r)
	}
}
