package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// An engine in a VM: above the results the table says every ratio is
// against the native host disk and names the share; differing fio builds
// are said on the fio line; a host arm that cannot join is not shouted
// about. A host engine's table has none of it.
func TestWriteTableTopologyVM(t *testing.T) {
	r := tableRun()
	r.Engines[0].TopologyFacts = measure.TopologyFacts{Topology: "vm", VM: "lima", Share: "9p", Baseline: "native host disk", HostFioVersion: "fio-3.38"}
	r.Engines[0].HostArmCgroup = "not_applicable"
	var buf bytes.Buffer
	if err := WriteTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"topology:     vm: the engine runs in lima's VM", "against the NATIVE HOST DISK", "through the VM's 9p share",
		"in the probe image, fio-3.38 on the host: the arms run different fio builds"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "NATIVE HOST DISK") > strings.Index(out, "TARGET") {
		t.Errorf("the topology line comes after the table:\n%s", out)
	}
	if strings.Contains(out, "HOST ARM NOT IN") {
		t.Errorf("a VM's host arm, which cannot join by design, is reported as a failure:\n%s", out)
	}

	buf.Reset()
	if err := WriteTable(&buf, tableRun()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "topology:") {
		t.Errorf("a host engine's table has a topology line:\n%s", buf.String())
	}
}
