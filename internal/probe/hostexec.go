package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/layerprobe/layerprobe/internal/cgroup"
	"github.com/layerprobe/layerprobe/internal/engine"
)

// killGrace is how long fio gets after SIGTERM to stop and unlink its files.
const killGrace = 5 * time.Second

// runHost runs fio on the host. fio runs in its own process group (numjobs
// forks workers) which is signalled as a whole: SIGTERM first so fio removes
// its files, SIGKILL after killGrace. Pdeathsig stops fio if layerprobe itself
// is killed, so a SIGKILLed agent does not leave fio writing.
func runHost(ctx context.Context, argv []string) (stdout, stderr []byte, exitCode int, err error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = hostSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, nil, -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(killGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-done
		}
		// Workers that outlived their parent belong to the group too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode() // -1 when killed by a signal
		return out.Bytes(), errb.Bytes(), code, nil
	}
	if err != nil {
		return out.Bytes(), errb.Bytes(), -1, err
	}
	return out.Bytes(), errb.Bytes(), 0, nil
}

// The values of Session.HostArmCgroup.
const (
	HostArmJoined  = "joined"
	HostArmOutside = "outside"
)

// cgroupNamespace fills in spec what an agent in a private cgroup
// namespace needs to join the probe's CPU cgroups: the probe in the
// host's cgroup namespace, under the agent's own AppArmor profile, so
// that the host arm may enter the probe's namespace (cgroup.Of).
func (s *Session) cgroupNamespace(spec *engine.ProbeSpec) {
	if !cgroup.PrivateNamespace() {
		return
	}
	spec.HostCgroupNamespace = true
	spec.AppArmorProfile = ownAppArmorProfile()
	s.logger.Info("this process runs in a private cgroup namespace: the probe container starts in the host's, which the host arm enters to join its CPU cgroups",
		"apparmor_profile", spec.AppArmorProfile)
}

// cgroupsOf returns what the host arm joins to run in probe container p's
// CPU cgroups, or nothing with a warning: the measurement still runs, but
// a host whose CPUs are busy can then show CPU contention as overhead, so
// the session records it (HostArmCgroup) for every surface to show.
func (s *Session) cgroupsOf(p *engine.Probe) cgroup.Target {
	warn := func(err error) cgroup.Target {
		s.logger.Warn("the host arm runs outside the probe container's CPU cgroup", "err", err)
		s.Warnings = append(s.Warnings, fmt.Sprintf("host arm outside the probe container's CPU cgroup (%v): on a host with busy CPUs the overheads include CPU contention", err))
		s.HostArmCgroup, s.HostArmCgroupError = HostArmOutside, err.Error()
		return cgroup.Target{}
	}
	if p == nil || p.Pid <= 0 {
		// Engines tell a running container's PID; only fakes do not.
		s.logger.Debug("the engine did not tell the probe container's process; the host arm stays in its own cgroups")
		return cgroup.Target{}
	}
	self, err := os.Executable()
	if err != nil {
		return warn(err)
	}
	t, err := cgroup.Of(p.Pid, p.ContainerID)
	if err != nil {
		return warn(err)
	}
	s.self = self
	s.HostArmCgroup = HostArmJoined
	s.logger.Debug("host arm joins the probe container's CPU cgroups", "cgroups", t.Dirs, "cgroup_namespace", t.Namespace)
	return t
}

// hostArgv wraps a host command so that it starts in the probe container's
// CPU cgroups: `layerprobe probe-helper cgexec [--cgroupns=NS] DIR... --
// argv...`.
func (s *Session) hostArgv(argv []string) []string {
	if len(s.hostCgroups.Dirs) == 0 {
		return argv
	}
	out := []string{s.self, "probe-helper", "cgexec"}
	if ns := s.hostCgroups.Namespace; ns != "" {
		out = append(out, "--cgroupns="+ns)
	}
	out = append(out, s.hostCgroups.Dirs...)
	return append(append(out, "--"), argv...)
}

// ownAppArmorProfile is the AppArmor profile that confines this process,
// or "" when none does (unconfined, no AppArmor, not Linux).
func ownAppArmorProfile() string {
	b, err := os.ReadFile("/proc/self/attr/apparmor/current")
	if err != nil {
		// Before Linux 5.8 the major security module's label is the
		// only one, in attr/current: AppArmor's where it is loaded.
		if _, aerr := os.Stat("/sys/kernel/security/apparmor"); aerr != nil {
			return ""
		}
		if b, err = os.ReadFile("/proc/self/attr/current"); err != nil {
			return ""
		}
	}
	return appArmorProfile(string(b))
}

// appArmorProfile reads the profile's name from an AppArmor label,
// "docker-default (enforce)"; "unconfined" is none.
func appArmorProfile(label string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(strings.TrimRight(label, "\x00")), " (")
	if name == "unconfined" {
		return ""
	}
	return name
}
