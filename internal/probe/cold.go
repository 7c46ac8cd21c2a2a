package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/helper"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// ColdRun is what RunCold measured.
type ColdRun struct {
	Samples []measure.Sample       // the fsync job on host and container
	CopyUp  []measure.CopyUpSample // first writes on host and container
	// CopyUpBytes is what the copy-up part wrote: the host's reference
	// files and the copies the engine made (fio's bytes are in Samples).
	CopyUpBytes int64
	// Reflink is whether the data root's file system shares extents; nil
	// when the check failed.
	Reflink *bool
	// Lookup are the stat walks of the cold image's tree and the first
	// creates in its directories, on host and container.
	Lookup []measure.LookupSample
}

// BytesWritten is everything the cold rounds wrote: the fsync job's
// executions and the copy-up part.
func (r ColdRun) BytesWritten() int64 {
	n := r.CopyUpBytes
	for _, s := range r.Samples {
		n += s.BytesWritten
	}
	return n
}

// coldHostDir holds the host arm's copy-up reference files during RunCold.
const coldHostDir = ".copyup"

// RunCold runs cold rounds first..first+n-1. Each round starts a fresh
// container from the cold image (the probe image plus the copy-up files),
// runs the profile's fsync job in its writable layer at once, times the
// first write to each copy-up file, and removes the container. The host arm
// runs the same fsync job either before the container is created or after
// it is removed, chosen at random per round, so that neither the start's
// nor the removal's I/O falls systematically on one side. Failures are
// data, as in RunRounds; the error is for a cold image that could not be
// prepared, when nothing could be measured.
func (s *Session) RunCold(ctx context.Context, prof fio.Profile, first, n int, rng *rand.Rand, progress func(Progress)) (ColdRun, error) {
	var run ColdRun
	if ok, err := hostfs.Reflink(s.hostDir); err != nil {
		s.logger.Warn("reflink check failed", "dir", s.hostDir, "err", err)
	} else {
		run.Reflink = &ok
	}
	job, ok := fsyncJob(prof)
	if !ok {
		return run, fail("profile", nil, "profile %s has no fsync job", prof.Name)
	}
	if err := s.prepareColdImage(ctx); err != nil {
		return run, err
	}
	hostFiles, written, err := s.hostCopyUpFiles()
	run.CopyUpBytes += written
	defer os.RemoveAll(filepath.Join(s.hostDir, coldHostDir))
	if err != nil {
		return run, fail("scratch", err, "create the copy-up reference files: %v", err)
	}
	written, err = s.hostTree()
	run.CopyUpBytes += written
	defer os.RemoveAll(filepath.Join(s.hostDir, coldTreeDir))
	if err != nil {
		return run, fail("scratch", err, "create the host's copy of the cold image's tree: %v", err)
	}

	total, done, start := n*2, 0, time.Now()
	report := func(phase string, r int, target measure.Target) {
		if progress == nil {
			return
		}
		el := time.Since(start)
		var eta time.Duration
		if done > 0 {
			eta = time.Duration(float64(el) / float64(done) * float64(total-done))
		}
		progress(Progress{Engine: s.opts.EngineName, Phase: phase, Round: r - first + 1, Target: target, Workload: job.Workload,
			Done: done, Total: total, HalfWidth: math.NaN(), Elapsed: el, ETA: eta})
	}
	step := func(r int, target measure.Target) {
		report("cold", r, target)
		done++
	}
	for r := first; r < first+n && ctx.Err() == nil; r++ {
		hostFirst := rng.IntN(2) == 0
		order := 1
		if hostFirst {
			step(r, measure.TargetHost)
			run.Samples = append(run.Samples, s.runJob(ctx, nil, r, order, measure.TargetHost, job, fio.Fresh, 0))
			order++
		}
		step(r, measure.TargetContainer)
		cs, cu, lu, bytes := s.coldContainerRound(ctx, r, order, job, hostFiles, rng)
		run.Samples = append(run.Samples, cs)
		run.CopyUp = append(run.CopyUp, cu...)
		run.Lookup = append(run.Lookup, lu...)
		run.CopyUpBytes += bytes
		order++
		if !hostFirst && ctx.Err() == nil {
			step(r, measure.TargetHost)
			run.Samples = append(run.Samples, s.runJob(ctx, nil, r, order, measure.TargetHost, job, fio.Fresh, 0))
		}
	}
	report("done", first+n-1, "")
	return run, nil
}

func fsyncJob(prof fio.Profile) (fio.Job, bool) {
	for _, j := range prof.Jobs {
		if j.Workload == measure.Fsync {
			return j, true
		}
	}
	return fio.Job{}, false
}

// prepareColdImage imports the cold image once per session. A user-named
// probe image is used as it is: it has no copy-up files, so the copy-up
// samples record that they are missing.
func (s *Session) prepareColdImage(ctx context.Context) error {
	if s.coldRef != "" {
		return nil
	}
	if s.image == nil {
		s.coldRef = s.imageRef
		return nil
	}
	ref, err := s.eng.EnsureImage(ctx, s.image.WithCopyUpFiles(), s.owner)
	if err != nil {
		return fail("image", err, "import the cold probe image: %v", err)
	}
	s.coldRef = ref
	return nil
}

// hostCopyUpFiles writes the host arm's reference files, one per copy-up
// size, with content like the image's and synced, so the timed write on the
// host pays for one page and not for earlier dirty data.
func (s *Session) hostCopyUpFiles() (map[int64]string, int64, error) {
	dir := filepath.Join(s.hostDir, coldHostDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, err
	}
	files := map[int64]string{}
	var written int64
	for _, size := range probeimage.CopyUpSizes {
		p := filepath.Join(dir, filepath.Base(probeimage.CopyUpPath(size)))
		n, err := writeSynced(p, size)
		written += n
		if err != nil {
			return nil, written, err
		}
		files[size] = p
	}
	return files, written, nil
}

func writeSynced(path string, size int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	var seed [32]byte
	copy(seed[:], path)
	n, err := io.Copy(f, io.LimitReader(rand.NewChaCha8(seed), size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// coldContainerRound starts a fresh container, runs the fsync job in its
// writable layer, times the copy-ups and removes the container.
func (s *Session) coldContainerRound(ctx context.Context, round, order int, job fio.Job, hostFiles map[int64]string, rng *rand.Rand) (measure.Sample, []measure.CopyUpSample, []measure.LookupSample, int64) {
	started := time.Now()
	spec := engine.ProbeSpec{Engine: s.opts.EngineName, Image: s.coldRef, Owner: s.owner,
		Mode: measure.ModeCold, WritableLayerOnly: true, Rootless: s.Info.Rootless}
	if s.opts.DeviceWriteIOPS > 0 {
		if dev, err := hostfs.DeviceOf(s.Info.DataRoot); err == nil {
			spec.DeviceWriteIOPS, spec.DevicePath = s.opts.DeviceWriteIOPS, dev
		}
	}
	sizes := append([]int64(nil), probeimage.CopyUpSizes...)
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })

	p, err := s.eng.StartProbe(ctx, spec)
	if err != nil {
		f := &measure.Failure{Reason: measure.ReasonExec, Message: "start a fresh probe container: " + err.Error()}
		sample := measure.Sample{Round: round, Order: order, Target: measure.TargetContainer, StartedAt: started.UTC(),
			DurationSeconds: time.Since(started).Seconds(), JobResult: measure.JobResult{Workload: job.Workload, Failure: f}}
		var cu []measure.CopyUpSample
		for _, size := range sizes {
			cu = append(cu, measure.CopyUpSample{Round: round, Target: measure.TargetContainer, SizeBytes: size, Error: f.Message})
		}
		s.logger.Warn("cold round: fresh container did not start", "round", round, "err", err)
		return sample, cu, nil, 0
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := s.eng.RemoveProbe(rctx, p); err != nil {
			s.logger.Error("remove cold probe container", "container", p.Name, "err", err)
		}
	}()
	// The sample's clock starts at container creation: the cold penalty
	// includes whatever the start itself costs the first writes.
	sample := s.runJob(ctx, p, round, order, measure.TargetContainer, job, fio.Fresh, 0)
	sample.StartedAt = started.UTC()
	sample.DurationSeconds = time.Since(started).Seconds()
	if ctx.Err() != nil {
		return sample, nil, nil, 0
	}

	paths := make([]string, len(sizes))
	for i, size := range sizes {
		paths[i] = probeimage.CopyUpPath(size)
	}
	cu, copied := s.containerCopyUp(ctx, p, round, sizes, paths)
	// The host arm right after, in the same order, while the container's
	// copies are still being written back the same way they would be for
	// an application.
	for _, size := range sizes {
		hs := measure.CopyUpSample{Round: round, Target: measure.TargetHost, SizeBytes: size}
		if d, err := helper.FirstWrite(hostFiles[size]); err != nil {
			hs.Error = err.Error()
		} else {
			hs.Seconds = d.Seconds()
			copied += helper.FirstWriteBytes
		}
		cu = append(cu, hs)
	}
	if ctx.Err() != nil {
		return sample, cu, nil, copied
	}
	return sample, cu, s.coldLookup(ctx, p, round, rng), copied
}

// containerCopyUp runs the helper's copyup verb in the fresh container and
// turns its JSON lines into samples; a file the helper did not report is a
// failed sample.
func (s *Session) containerCopyUp(ctx context.Context, p *engine.Probe, round int, sizes []int64, paths []string) ([]measure.CopyUpSample, int64) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	argv := append([]string{engine.ContainerHelper, "probe-helper", "copyup"}, paths...)
	res, err := s.eng.Exec(cctx, p, argv)
	lines := map[string]helper.CopyUpLine{}
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
		for sc.Scan() {
			var l helper.CopyUpLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines[l.Path] = l
			}
		}
	}
	var out []measure.CopyUpSample
	var copied int64
	for i, size := range sizes {
		cs := measure.CopyUpSample{Round: round, Target: measure.TargetContainer, SizeBytes: size}
		l, ok := lines[paths[i]]
		switch {
		case err != nil:
			cs.Error = "copy-up helper: " + err.Error()
		case !ok:
			cs.Error = fmt.Sprintf("copy-up helper reported nothing for %s (exit %d): %s", paths[i], res.ExitCode, trim(res.Stderr))
		case l.Error != "":
			cs.Error = l.Error
		case l.Seconds <= 0:
			cs.Error = "copy-up helper reported no time"
		default:
			cs.Seconds = l.Seconds
			copied += size
		}
		out = append(out, cs)
	}
	return out, copied
}
