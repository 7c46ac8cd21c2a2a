package probe

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// TestRunColdTimesLookups: every cold round walks the tree and creates a
// first file in a directory of each depth, in the fresh container (the
// fake's figures) and in the host's copy of the tree (real ones), and
// the host's tree is gone afterwards.
func TestRunColdTimesLookups(t *testing.T) {
	s, eng := prepare(t, testOptions(t))
	eng.SetSlowdown(measure.TargetContainer, 3)
	const rounds = 3
	run, err := s.RunCold(context.Background(), smoke(t), 1, rounds, rand.New(rand.NewPCG(5, 6)), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := len(createDirs())
	if dirs < 4 {
		t.Fatalf("creates in %d depths, want the tree's 4 or more", dirs)
	}
	count := map[measure.Target]map[string]int{measure.TargetHost: {}, measure.TargetContainer: {}}
	for _, l := range run.Lookup {
		if !l.OK() {
			t.Errorf("round %d %s %s: %s", l.Round, l.Target, l.Op, l.Error)
		}
		if l.Target == measure.TargetHost && l.Op == measure.LookupWalk && l.Entries != 2400 {
			t.Errorf("host walk stat'ed %d entries, want the tree's 2400 (its root, 399 directories, 2000 files)", l.Entries)
		}
		count[l.Target][l.Op]++
	}
	for _, tg := range []measure.Target{measure.TargetHost, measure.TargetContainer} {
		if count[tg][measure.LookupWalk] != rounds || count[tg][measure.LookupDirCreate] != rounds*dirs {
			t.Errorf("%s: %v, want %d walks and %d creates", tg, count[tg], rounds, rounds*dirs)
		}
	}
	sums := measure.SummarizeLookup(run.Lookup, measure.DefaultConfidence)
	if len(sums) != 2 || sums[0].Rounds != rounds {
		t.Errorf("summaries %+v", sums)
	}
	if _, err := os.Stat(filepath.Join(s.hostDir, coldTreeDir)); !os.IsNotExist(err) {
		t.Errorf("the host's tree is left: %v", err)
	}
}

// TestRunStartupSaysTheBudgetSkippedIt: with no room in the byte budget,
// no start-up image is imported, every round's sample says that the
// budget skipped it (not that an import failed), and the run says so.
func TestRunStartupSaysTheBudgetSkippedIt(t *testing.T) {
	s, _ := prepare(t, testOptions(t))
	// The image layerprobe builds (the fake engine's session names one):
	// start-up images extend it.
	s.image = &probeimage.Image{Digest: strings.Repeat("ab", 32)}
	run, err := s.RunStartup(context.Background(), []int64{10 << 20}, 2, 1, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if !run.BudgetSkipped || len(run.Startup.Sizes) != 0 || len(run.Startup.Samples) != 2 {
		t.Fatalf("budget skipped %v, sizes %+v, samples %+v", run.BudgetSkipped, run.Startup.Sizes, run.Startup.Samples)
	}
	for _, sm := range run.Startup.Samples {
		if !strings.Contains(sm.Error, "byte budget") {
			t.Errorf("round %d: %q, want the byte budget named", sm.Round, sm.Error)
		}
	}
}
