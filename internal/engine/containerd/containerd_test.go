package containerd

import (
	"context"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/layerprobe/layerprobe/internal/engine"
)

func TestOwnerOfIngest(t *testing.T) {
	owner := "lp1-2f9c-4711-123456"
	for ref, want := range map[string]string{
		ingestPrefix + owner + "-layer-0123456789ab":   owner,
		ingestPrefix + owner + "-layer-0123456789ab.2": owner,
		ingestPrefix + owner + "-0123456789ab":         owner,
		"kubelet-blob":                                 "",
		"layerprobe-":                                  "",
		"layerprobe-x":                                 "",
	} {
		if got := ownerOfIngest(ref); got != want {
			t.Errorf("ownerOfIngest(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestLabels(t *testing.T) {
	c := &Client{}
	l := c.labels("lp1-a-1-2", "probe", "node")
	if l[engine.LabelManaged] != "true" || l[engine.LabelOwner] != "lp1-a-1-2" || l[engine.LabelRole] != "probe" || l[engine.LabelEngine] != "node" {
		t.Errorf("labels = %v", l)
	}
	if _, ok := c.labels("o", "image", "")[engine.LabelEngine]; ok {
		t.Error("an image label names an engine")
	}
	// A caller's labels cannot override layerprobe's own.
	got := withLabels(l, map[string]string{engine.LabelManaged: "false", engine.LabelOwner: "else", "extra": "1"})
	if got[engine.LabelManaged] != "true" || got[engine.LabelOwner] != "lp1-a-1-2" || got["extra"] != "1" {
		t.Errorf("withLabels = %v", got)
	}
	if f := labelFilter(engine.LabelManaged, "true"); f != `labels."io.layerprobe.managed"==true` {
		t.Errorf("labelFilter = %s", f)
	}
}

// An agent in a private cgroup namespace asks for the probe in the host's
// and under its own AppArmor profile: the task never gets a cgroup
// namespace of its own, and carries the profile.
func TestProbeSpecCgroupNamespaceAndAppArmor(t *testing.T) {
	for _, ps := range []engine.ProbeSpec{
		{BindSource: "/lp"},
		{BindSource: "/lp", HostCgroupNamespace: true, AppArmorProfile: "cri-containerd.apparmor.d"},
	} {
		ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
		s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "abc"}, probeSpec("abc", ps)...)
		if err != nil {
			t.Fatalf("%+v: %v", ps, err)
		}
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.CgroupNamespace {
				t.Errorf("%+v: the task has a cgroup namespace of its own", ps)
			}
		}
		if s.Process.ApparmorProfile != ps.AppArmorProfile {
			t.Errorf("%+v: AppArmor profile %q", ps, s.Process.ApparmorProfile)
		}
	}
}
