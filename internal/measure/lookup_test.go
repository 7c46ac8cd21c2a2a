package measure

import (
	"math"
	"testing"
)

// TestSummarizeLookup: rounds pair host and container per operation; a
// round's creates count as their median; failed samples and unpaired
// rounds are left out.
func TestSummarizeLookup(t *testing.T) {
	var ss []LookupSample
	for r := 1; r <= 6; r++ {
		ss = append(ss,
			LookupSample{Round: r, Target: TargetHost, Op: LookupWalk, Entries: 2401, Seconds: 0.010},
			LookupSample{Round: r, Target: TargetContainer, Op: LookupWalk, Entries: 2401, Seconds: 0.030 + 0.001*float64(r)},
			LookupSample{Round: r, Target: TargetHost, Op: LookupDirCreate, Depth: 5, Seconds: 0.0001},
			LookupSample{Round: r, Target: TargetContainer, Op: LookupDirCreate, Depth: 5, Seconds: 0.0009},
			LookupSample{Round: r, Target: TargetContainer, Op: LookupDirCreate, Depth: 6, Seconds: 0.0011},
			LookupSample{Round: r, Target: TargetContainer, Op: LookupDirCreate, Depth: 6, Seconds: 0.5}, // one slow create: the median holds
		)
	}
	ss = append(ss, LookupSample{Round: 7, Target: TargetContainer, Op: LookupWalk, Seconds: 9}, // no host: unpaired
		LookupSample{Round: 1, Target: TargetHost, Op: LookupWalk, Error: "walk failed"})
	got := SummarizeLookup(ss, 0.95)
	if len(got) != 2 || got[0].Op != LookupWalk || got[1].Op != LookupDirCreate {
		t.Fatalf("summaries %+v", got)
	}
	if w := got[0]; w.Rounds != 6 || math.Abs(w.ExtraSeconds-0.0235) > 1e-9 || !(w.ExtraCILow <= w.ExtraSeconds && w.ExtraSeconds <= w.ExtraCIHigh) {
		t.Errorf("walk %+v", w)
	}
	if c := got[1]; c.Rounds != 6 || math.Abs(c.ContainerSeconds-0.0011) > 1e-12 || math.Abs(c.ExtraSeconds-0.001) > 1e-12 {
		t.Errorf("dir_create %+v", c)
	}
}
