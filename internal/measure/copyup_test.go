package measure_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

func TestSummarizeCopyUp(t *testing.T) {
	const mib = 1 << 20
	var samples []measure.CopyUpSample
	// Container latency grows 2 ms per MiB over a host that stays at 1 ms;
	// round 3's container failed for the 16 MiB file and round 2's host
	// for the 64 MiB file: those pairs must be dropped, not zeroed.
	for r := 1; r <= 6; r++ {
		for _, size := range []int64{1 * mib, 16 * mib, 64 * mib} {
			h := measure.CopyUpSample{Round: r, Target: measure.TargetHost, SizeBytes: size, Seconds: 0.001}
			c := measure.CopyUpSample{Round: r, Target: measure.TargetContainer, SizeBytes: size,
				Seconds: 0.001 + 0.002*float64(size/mib) + 0.0001*float64(r)}
			if r == 3 && size == 16*mib {
				c = measure.CopyUpSample{Round: r, Target: measure.TargetContainer, SizeBytes: size, Error: "open: permission denied"}
			}
			if r == 2 && size == 64*mib {
				h.Seconds, h.Error = 0, "fsync: input/output error"
			}
			samples = append(samples, h, c)
		}
	}
	sizes, cost := measure.SummarizeCopyUp(samples, 0.95)
	if len(sizes) != 3 {
		t.Fatalf("%d sizes, want 3: %+v", len(sizes), sizes)
	}
	wantRounds := map[int64]int{1 * mib: 6, 16 * mib: 5, 64 * mib: 5}
	for i, s := range sizes {
		if i > 0 && s.SizeBytes <= sizes[i-1].SizeBytes {
			t.Errorf("sizes not in ascending order: %+v", sizes)
		}
		if s.Rounds != wantRounds[s.SizeBytes] {
			t.Errorf("size %d: %d rounds, want %d", s.SizeBytes, s.Rounds, wantRounds[s.SizeBytes])
		}
		want := 0.002 * float64(s.SizeBytes/mib)
		if math.Abs(s.ExtraSeconds-want) > 0.0005 || s.ExtraCILow > s.ExtraSeconds || s.ExtraCIHigh < s.ExtraSeconds {
			t.Errorf("size %d: extra %v [%v, %v], want about %v inside its interval", s.SizeBytes, s.ExtraSeconds, s.ExtraCILow, s.ExtraCIHigh, want)
		}
		if s.HostSeconds != 0.001 {
			t.Errorf("size %d: host median %v, want 0.001", s.SizeBytes, s.HostSeconds)
		}
	}
	if cost == nil || math.Abs(*cost-0.002) > 0.0001 {
		t.Errorf("cost per MiB = %v, want about 0.002", cost)
	}

	one, cost := measure.SummarizeCopyUp(samples[:2], 0.95)
	if len(one) != 1 || cost != nil {
		t.Errorf("one size: %d sizes, cost %v; want 1 size and no cost (a slope needs two sizes)", len(one), cost)
	}
	if none, cost := measure.SummarizeCopyUp(nil, 0.95); len(none) != 0 || cost != nil {
		t.Errorf("no samples: %v, %v", none, cost)
	}
}

// TestColdRecordsListEmpty: the copy-up and lookup records say [] for a
// measurement without figures, never null: the run report's and the
// API's documents are built by the same constructors.
func TestColdRecordsListEmpty(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  any
		want string
	}{
		{"copy-up of no samples", measure.NewCopyUp(nil, nil, 0.95), `{"reflink":null,"cost_seconds_per_mib":null,"sizes":[],"samples":[]}`},
		{"a window's copy-up", measure.CopyUpOf(nil, nil, nil, nil), `{"reflink":null,"cost_seconds_per_mib":null,"sizes":[],"samples":[]}`},
		{"lookup of no samples", measure.NewLookup(nil, 0.95), `{"summaries":[],"samples":[]}`},
		{"a window's lookup", measure.LookupOf(nil, nil), `{"summaries":[],"samples":[]}`},
	} {
		b, err := json.Marshal(c.rec)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, b, err, c.want)
		}
	}
}
