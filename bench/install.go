//go:build bench

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/stats"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// The install section cross-checks the smallfiles workload against a real
// package install: `npm ci --offline` of a fixed Node.js project on every
// target (the container's writable layer, a bind mount, a named volume and
// the host), in paired rounds, on each Docker storage driver of the engines
// section. The packages come from the npm registry once, into a cache that
// every later run installs from offline; Node.js and npm are Debian 12's,
// in a root file system made with debootstrap that is both the image of the
// containers and, by chroot, the host arm's: the two arms run the very same
// binaries.

// installPackageJSON is the project: a web server, a linter and a few
// libraries, about 200 packages and 3,000 files in node_modules, the shape
// of a small application's install.
const installPackageJSON = `{
  "name": "lpbench-install",
  "version": "1.0.0",
  "private": true,
  "description": "layerprobe's benchmark: a package install on every target",
  "dependencies": {
    "chalk": "4.1.2",
    "commander": "11.1.0",
    "eslint": "8.57.1",
    "express": "4.21.2",
    "lodash": "4.17.21",
    "moment": "2.30.1"
  }
}
`

// installCacheDir keeps the root file system and the npm cache between
// benchmark runs (debootstrap and the download take minutes).
const installCacheDir = "/var/cache/layerprobe-bench/install"

// installRounds: 10 rounds, 40 installs a driver. At 6, the fewest with
// an exact 95% interval (the range of the 21 Walsh averages), no target's
// install interval separated from another's on any driver, fuse-overlayfs's
// container (74% [38–116]) included: an install's time varies by tens of
// percent from round to round, and the range of 21 averages is wide.
const installRounds = 10

// installTargets are the targets in the report's order.
var installTargets = []string{"host", "container", "bind", "volume"}

// installDrivers are the engines section's Docker cases: the cross-check
// needs named volumes and `docker exec`.
func installDrivers() []engineCase {
	var out []engineCase
	for _, c := range engineCases {
		if c.opts.Engine == "" {
			out = append(out, c)
		}
	}
	return out
}

// installRun is the install rounds on one engine and driver.
type installRun struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	// Node and Npm are the versions both arms ran; Packages and Files what
	// one install lays out (from the host arm's first round).
	Node     string `json:"node,omitempty"`
	Npm      string `json:"npm,omitempty"`
	Packages int    `json:"packages,omitempty"`
	Files    int    `json:"files,omitempty"`
	// Seconds are each target's install times, round by round: round i
	// ran every target once, in a random order that the next round
	// reverses. A failed install is NaN (null).
	Seconds map[string][]nullFloat `json:"seconds"`
	// Run is `layerprobe run --rounds N` (N the installs' rounds) of the default profile on the
	// same daemon right after the installs: the smallfiles figures the
	// installs are checked against, measured in the same minutes.
	Run   *runDoc `json:"run,omitempty"`
	Error string  `json:"error,omitempty"`
}

// nullFloat is a float64 that is null in JSON when it is NaN.
type nullFloat float64

func (f nullFloat) MarshalJSON() ([]byte, error) {
	if v := float64(f); v != v {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(f), 'g', -1, 64), nil
}

func (f *nullFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = nullFloat(nan())
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	*f = nullFloat(v)
	return err
}

func nan() float64 { var z float64; return z / z }

// overhead is the target's install speed against the host's, paired by
// round: the Hodges–Lehmann estimate with its exact 95% interval, as
// `layerprobe run` computes every overhead.
func (r installRun) overhead(target string) stats.Overhead {
	h, t := r.Seconds["host"], r.Seconds[target]
	n := min(len(h), len(t))
	hs, ts := make([]float64, n), make([]float64, n)
	for i := range n {
		hs[i], ts[i] = float64(h[i]), float64(t[i])
	}
	return stats.PairedOverhead(hs, ts, stats.LowerIsBetter, 0.95)
}

// measureInstall runs the install rounds on every Docker driver; a driver
// that fails is recorded and the others still run.
func measureInstall(ctx context.Context, t *testing.T, p *progress, bin, work, lockFile string, short bool) ([]installRun, error) {
	rounds := installRounds
	if short {
		rounds = 2
	}
	root, err := installRoot(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []installRun
	var failed []string
	for _, c := range installDrivers() {
		ir := installRun{Name: c.name, Label: c.label, Seconds: map[string][]nullFloat{}}
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			if short && opts.SizeMiB > 0 {
				opts.SizeMiB = 4096
			}
			d := testdaemon.Start(t, opts)
			stop := p.ticker("install "+c.name, 5*time.Minute, 5*time.Minute)
			defer stop()
			var errs []error
			if err := ir.measure(ctx, p, d, root, rounds); err != nil {
				errs = append(errs, err)
			}
			// The smallfiles figure over as many rounds as the installs.
			args := []string{"--rounds", strconv.Itoa(rounds)}
			if short {
				args = append(args, "--profile", "smoke")
			}
			l := lpRun{binary: "new", bin: bin, host: d.Host, lockFile: lockFile, workDir: filepath.Join(work, "install-"+c.name),
				args: args, timeout: 30 * time.Minute}
			p.logf("install: %s: layerprobe run %s", c.name, strings.Join(args, " "))
			doc, err := l.run(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("layerprobe run: %w", err))
			}
			ir.Run = doc
			if err := errors.Join(errs...); err != nil {
				ir.Error = err.Error()
			}
		})
		if ir.Error != "" {
			failed = append(failed, c.name+": "+ir.Error)
		}
		out = append(out, ir)
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("install: %s", strings.Join(failed, "; "))
	}
	return out, nil
}

// installRoot is the root file system with Node.js, npm, the project in
// /app (package.json and its lock file) and a filled npm cache in
// /npmcache: made once with debootstrap and one online `npm install`.
func installRoot(ctx context.Context, p *progress) (string, error) {
	root := filepath.Join(installCacheDir, "root")
	done := filepath.Join(installCacheDir, "ready")
	if b, err := os.ReadFile(done); err == nil && string(b) == installPackageJSON {
		return root, nil
	}
	if err := os.MkdirAll(installCacheDir, 0o755); err != nil {
		return "", err
	}
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/npm")); err != nil {
		// minbase, then apt in the chroot: debootstrap's own --include
		// cannot order npm's tree of node-* dependencies.
		p.logf("install: debootstrap of Debian 12 with nodejs and npm into %s", root)
		_ = os.RemoveAll(root)
		if out, err := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include=ca-certificates",
			"bookworm", root, "http://deb.debian.org/debian").CombinedOutput(); err != nil {
			return "", fmt.Errorf("debootstrap: %w: %s", err, tail(out))
		}
		if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), resolv, 0o644); err != nil {
			return "", err
		}
		apt := exec.CommandContext(ctx, "chroot", root, "sh", "-c",
			"apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm && apt-get clean")
		apt.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := apt.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get install nodejs npm in the root file system: %w: %s", err, tail(out))
		}
	}
	for _, dir := range []string{"app", "npmcache", "hostarm"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "app/package.json"), []byte(installPackageJSON), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), resolv, 0o644); err != nil {
		return "", err
	}
	// The host's CA bundle: the one download goes the way the host's own
	// do (a host may trust a CA that Debian's bundle lacks).
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/ssl/certs/host-ca-certificates.crt"), ca, 0o644); err != nil {
		return "", err
	}
	p.logf("install: npm install from the registry, once, into the cache")
	if out, err := exec.CommandContext(ctx, "chroot", root, "sh", "-c",
		"cd /app && npm install --cache /npmcache --cafile /etc/ssl/certs/host-ca-certificates.crt --no-audit --no-fund --loglevel=error "+
			"--fetch-timeout=60000 --fetch-retries=1 && rm -rf node_modules").CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install (online, once): %w: %s", err, tail(out))
	}
	return root, os.WriteFile(done, []byte(installPackageJSON), 0o644)
}

// installScript times one install in dir: node_modules removed and the
// file systems synced first (not timed), then `npm ci` from the cache
// alone; it prints the nanoseconds.
func installScript(dir string) string {
	return fmt.Sprintf("cd %s && rm -rf node_modules && sync && a=$(date +%%s%%N) && "+
		"npm ci --offline --cache /npmcache --no-audit --no-fund --loglevel=error >/dev/null && "+
		"b=$(date +%%s%%N) && echo $((b-a))", dir)
}

// measure imports the root file system as an image into the daemon, starts
// a container with the bind mount and the volume, and runs the rounds.
func (ir *installRun) measure(ctx context.Context, p *progress, d *testdaemon.Daemon, root string, rounds int) error {
	docker := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("docker %s: %w: %s", args[0], err, tail(errb.Bytes()))
		}
		return strings.TrimSpace(out.String()), nil
	}
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--exclude=./npmcache", "--exclude=./hostarm/*", "-C", root, "-c", ".")
	imp := exec.CommandContext(ctx, "docker", "import", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"-", "lpbench-node:1")
	imp.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		return err
	}
	if out, err := imp.CombinedOutput(); err != nil {
		_ = tarCmd.Wait()
		return fmt.Errorf("docker import: %w: %s", err, tail(out))
	}
	if err := tarCmd.Wait(); err != nil {
		return fmt.Errorf("tar of the root file system: %w", err)
	}
	// host and bind: directories of their own on the data root's file
	// system, as layerprobe's targets are.
	hostDir, bindDir := filepath.Join(d.DataRoot, "lpbench-install-host"), filepath.Join(d.DataRoot, "lpbench-install-bind")
	lock, err := os.ReadFile(filepath.Join(root, "app/package-lock.json"))
	if err != nil {
		return err
	}
	for _, dir := range []string{hostDir, bindDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(installPackageJSON), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), lock, 0o644); err != nil {
			return err
		}
	}
	if _, err := docker("volume", "create", "lpbench-install"); err != nil {
		return err
	}
	if _, err := docker("run", "-d", "--network", "none", "--name", "lpbench-node",
		"-v", bindDir+":/bind", "-v", "lpbench-install:/vol", "-v", filepath.Join(root, "npmcache")+":/npmcache",
		"lpbench-node:1", "sleep", "infinity"); err != nil {
		return err
	}
	defer func() { _, _ = docker("rm", "-f", "lpbench-node") }()
	if _, err := docker("exec", "lpbench-node", "cp", "/app/package.json", "/app/package-lock.json", "/vol/"); err != nil {
		return err
	}
	// The host arm runs in the same root file system by chroot, with its
	// directory bind-mounted at /hostarm: no container, the same binaries.
	hostArm := filepath.Join(root, "hostarm")
	if err := syscall.Mount(hostDir, hostArm, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", hostDir, hostArm, err)
	}
	defer func() { _ = syscall.Unmount(hostArm, syscall.MNT_DETACH) }()

	if v, err := docker("exec", "lpbench-node", "sh", "-c", "node --version; npm --version"); err == nil {
		if f := strings.Fields(v); len(f) == 2 {
			ir.Node, ir.Npm = f[0], f[1]
		}
	}
	// The host arm joins the container's CPU cgroups, as layerprobe's host
	// arm does: npm is mostly CPU, and on a busy machine a host arm in
	// another cgroup than the container's would compare CPU shares, not
	// storage.
	join, err := cgroupJoin(docker)
	if err != nil {
		return err
	}
	dirs := map[string]string{"container": "/app", "bind": "/bind", "volume": "/vol", "host": "/hostarm"}
	run := func(target string) (float64, error) {
		var out []byte
		var err error
		if target == "host" {
			out, err = exec.CommandContext(ctx, "sh", "-c", join+"exec chroot "+root+" sh -c '"+installScript(dirs[target])+"'").CombinedOutput()
		} else {
			var s string
			s, err = docker("exec", "lpbench-node", "sh", "-c", installScript(dirs[target]))
			out = []byte(s)
		}
		if err != nil {
			return nan(), fmt.Errorf("%s: %w: %s", target, err, tail(out))
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			return nan(), fmt.Errorf("%s: timing %q: %w", target, out, err)
		}
		return float64(ns) / 1e9, nil
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var order []string
	var errs []error
	for r := range rounds {
		if r%2 == 1 {
			slices.Reverse(order)
		} else {
			order = slices.Clone(installTargets)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, target := range order {
			sec, err := run(target)
			if err != nil {
				errs = append(errs, err)
			}
			ir.Seconds[target] = append(ir.Seconds[target], nullFloat(sec))
		}
		p.logf("install: %s round %d/%d: host %.1fs, container %.1fs, bind %.1fs, volume %.1fs", ir.Name, r+1, rounds,
			ir.Seconds["host"][r], ir.Seconds["container"][r], ir.Seconds["bind"][r], ir.Seconds["volume"][r])
	}
	ir.Packages, ir.Files = countInstall(filepath.Join(hostDir, "node_modules"))
	return errors.Join(errs...)
}

// cgroupJoin is a shell prefix that moves the shell into the CPU cgroups
// (cgroup v1 cpu, cpuacct and cpuset; v2's unified one) of the container
// lpbench-node's first process.
func cgroupJoin(docker func(args ...string) (string, error)) (string, error) {
	pid, err := docker("inspect", "-f", "{{.State.Pid}}", "lpbench-node")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", err
	}
	var join strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:path
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var mount string
		switch {
		case f[1] == "":
			mount = "/sys/fs/cgroup" // v2
		case slices.ContainsFunc(strings.Split(f[1], ","), func(c string) bool { return c == "cpu" || c == "cpuacct" || c == "cpuset" }):
			mount = "/sys/fs/cgroup/" + f[1]
		default:
			continue
		}
		procs := filepath.Join(mount, f[2], "cgroup.procs")
		if _, err := os.Stat(procs); err != nil {
			continue
		}
		fmt.Fprintf(&join, "echo $$ > %s && ", procs)
	}
	if join.Len() == 0 {
		return "", fmt.Errorf("no CPU cgroup of the container's process %s to join", pid)
	}
	return join.String(), nil
}

// countInstall counts the packages (directories holding a package.json)
// and the files under a node_modules.
func countInstall(dir string) (packages, files int) {
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !e.IsDir() {
			files++
			if e.Name() == "package.json" {
				packages++
			}
		}
		return nil
	})
	return packages, files
}

// tail is the last lines of a command's output, for an error.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// writeInstall is the report's section: each driver's install times as
// percent of the host's speed, next to the smallfiles workload's headline
// from the engines section's run on the same driver, and whether the two
// rank the targets alike where their intervals separate.
func writeInstall(w *mdWriter, r *results) {
	w.p("## 8. A real package install next to smallfiles")
	if len(r.Install) == 0 {
		w.p("Not measured in this run.")
		return
	}
	ir0 := r.Install[0]
	w.p("`npm ci --offline` of a small application (express, eslint, lodash, moment, commander, chalk: %d packages, "+
		"%d files in node_modules) on every target, from a filled npm cache, in %d paired rounds (every target once a "+
		"round, in a random order that the next round reverses), on each Docker storage driver of section 7, with "+
		"Node.js %s and npm %s from Debian 12 in both arms (the host arm by chroot into the containers' own root file "+
		"system, in the container's CPU cgroups). Percent of the host's speed (host time / target time) with the exact 95%% interval of the paired "+
		"ratios, as `layerprobe run` computes them, next to the smallfiles workload's headline from a `layerprobe run "+
		"--rounds %d` on the same daemon right after the installs. The raw times are in bench/results.json (`install`).",
		ir0.Packages, ir0.Files, len(ir0.Seconds["host"]), ir0.Node, ir0.Npm, len(ir0.Seconds["host"]))
	var rows [][]string
	var agree, disagree []string
	for _, ir := range r.Install {
		type pos struct {
			target   string
			lo, hi   float64
			smLo     float64
			smHi     float64
			hasSmall bool
		}
		var ps []pos
		for _, target := range installTargets {
			med := median(floats(ir.Seconds[target]))
			cell, small := "baseline", "baseline"
			if target != "host" {
				o := ir.overhead(target)
				cell = fmt.Sprintf("%.0f%% [%.0f–%.0f]", o.PercentOfHost, o.PercentLow, o.PercentHigh)
				if o.N < 6 {
					cell = fmt.Sprintf("%.0f%% (%d rounds)", o.PercentOfHost, o.N)
				}
				small = "n/a"
				p := pos{target: target, lo: o.PercentLow, hi: o.PercentHigh}
				if ir.Run != nil {
					if so, ok := ir.Run.reported(target, "smallfiles"); ok {
						small = percentOfHost(so, ok)
						p.smLo, p.smHi, p.hasSmall = so.PercentLow, so.PercentHigh, !so.Withheld
					}
				}
				ps = append(ps, p)
			}
			rows = append(rows, []string{ir.Label, target, fmt.Sprintf("%.1f s", med), cell, small})
		}
		// Where both pairs of intervals separate, do they order the two
		// targets alike?
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				a, b := ps[i], ps[j]
				if !a.hasSmall || !b.hasSmall {
					continue
				}
				installSep := a.hi < b.lo || b.hi < a.lo
				smallSep := a.smHi < b.smLo || b.smHi < a.smLo
				if !installSep || !smallSep {
					continue
				}
				pair := fmt.Sprintf("%s: %s vs %s", ir.Name, a.target, b.target)
				if (a.hi < b.lo) == (a.smHi < b.smLo) {
					agree = append(agree, pair)
				} else {
					disagree = append(disagree, pair)
				}
			}
		}
		if ir.Error != "" {
			rows = append(rows, []string{ir.Label, "error", "", strings.ReplaceAll(ir.Error, "|", "/"), ""})
		}
	}
	w.table([]string{"engine and driver", "target", "npm ci, median", "install speed, % of host [95% CI]", "smallfiles, % of host [95% CI]"}, rows)
	w.p("Pairs of targets whose install intervals and smallfiles intervals both separate: %d ranked alike (%s), %d "+
		"ranked the other way (%s).", len(agree), joinOrNone(agree), len(disagree), joinOrNone(disagree))
}

func floats(xs []nullFloat) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if v := float64(x); v == v {
			out = append(out, v)
		}
	}
	return out
}

func joinOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, "; ")
}
