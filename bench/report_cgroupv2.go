//go:build bench

package bench

import (
	"fmt"
	"strings"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
)

// writeCgroupV2 reports the cgroupv2 sections: each pass's deployments,
// their join, their alert and bind's A/A figures under load.
func writeCgroupV2(w *mdWriter, r *results) {
	w.p("## 10. cgroup v2: the shipped deployments under load")
	if len(r.CgroupV2) == 0 {
		w.p("Not measured in this run.")
		return
	}
	g := r.CgroupV2[0]
	w.p("Each shipped deployment as shipped, in a Debian 12 guest under QEMU (%s) with systemd as PID 1 on the unified hierarchy "+
		"(cgroup v2), Debian's kernel (%s) and Debian's Docker (%s): the systemd unit (`systemctl enable --now`), the .deb "+
		"(`apt-get install`), the compose file's agent service with Docker Compose %s (its image built from deploy/docker/Dockerfile "+
		"in the guest) and the DaemonSet's pod with `docker run`, every flag derived from the manifest, in a cgroup namespace of "+
		"its own, as a kubelet's runtime gives a pod on a cgroup v2 node. While each agent's first cycle ran, busy loops in "+
		"containers of the guest's engine kept every CPU of the guest busy, and a watcher of the guest's /proc recorded the "+
		"cgroup of every host-arm process. The agent's configuration is test/ops's loaded one: targets host and bind, "+
		"workloads randwrite and smallfiles, the smoke profile, 6 rounds.",
		g.Accel, g.Kernel, g.Docker, g.Compose)
	w.p("The A/A check: bind writes the host's own file system through a bind mount, so its headline interval must reach into "+
		"[%.0f%%, %.0f%%] of the host (a factor %.1f around 100%%). \"joined\" is the host arm's cgroup as the agent reports it "+
		"(/api/v1/engines); the metric is layerprobe_host_arm_cgroup_joined, whose 0 fires LayerprobeHostArmOutsideCPUCgroup; "+
		"\"arms seen\" counts the host-arm processes of fio and of the small-file helper that the watcher saw, each checked to "+
		"have run in the probe container's cgroup. \"Install to first interval\" is the time a user waits for an answer: from the "+
		"install command (`systemctl enable --now`, `apt-get install`, `docker compose up`, the pod's `docker run`) until "+
		"/api/v1/overhead had bind's 95%% interval for both workloads, under the load.", 100/asshipped.AAFactor, 100*asshipped.AAFactor, asshipped.AAFactor)
	var rows [][]string
	for _, pass := range r.CgroupV2 {
		for _, d := range pass.Deployments {
			row := []string{d.Name, fmt.Sprintf("%s (%s)", pass.Label, shortRev(cmpOr(d.Rev, pass.Rev)))}
			if d.Verdict == nil {
				row = append(row, "—", "—", "—", "—", "—", dur(d.Seconds), "—", "no verdict: "+d.Error)
				rows = append(rows, row)
				continue
			}
			v := d.Verdict
			joined := v.HostArmCgroup
			if v.HostArmCgroupError != "" {
				joined += " (" + shorten(v.HostArmCgroupError, 80) + ")"
			}
			metric := v.JoinedMetric
			if metric == "" {
				metric = "none"
			}
			if v.Alert {
				metric += ", alert fires"
			}
			aa := map[string]string{}
			for _, f := range v.AA {
				verdict := "passes"
				if !f.Pass {
					verdict = "**fails**"
				}
				aa[string(f.Workload)] = fmt.Sprintf("%.0f%% [%.0f–%.0f], %s", f.Percent, f.Low, f.High, verdict)
			}
			outcome := "passes"
			if n := len(v.Problems) + len(v.AAProblems); n > 0 {
				outcome = fmt.Sprintf("%d failed check(s): %s", n, shorten(strings.Join(append(append([]string{}, v.Problems...), v.AAProblems...), "; "), 160))
			}
			row = append(row, joined, metric,
				cmpOr(aa["randwrite"], "—"), cmpOr(aa["smallfiles"], "—"),
				fmt.Sprintf("%d fio, %d smallfiles", v.ArmsSeen["fio"], v.ArmsSeen["smallfiles"]),
				dur(v.CycleSeconds), firstInterval(v.FirstIntervalSeconds), outcome)
			rows = append(rows, row)
		}
	}
	w.table([]string{"Deployment", "Revision", "Host arm", "Metric", "bind randwrite (iops)", "bind smallfiles (files/s)", "Arms seen", "First cycle", "Install to first interval", "Outcome"}, rows)
	var notes []string
	for _, pass := range r.CgroupV2 {
		notes = append(notes, fmt.Sprintf("%s: %s, the guest booted in %s, the agent image built in %s", pass.Label, pass.Version,
			dur(pass.BootSeconds), dur(pass.SetupSeconds)))
	}
	w.p("Revisions: %s. \"before\" is the last commit before the host arm joined from a private cgroup namespace "+
		"(BENCH_CGROUPV2_BEFORE); its .deb is its unit and is left out. The raw figures are in bench/results.json (`cgroupv2`).",
		strings.Join(notes, "; "))
}

// firstInterval is Verdict.FirstIntervalSeconds: "—" when there was no
// interval (or a run before the figure was kept).
func firstInterval(s float64) string {
	if s <= 0 {
		return "—"
	}
	return dur(s)
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "/")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
