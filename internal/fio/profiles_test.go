package fio

import (
	"slices"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

func TestProfileOnly(t *testing.T) {
	p, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	all, err := p.Only(nil)
	if err != nil || len(all.Jobs) != len(p.Jobs) {
		t.Fatalf("Only(nil): %d jobs, %v; want all %d", len(all.Jobs), err, len(p.Jobs))
	}
	// The profile's order, whatever the list's; the jobs' options unchanged.
	got, err := p.Only([]measure.Workload{measure.SmallFiles, measure.Fsync})
	if err != nil {
		t.Fatal(err)
	}
	if names := got.WorkloadNames(); !slices.Equal(names, []string{"fsync", "smallfiles"}) {
		t.Errorf("Only(smallfiles, fsync) = %v, want [fsync smallfiles]", names)
	}
	i := slices.IndexFunc(p.Jobs, func(j Job) bool { return j.Workload == measure.Fsync })
	if !slices.Equal(got.Jobs[0].Options, p.Jobs[i].Options) || got.Jobs[0].Runtime != p.Jobs[i].Runtime {
		t.Errorf("fsync job changed: %+v, want %+v", got.Jobs[0], p.Jobs[i])
	}
	if len(p.Jobs) != 4 {
		t.Errorf("Only changed the profile it was called on: %d jobs", len(p.Jobs))
	}

	seed, _ := LookupProfile("seed")
	if _, err := seed.Only([]measure.Workload{measure.SmallFiles}); err == nil ||
		!strings.Contains(err.Error(), `"seed" has no workload "smallfiles", want one of seqwrite, randwrite, fsync`) {
		t.Errorf("seed without smallfiles: err = %v", err)
	}
}
