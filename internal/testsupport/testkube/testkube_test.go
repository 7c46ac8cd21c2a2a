//go:build linux && kube

package testkube

import (
	"strings"
	"testing"
	"time"
)

// TestNodeEngine: the node's containerd runs its CRI plugin, and the pause
// image built here is in the kubelet's namespace under the name the CRI
// configuration gives as its sandbox image.
func TestNodeEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs root and containerd")
	}
	Require(t)
	c := newCluster(t)
	c.startNode()
	out, err := c.Ctr(time.Minute, "k8s.io", "plugins", "ls")
	if err != nil {
		t.Fatalf("ctr plugins ls: %v\n%s", err, out)
	}
	var cri string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 4 && f[1] == "cri" {
			cri = f[len(f)-1]
		}
	}
	if cri != "ok" {
		t.Errorf("the CRI plugin is %q, want ok:\n%s", cri, out)
	}
	out, err = c.Ctr(time.Minute, "k8s.io", "images", "ls", "-q")
	if err != nil || !strings.Contains(out, PauseImage) {
		t.Errorf("ctr -n k8s.io images ls: %v, want %s:\n%s", err, PauseImage, out)
	}
}
