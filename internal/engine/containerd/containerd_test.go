package containerd

import (
	"testing"

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
