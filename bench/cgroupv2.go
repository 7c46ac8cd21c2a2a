//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testvm"
)

// The cgroupv2 section runs every shipped deployment as shipped on a
// cgroup v2 host, under load, as test/ops's TestShippedDeploymentsUnderLoad
// runs them on this machine's cgroup v1 kernel: a Debian 12 guest under
// QEMU (testvm; TCG where /dev/kvm cannot boot it) with systemd as PID 1
// on the unified hierarchy, Debian's kernel and Debian's dockerd, busy
// loops in containers of that engine on every CPU while an agent's first
// cycle runs (asshipped.Load). In the guest, one after the other:
//   - deploy/systemd/layerprobe.service, unchanged (`systemctl enable --now`);
//   - the .deb of `make release`, installed with apt;
//   - deploy/compose/docker-compose.yml with Docker Compose v2, its agent
//     service, its image built from deploy/docker/Dockerfile in the guest;
//   - the pod of deploy/kubernetes/20-daemonset.yaml with `docker run`,
//     every flag derived from the manifest, in a cgroup namespace of its
//     own, as a kubelet's runtime gives a pod on cgroup v2.
//
// Each must report a fair comparison (the host arm joined, or a stated
// baseline), publish no alert (layerprobe_host_arm_cgroup_joined 1), have
// its host arms seen in the probe container's cgroup, and pass the A/A
// check (asshipped.AAFactor). The same deployments of an earlier revision
// (BENCH_CGROUPV2_BEFORE, the last commit before the join from a private
// cgroup namespace; its .deb is its unit, and is left out) are the
// cgroupv2-before section: what users of that revision got on cgroup v2.
// The guest's whole run is slow under TCG: an hour or more a pass, not
// something `make test` can hold; test/vm's TestGuest keeps a short check
// of the join there.

// defaultV2BeforeRev is the last commit before the host arm joined from a
// private cgroup namespace and the shipped deployments asked for it.
const defaultV2BeforeRev = "52ac19b"

// cgroupV2Pass is one pass of the section: one revision's deployments in a
// fresh guest.
type cgroupV2Pass struct {
	// Label is "fix" (this tree's commit) or "before".
	Label   string `json:"label"`
	Rev     string `json:"rev"`
	Version string `json:"version"`
	// Accel is QEMU's accelerator; BootSeconds the guest's boot until
	// sshd and dockerd answered, SetupSeconds the agent image's build
	// (its base imported, then deploy/docker/Dockerfile with apt).
	Accel        string  `json:"accel"`
	BootSeconds  float64 `json:"boot_seconds"`
	SetupSeconds float64 `json:"setup_seconds"`
	// Kernel, Docker and Compose are the guest's kernel release, Docker
	// engine and this machine's Docker Compose versions.
	Kernel      string               `json:"kernel"`
	Docker      string               `json:"docker"`
	Compose     string               `json:"compose"`
	Deployments []cgroupV2Deployment `json:"deployments"`
}

// cgroupV2Deployment is one deployment's first loaded cycle.
type cgroupV2Deployment struct {
	Name    string             `json:"name"`
	Verdict *asshipped.Verdict `json:"verdict,omitempty"`
	// Error says why there is no verdict (the deployment did not come up,
	// its cycle failed).
	Error string `json:"error,omitempty"`
	// Seconds is the deployment's install and first cycle.
	Seconds float64 `json:"seconds"`
	// Rev is the commit this deployment ran from when it differs from
	// its pass's: a deployment run again (BENCH_CGROUPV2_RERUN) into a
	// recorded pass.
	Rev string `json:"rev,omitempty"`
}

// mergeCgroupV2 puts the deployments of rerun, a pass that ran some of
// the deployments again, into prev, the recorded pass of the same label:
// each replaces the one of its name, with its own revision where that
// differs; the pass keeps prev's guest and revision. Without prev it is
// rerun itself.
func mergeCgroupV2(prev, rerun *cgroupV2Pass) *cgroupV2Pass {
	if prev == nil || rerun == nil {
		return rerun
	}
	out := *prev
	out.Deployments = slices.Clone(prev.Deployments)
	for _, d := range rerun.Deployments {
		if rerun.Rev != prev.Rev {
			d.Rev = rerun.Rev
		}
		if i := slices.IndexFunc(out.Deployments, func(o cgroupV2Deployment) bool { return o.Name == d.Name }); i >= 0 {
			out.Deployments[i] = d
		} else {
			out.Deployments = append(out.Deployments, d)
		}
	}
	slices.SortStableFunc(out.Deployments, func(a, b cgroupV2Deployment) int {
		return slices.Index(cgroupV2Deployments, a.Name) - slices.Index(cgroupV2Deployments, b.Name)
	})
	return &out
}

// rerunSkip is the skip list of a pass that runs only the deployments
// named in rerun (BENCH_CGROUPV2_RERUN, comma-separated), or an error
// naming an unknown one.
func rerunSkip(rerun string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(rerun, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(cgroupV2Deployments, n) {
			return nil, fmt.Errorf("BENCH_CGROUPV2_RERUN: %q is no deployment (%s)", n, strings.Join(cgroupV2Deployments, ", "))
		}
		want[n] = true
	}
	var skip []string
	for _, n := range cgroupV2Deployments {
		if !want[n] {
			skip = append(skip, n)
		}
	}
	return skip, nil
}

// ok says the deployment passed every check.
func (d cgroupV2Deployment) ok() bool {
	return d.Error == "" && d.Verdict != nil && len(d.Verdict.Problems) == 0 && len(d.Verdict.AAProblems) == 0
}

// cgroupV2Deployments are the deployments of a pass, in order.
var cgroupV2Deployments = []string{"systemd", "deb", "compose", "daemonset"}

// measureCgroupV2 runs one pass: rev's deployments ("" for this tree's
// commit), every one of them unless skip names it.
func measureCgroupV2(ctx context.Context, t *testing.T, p *progress, label, rev string, skip ...string) (*cgroupV2Pass, error) {
	compose := []string{"docker", "compose"}
	cv := asshipped.Run(time.Minute, "", nil, "docker", "compose", "version", "--short")
	if cv.Err != nil || !strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(cv.Stdout), "v"), "2.") {
		return nil, fmt.Errorf("no Docker Compose v2 (the docker CLI plugin; scripts/install-deps.sh builds it): %s", cv)
	}
	if rev == "" {
		rev = "HEAD"
	}
	src, commit, remove, err := checkout(ctx, rev)
	if err != nil {
		return nil, err
	}
	defer remove()
	pass := &cgroupV2Pass{Label: label, Rev: commit, Compose: strings.TrimSpace(cv.Stdout)}
	source := asshipped.Source{Root: src, Bin: filepath.Join(t.TempDir(), "layerprobe")}
	p.logf("cgroupv2 %s: building %s's release binary", label, shortRev(commit))
	if err := testharness.BuildIn(ctx, src, source.Bin, testharness.ReleaseTags); err != nil {
		return nil, err
	}
	pass.Version = cmdLine(source.Bin, "version")
	if !contains(skip, "deb") {
		p.logf("cgroupv2 %s: make release RELEASE_IMAGE=0 (the .deb)", label)
		r := asshipped.Run(40*time.Minute, src, nil, "make", "release", "RELEASE_IMAGE=0")
		if r.Err != nil {
			return nil, fmt.Errorf("make release: %v\n%s", r.Err, testharness.Tail(r.Stdout+r.Stderr, 40))
		}
		debs, _ := filepath.Glob(filepath.Join(src, "dist", "layerprobe_*_"+runtime.GOARCH+".deb"))
		if len(debs) != 1 {
			return nil, fmt.Errorf("make release: want one .deb for %s in dist, have %v", runtime.GOARCH, debs)
		}
		source.Deb = debs[0]
	}

	p.logf("cgroupv2 %s: booting the guest", label)
	g := testvm.Boot(t, testvm.BuildImage(t), testvm.Options{Cmdline: testvm.V2Cmdline, Memory: 3072, Wait: 30 * time.Minute})
	pass.Accel, pass.BootSeconds = g.Accel, g.Booted.Seconds()
	if err := g.CgroupV2(); err != nil {
		return pass, err
	}
	pass.Kernel = strings.TrimSpace(g.Run(time.Minute, "uname -r").Stdout)
	pass.Docker = strings.TrimSpace(g.Run(time.Minute, "docker version --format '{{.Server.Version}}'").Stdout)
	h := &guestHost{g: g, socket: filepath.Join(g.Dir, "docker.sock")}
	g.Forward(t, h.socket, "/run/docker.sock")
	p.logf("cgroupv2 %s: guest up in %s (%s), kernel %s, Docker %s", label, g.Booted.Round(time.Second), g.Accel, pass.Kernel, pass.Docker)

	start := time.Now()
	baseImage(t, g)
	asshipped.BuildAgentImage(t, h, source, "layerprobe-base:test")
	pass.SetupSeconds = time.Since(start).Seconds()
	p.logf("cgroupv2 %s: the agent image built in %s", label, time.Since(start).Round(time.Second))
	load := asshipped.StartLoad(t, h)

	var failed []string
	for _, name := range cgroupV2Deployments {
		if contains(skip, name) {
			continue
		}
		d := cgroupV2Deployment{Name: name}
		start := time.Now()
		stop := p.ticker("cgroupv2 "+label+" "+name, 30*time.Minute, 10*time.Minute)
		ok := t.Run(label+"-"+name, func(t *testing.T) {
			var a asshipped.Agent
			switch name {
			case "systemd":
				a = asshipped.RunUnit(t, h, source)
			case "deb":
				a = asshipped.RunDeb(t, h, source)
			case "compose":
				a = asshipped.RunCompose(t, h, source, compose)
			case "daemonset":
				a = asshipped.RunPod(t, h, source, asshipped.CgroupNSPrivate)
			}
			v := asshipped.CheckLoadedAgent(t, h, load, a, 2*time.Hour)
			d.Verdict = &v
			v.Report(t, false)
		})
		stop()
		d.Seconds = time.Since(start).Seconds()
		if !ok && d.Verdict == nil {
			d.Error = "the deployment did not come up or its cycle failed (the test log says why)"
		}
		if !d.ok() {
			failed = append(failed, name)
		}
		pass.Deployments = append(pass.Deployments, d)
		p.logf("cgroupv2 %s %s: %s in %s", label, name, verdictLine(d), time.Since(start).Round(time.Second))
	}
	if label == "fix" && len(failed) > 0 {
		return pass, fmt.Errorf("cgroup v2, %s: %s failed their checks", shortRev(commit), strings.Join(failed, ", "))
	}
	return pass, nil
}

// verdictLine is a deployment's outcome in a line, for the progress log.
func verdictLine(d cgroupV2Deployment) string {
	if d.Verdict == nil {
		return "no verdict: " + d.Error
	}
	var aa []string
	for _, f := range d.Verdict.AA {
		aa = append(aa, fmt.Sprintf("%s %.0f%% [%.0f–%.0f]", f.Workload, f.Percent, f.Low, f.High))
	}
	return fmt.Sprintf("host arm %s, joined metric %q, bind %s, %d problem(s), %d A/A problem(s)",
		d.Verdict.HostArmCgroup, d.Verdict.JoinedMetric, strings.Join(aa, ", "), len(d.Verdict.Problems), len(d.Verdict.AAProblems))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// baseImage imports the agent image's Debian base into the guest's engine
// as layerprobe-base:test: the Debian root the guest is made of, without
// what an agent image never runs (the kernel and its modules, the engine's
// own binaries, documentation, apt's lists, which the Dockerfile's
// apt-get update fetches again), written to the share by this machine and
// imported by the guest from there.
func baseImage(t *testing.T, g *testvm.Guest) {
	t.Helper()
	tarPath := filepath.Join(g.Share, "base.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	tc := testharness.TarCommand(testharness.DebianRoot(t), "boot", "usr/lib/modules", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info",
		"usr/sbin/dockerd", "usr/sbin/docker-proxy", "usr/sbin/runc", "usr/bin/docker", "usr/bin/docker-init", "usr/bin/containerd*", "usr/bin/ctr", "var/lib/apt/lists")
	var stderr strings.Builder
	tc.Stdout, tc.Stderr = f, &stderr
	if err := tc.Run(); err != nil {
		t.Fatalf("tar the Debian root: %v\n%s", err, stderr.String())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tarPath)
	start := time.Now()
	if r := g.Exec(60*time.Minute, "docker", "import", tarPath, "layerprobe-base:test"); r.Err != nil {
		t.Fatalf("docker import (the agent image's base):\n%s", r)
	}
	t.Logf("the agent image's base imported: %s", time.Since(start).Round(time.Second))
}

// guestHost is the guest as asshipped's Host: commands over ssh, its
// engine through the forwarded socket, its share at the same path, its
// loopback's ports forwarded over ssh.
type guestHost struct {
	g      *testvm.Guest
	socket string
}

func (h *guestHost) Exec(t testing.TB, timeout time.Duration, argv ...string) asshipped.Result {
	return asshipped.Result(h.g.Exec(timeout, argv...))
}

func (h *guestHost) DockerEnv() []string { return []string{"DOCKER_HOST=unix://" + h.socket} }
func (h *guestHost) Share() string       { return h.g.Share }
func (h *guestHost) SharedAt() string    { return h.g.Share }

// URL forwards port until t ends.
func (h *guestHost) URL(t testing.TB, port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d", h.g.ForwardPort(t, port))
}

// ArmsPoll: a scan of the emulated guest's /proc is tens of milliseconds
// of its CPU, and a host arm there lives seconds.
func (h *guestHost) ArmsPoll() time.Duration { return 100 * time.Millisecond }
