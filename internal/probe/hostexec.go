package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// cgroupsOf returns the CPU cgroups of probe container p for the host arm
// to join, or none with a warning: the measurement still runs, but a host
// whose CPUs are busy can then show CPU contention as overhead, so the
// session records it (HostArmCgroup) for every surface to show.
func (s *Session) cgroupsOf(p *engine.Probe) []string {
	warn := func(err error) []string {
		s.logger.Warn("the host arm runs outside the probe container's CPU cgroup", "err", err)
		s.Warnings = append(s.Warnings, fmt.Sprintf("host arm outside the probe container's CPU cgroup (%v): on a host with busy CPUs the overheads include CPU contention", err))
		s.HostArmCgroup, s.HostArmCgroupError = HostArmOutside, err.Error()
		return nil
	}
	if p == nil || p.Pid <= 0 {
		// Engines tell a running container's PID; only fakes do not.
		s.logger.Debug("the engine did not tell the probe container's process; the host arm stays in its own cgroups")
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return warn(err)
	}
	dirs, err := cgroup.Of(p.Pid, p.ContainerID)
	if err != nil {
		return warn(err)
	}
	s.self = self
	s.HostArmCgroup = HostArmJoined
	s.logger.Debug("host arm joins the probe container's CPU cgroups", "cgroups", dirs)
	return dirs
}

// hostArgv wraps a host command so that it starts in the probe container's
// CPU cgroups: `layerprobe probe-helper cgexec DIR... -- argv...`.
func (s *Session) hostArgv(argv []string) []string {
	if len(s.hostCgroups) == 0 {
		return argv
	}
	out := append([]string{s.self, "probe-helper", "cgexec"}, s.hostCgroups...)
	return append(append(out, "--"), argv...)
}
