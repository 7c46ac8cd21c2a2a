package probe

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// DefaultStartupSizes are the files, beyond the probe image's own, that
// the images of a start-up measurement carry: 10 and 100 MiB. A 500 MiB
// image told nothing more: start-up is flat in the size on every driver
// but vfs, whose growth the two show (docs/benchmarks.md §7).
var DefaultStartupSizes = []int64{10 << 20, 100 << 20}

// StartupRun is what RunStartup measured.
type StartupRun struct {
	Startup measure.Startup
	// BytesWritten is what the data root's device wrote during the
	// measurement: the images' imports and every start, as the device
	// counted them.
	BytesWritten int64
	// BudgetSkipped: an import or a start was skipped because the byte
	// budget could not hold it.
	BudgetSkipped bool
}

// RunStartup measures what starting a container costs: in each of n
// rounds, one container from each image (the probe image plus sizes
// bytes of files), in a random order, is created, started, exec'd into
// once and removed, timed, with the bytes the data root's device wrote
// meanwhile. The images are imported first. maxBytes (0: none) bounds what
// the measurement writes: an import or a start whose estimate would not
// fit is skipped and recorded so. The error is for a measurement that
// could not start at all (a user-named probe image, which cannot be
// extended; a data root on no block device).
func (s *Session) RunStartup(ctx context.Context, sizes []int64, n int, maxBytes int64, rng *rand.Rand) (StartupRun, error) {
	var run StartupRun
	if s.image == nil {
		return run, fail("image", nil, "start-up cost needs the probe image layerprobe builds; a user-named probe image (%s) cannot carry the start-up files", s.imageRef)
	}
	dev, err := hostfs.DeviceOf(s.Info.DataRoot)
	if err != nil {
		return run, fail("startup", err, "start-up cost counts the bytes the data root's device writes: %v", err)
	}
	run.Startup.Device = dev
	sizes = slices.Sorted(slices.Values(sizes))
	fits := func(est int64) bool { return maxBytes <= 0 || run.BytesWritten+est <= maxBytes }
	skipped := func(r int, size int64, why string) {
		run.Startup.Samples = append(run.Startup.Samples, measure.StartupSample{Round: r, ImageBytes: size, Error: why})
	}

	refs := map[int64]string{}
	noImage := map[int64]string{} // why a size has no image
	for _, size := range sizes {
		if ctx.Err() != nil {
			break
		}
		im := s.image.WithStartupFiles(size)
		// An import writes the image's layer and unpacks it: about twice
		// its size.
		if !fits(2 * im.Size()) {
			s.logger.Warn("start-up image skipped: the byte budget", "image_bytes", size)
			noImage[size] = "skipped: the byte budget left no room to import its image"
			run.BudgetSkipped = true
			continue
		}
		var ref string
		written, err := s.deviceBytes(dev, func() error {
			var err error
			ref, err = s.eng.EnsureImage(ctx, im, s.owner)
			return err
		})
		run.BytesWritten += written
		if err != nil {
			s.logger.Warn("start-up image could not be imported", "image_bytes", size, "err", err)
			skipped(0, size, "import the start-up image: "+err.Error())
			noImage[size] = "no start-up image (its import failed)"
			continue
		}
		refs[size] = ref
	}

	last := map[int64]int64{} // bytes of the size's last start: the next one's estimate
	for r := 1; r <= n && ctx.Err() == nil; r++ {
		order := slices.Clone(sizes)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, size := range order {
			if ctx.Err() != nil {
				break
			}
			ref, ok := refs[size]
			if !ok {
				skipped(r, size, cmp.Or(noImage[size], "no start-up image"))
				continue
			}
			est, seen := last[size]
			if !seen {
				est = size + 32<<20 // the worst case: a driver that copies the image
			}
			if !fits(est) {
				skipped(r, size, "skipped: the byte budget")
				run.BudgetSkipped = true
				continue
			}
			sm := s.startOnce(ctx, dev, ref, r, size)
			run.BytesWritten += sm.DeviceBytes
			if sm.OK() {
				last[size] = sm.DeviceBytes
			} else {
				s.logger.Warn("start-up round failed", "round", r, "image_bytes", size, "err", sm.Error)
			}
			run.Startup.Samples = append(run.Startup.Samples, sm)
		}
	}
	run.Startup.Sizes, run.Startup.SecondsPerMiB, run.Startup.BytesPerImageByte = measure.SummarizeStartup(run.Startup.Samples)
	if run.Startup.Sizes == nil {
		run.Startup.Sizes = []measure.StartupSize{}
	}
	return run, nil
}

// startOnce creates and starts a container from ref, runs a first exec in
// it and removes it. The time is the create, start and exec plus the
// remove; the file system is synced before the remove (untimed), so that
// the device counts what the start wrote even on a driver whose remove
// would free it before writeback.
func (s *Session) startOnce(ctx context.Context, dev, ref string, round int, size int64) measure.StartupSample {
	sm := measure.StartupSample{Round: round, ImageBytes: size}
	spec := engine.ProbeSpec{Engine: s.opts.EngineName, Image: ref, Owner: s.owner,
		Mode: measure.ModeCold, WritableLayerOnly: true, Rootless: s.Info.Rootless}
	var elapsed time.Duration
	written, err := s.deviceBytes(dev, func() error {
		start := time.Now()
		p, err := s.eng.StartProbe(ctx, spec)
		if err != nil {
			return fmt.Errorf("create and start: %w", err)
		}
		res, err := s.eng.Exec(ctx, p, []string{engine.ContainerFio, "--version"})
		elapsed = time.Since(start)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, trim(res.Stderr))
		}
		s.syncDataRoot()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		removeStart := time.Now()
		rerr := s.eng.RemoveProbe(rctx, p)
		elapsed += time.Since(removeStart)
		if err != nil {
			return fmt.Errorf("first exec: %w", err)
		}
		if rerr != nil {
			return fmt.Errorf("remove: %w", rerr)
		}
		return nil
	})
	sm.DeviceBytes = written
	if err != nil {
		sm.Error = err.Error()
		return sm
	}
	sm.Seconds = elapsed.Seconds()
	return sm
}

// deviceBytes runs f between two syncs of the data root's file system and
// returns what the device wrote from the first to the second: the
// first flushes what others left dirty, the second what f did.
func (s *Session) deviceBytes(dev string, f func() error) (int64, error) {
	s.syncDataRoot()
	before, berr := hostfs.WrittenBytes(dev)
	err := f()
	s.syncDataRoot()
	after, aerr := hostfs.WrittenBytes(dev)
	if berr != nil || aerr != nil {
		return 0, fmt.Errorf("count the device's writes: %w", cmpErr(berr, aerr))
	}
	return max(after-before, 0), err
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
