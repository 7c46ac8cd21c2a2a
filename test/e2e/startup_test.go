package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testdaemon"
)

// TestStartupCostGrowsWithTheImageOnlyOnVfs: `run --mode cold` times
// container start-up from images of 10 and 100 MiB of files and counts
// the bytes each start writes to the data root's device. vfs copies the
// image for every container (twice: the init layer and the container's
// layer), so a start writes about two bytes per byte of image; overlay2 stacks the image's layer and writes about nothing more
// for a larger image. The data roots are on the root file system (ext4):
// on xfs, vfs's copy clones extents (reflink) and writes as little as
// overlay2 (0.6 MiB per start from either image here). The device is
// shared with whatever else the machine writes, so the assertion is on
// the Theil-Sen slope over three starts per image, which a neighbour's
// burst in one window does not move, and on bytes, not time: a start's
// time on a loaded machine varies by more than a copy of 90 MiB takes.
func TestStartupCostGrowsWithTheImageOnlyOnVfs(t *testing.T) {
	t.Parallel() // its own private engines: runs beside the other parallel tests, after the sequential ones
	slopes := map[string]float64{}
	for _, driver := range []string{"overlay2", "vfs"} {
		t.Run(driver, func(t *testing.T) {
			d := testdaemon.Start(t, testdaemon.Options{Driver: driver})
			res := layerprobe(t, d.Host, 10*time.Minute, "run", "--mode", "cold", "--output", "json", "--profile", "smoke",
				"--rounds", "3", "--startup-images", "10MiB,100MiB", "--max-bytes", "8GiB", "--log.level", "warn")
			if res.code != 0 {
				t.Fatalf("layerprobe run --mode cold exited %d\nstderr:\n%s", res.code, res.stderr)
			}
			var run report.Run
			if err := json.Unmarshal([]byte(res.stdout), &run); err != nil {
				t.Fatalf("decode output: %v\n%s", err, res.stdout)
			}
			e := run.Engines[0]
			if e.Error != nil || e.Driver != driver || e.Cold == nil || e.Cold.Startup == nil {
				t.Fatalf("engine %s: error %+v, cold %v, warnings %v", e.Driver, e.Error, e.Cold != nil, e.Warnings)
			}
			st := e.Cold.Startup
			for _, s := range st.Samples {
				if !s.OK() {
					t.Errorf("round %d, %d MiB image: %s", s.Round, s.ImageBytes>>20, s.Error)
				}
			}
			if len(st.Sizes) != 2 || st.Sizes[0].ImageBytes != 10<<20 || st.Sizes[1].ImageBytes != 100<<20 ||
				st.Sizes[0].Rounds != 3 || st.Sizes[1].Rounds != 3 || st.BytesPerImageByte == nil || st.SecondsPerMiB == nil {
				t.Fatalf("start-up summary %+v", st)
			}
			for _, sz := range st.Sizes {
				if !(sz.Seconds > 0) {
					t.Errorf("%d MiB image: start-up %v s", sz.ImageBytes>>20, sz.Seconds)
				}
			}
			slopes[driver] = *st.BytesPerImageByte
			t.Logf("%s on %s: start-up %.3f s (10 MiB), %.3f s (100 MiB), %.1f / %.1f MiB written per start; slope %.2f bytes per image byte, %.4f s per MiB",
				driver, st.Device, st.Sizes[0].Seconds, st.Sizes[1].Seconds, st.Sizes[0].DeviceBytes/(1<<20), st.Sizes[1].DeviceBytes/(1<<20),
				*st.BytesPerImageByte, *st.SecondsPerMiB)
			if run.Mode != measure.ModeCold {
				t.Errorf("mode %q", run.Mode)
			}
		})
	}
	// vfs writes its two copies of the image, about 180 MiB more for the
	// larger one (here 300 and 490 MiB per start); overlay2 writes the container's own few layer entries whatever
	// the image.
	ov, vfs := slopes["overlay2"], slopes["vfs"]
	if !(vfs > 0.6) || !(ov < 0.3) {
		t.Errorf("bytes written per byte of image: vfs %.2f (want > 0.6), overlay2 %.2f (want < 0.3)", vfs, ov)
	}
}
