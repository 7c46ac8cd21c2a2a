package advisor

import (
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestSmallFilesAdvice: a layer of many files gets the smallfiles
// workload's layer-versus-volume figures, in percent and in seconds for
// its own count of entries; a layer of few files, or a host without the
// workload's figures, gets none.
func TestSmallFilesAdvice(t *testing.T) {
	ov := []api.LayerOverhead{
		{Workload: measure.SeqWrite, Metric: measure.MetricBandwidth, Slowdown: 0.1, VolumeWriteBytesPerSecond: 1e8, VolumeOpsPerSecond: 100},
		{Workload: measure.SmallFiles, Metric: measure.MetricIOPS, Slowdown: 0.5, SlowdownLow: 0.25, SlowdownHigh: 1,
			Rounds: 12, Coverage: 0.95, VolumeWriteBytesPerSecond: 1e7, VolumeOpsPerSecond: 10000},
	}
	c := &api.Container{Name: "ci", Layer: api.LayerWrites{Entries: 20000,
		TopPaths: []api.PathBytes{{Path: "/app/node_modules", Bytes: 80 << 20}}}}
	adv, ok := smallFilesAdvice(c, ov)
	if !ok || adv.Kind != AdviceSmallFiles || adv.Path != "/app/node_modules" {
		t.Fatalf("advice %+v, %v", adv, ok)
	}
	// 20000 entries at 10000 operations a second on the volume: 2 s, and
	// half as long again in the layer.
	for _, want := range []string{"20000 files and directories", "+50% [+25% to +100%]", "+1.00 s [+500 ms to +2.00 s]", "10000 operations per second", "mount one at /app/node_modules"} {
		if !strings.Contains(adv.Message, want) {
			t.Errorf("advice %q lacks %q", adv.Message, want)
		}
	}
	few := &api.Container{Layer: api.LayerWrites{Entries: ManyFiles - 1}}
	if _, ok := smallFilesAdvice(few, ov); ok {
		t.Error("a layer of few files got the small-file advice")
	}
	if _, ok := smallFilesAdvice(c, ov[:1]); ok {
		t.Error("advice without the smallfiles figures")
	}
}
