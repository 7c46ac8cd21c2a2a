package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// TestStartupCostGrowsWithTheImageOnlyOnVfs: `run --mode cold` times
// container start-up from images of 10 and 100 MiB of files and counts
// the bytes each start writes to the data root's device. vfs copies the
// image for every container (twice: the init layer and the container's
// layer), so a start writes about two bytes per byte of image; overlay2 stacks the image's layer and writes about nothing more
// for a larger image. The data roots are on ext4, each on a loop device
// of its own: on xfs, vfs's copy clones extents (reflink) and writes as
// little as overlay2 (0.6 MiB per start from either image here). The device was
// shared with whatever else the machine writes, so the assertion is on
// the Theil-Sen slope over three starts per image, which a neighbour's
// burst in one window does not move, and on bytes, not time: a start's
// time on a loaded machine varies by more than a copy of 90 MiB takes.
func TestStartupCostGrowsWithTheImageOnlyOnVfs(t *testing.T) {
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
	slopes := map[string]float64{}
	for _, driver := range []string{"overlay2", "vfs"} {
		t.Run(driver, func(t *testing.T) {
			// ext4 on a loop device of its own (in RAM): the device's
			// writes are this daemon's alone, whatever the other tests
			// write to the disk meanwhile (on the shared root device,
			// overlay2's slope once read 0.59 under the suite's load).
			d := testdaemon.Start(t, testdaemon.Options{Driver: driver, Backing: testdaemon.BackingRAM, SizeMiB: 4096})
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
			checkLookup(t, driver, e.Cold.Lookup, 3)
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

// checkLookup: every cold round timed the walk of the image's tree and a
// first create in a directory of each depth on host and container, and
// both operations have a summary over every round.
func checkLookup(t *testing.T, name string, l *measure.Lookup, rounds int) {
	t.Helper()
	if l == nil {
		t.Error("no lookup section in the cold output")
		return
	}
	for _, s := range l.Samples {
		if !s.OK() {
			t.Errorf("round %d %s %s (depth %d): %s", s.Round, s.Target, s.Op, s.Depth, s.Error)
		}
		if s.Op == measure.LookupWalk && s.OK() && s.Entries != 2400 {
			t.Errorf("round %d %s walk stat'ed %d entries, want the tree's 2400", s.Round, s.Target, s.Entries)
		}
	}
	if len(l.Summaries) != 2 || l.Summaries[0].Rounds != rounds || l.Summaries[1].Rounds != rounds {
		t.Errorf("lookup summaries %+v, want walk and dir_create over %d rounds", l.Summaries, rounds)
		return
	}
	w, c := l.Summaries[0], l.Summaries[1]
	t.Logf("%s lookups: walk host %.2f ms, container %.2f ms (extra %.2f [%.2f, %.2f] ms); first create host %.3f ms, container %.3f ms (extra %.3f [%.3f, %.3f] ms)",
		name, 1e3*w.HostSeconds, 1e3*w.ContainerSeconds, 1e3*w.ExtraSeconds, 1e3*w.ExtraCILow, 1e3*w.ExtraCIHigh,
		1e3*c.HostSeconds, 1e3*c.ContainerSeconds, 1e3*c.ExtraSeconds, 1e3*c.ExtraCILow, 1e3*c.ExtraCIHigh)
}
