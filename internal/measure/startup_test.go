package measure

import (
	"math"
	"testing"
)

// TestSummarizeStartup: a driver that copies the image for each start
// reads a bytes slope near 1 whatever one noisy start says; one that does
// not reads near 0; failed starts are left out.
func TestSummarizeStartup(t *testing.T) {
	var copying, stacking []StartupSample
	for r := 1; r <= 3; r++ {
		for _, size := range []int64{10 << 20, 100 << 20} {
			copying = append(copying, StartupSample{Round: r, ImageBytes: size, Seconds: 0.5 + float64(size)/(200<<20), DeviceBytes: size + 40<<20})
			stacking = append(stacking, StartupSample{Round: r, ImageBytes: size, Seconds: 0.5, DeviceBytes: 2 << 20})
		}
	}
	copying[0].DeviceBytes = 900 << 20 // a neighbour's burst
	stacking = append(stacking, StartupSample{Round: 4, ImageBytes: 100 << 20, Error: "start failed"})
	sizes, sec, bpb := SummarizeStartup(copying)
	if len(sizes) != 2 || sizes[0].ImageBytes != 10<<20 || sizes[1].Rounds != 3 || bpb == nil || math.Abs(*bpb-1) > 0.01 ||
		sec == nil || math.Abs(*sec-1.0/200) > 1e-6 {
		t.Errorf("copying: sizes %+v, s/MiB %v, bytes/byte %v", sizes, sec, bpb)
	}
	sizes, _, bpb = SummarizeStartup(stacking)
	if len(sizes) != 2 || sizes[1].Rounds != 3 || bpb == nil || math.Abs(*bpb) > 0.01 {
		t.Errorf("stacking: sizes %+v, bytes/byte %v", sizes, bpb)
	}
	if sizes, sec, bpb := SummarizeStartup(copying[:1]); len(sizes) != 1 || sec != nil || bpb != nil {
		t.Errorf("one size: %+v %v %v", sizes, sec, bpb)
	}
}
