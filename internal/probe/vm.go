package probe

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/topology"
)

// HostArmNotApplicable is Session.HostArmCgroup for an engine in a VM: the
// probe container's cgroups are the VM kernel's, which no process on this
// host can join. It is neither joined nor a failure to join, so the metric
// layerprobe_host_arm_cgroup_joined (and the alert on it) has no series.
const HostArmNotApplicable = "not_applicable"

// prepareVMScratch sets up the host and bind targets of an engine in a VM:
// the scratch directory is on this host's disk (host measures it natively)
// and must be one the VM shares at the same path (bind mounts it through
// the VM's file sharing). Nothing of the data root can be checked from
// here: it is on the VM's disk.
func (s *Session) prepareVMScratch() error {
	s.scratch = s.opts.ScratchDir
	if s.scratch == "" {
		return fail("host_dir", nil,
			"the engine runs in a VM (%s): set engines[].scratch_dir to a host directory the VM shares writable at the same path, e.g. %s; host is measured there natively and bind through the VM's file sharing",
			s.topo.Reason, topology.HostDirHint(s.topo.Product))
	}
	if err := os.MkdirAll(s.scratch, 0o700); err != nil {
		return fail("scratch", err, "create scratch directory %s: %v", s.scratch, err)
	}
	s.Warnings = append(s.Warnings, "engine in a VM: every ratio is against the native host disk ("+s.scratch+"), not a same-disk overhead")
	return nil
}

// shareOf names the VM's file sharing under the bind target from the probe
// container's own mount table (the helper prints it; the image has no
// shell), or "unknown".
func (s *Session) shareOf(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.eng.Exec(cctx, s.probe, []string{engine.ContainerHelper, "probe-helper", "mountinfo"})
	if err != nil || res.ExitCode != 0 {
		s.logger.Warn("cannot read the probe container's mount table; the VM's file sharing is unknown", "err", err, "stderr", trim(res.Stderr))
		return topology.Share("")
	}
	return topology.Share(topology.MountType(string(res.Stdout), engine.ContainerBind))
}

// localKernel and localHostname are this host's, for telling a VM's
// engine from a local one (topology.Detect).
func localKernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func localHostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
