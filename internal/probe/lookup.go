package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/helper"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

// coldTreeDir holds the host's copy of the cold image's tree during
// RunCold.
const coldTreeDir = ".tree"

// createDirs are the tree's directories a cold round creates a first file
// in: the first of each depth, so that a directory copy-up of every
// length of ancestor chain is timed.
func createDirs() []string {
	tree := smallfiles.NewTree(smallfiles.Spec{Files: probeimage.TreeFiles})
	seen := map[int]bool{}
	var out []string
	for _, d := range tree.Dirs[1:] {
		depth := strings.Count(d, "/") + 1
		if !seen[depth] {
			seen[depth] = true
			out = append(out, d)
		}
	}
	return out
}

// hostTree writes the host's copy of the cold image's tree (same
// directories, same file sizes) and syncs it, and returns what it wrote.
func (s *Session) hostTree() (int64, error) {
	root := filepath.Join(s.hostDir, coldTreeDir)
	if err := os.RemoveAll(root); err != nil {
		return 0, err
	}
	tree := smallfiles.NewTree(smallfiles.Spec{Files: probeimage.TreeFiles})
	for _, d := range tree.Dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return 0, err
		}
	}
	var written int64
	buf := make([]byte, smallfiles.MaxFileBytes)
	rand.NewChaCha8([32]byte{'l', 'p'}).Read(buf)
	for i, size := range tree.Sizes {
		if err := os.WriteFile(filepath.Join(root, tree.FilePath(i)), buf[:size], 0o644); err != nil {
			return written, err
		}
		written += int64(size)
	}
	// One sync for the tree, as the image's was written before any
	// container started.
	s.syncDataRoot()
	return written, nil
}

// coldLookup times, in the fresh container p and then on the host, a stat
// walk of the tree and a first create in each of createDirs, in one
// random order for both. A failure is a failed sample.
func (s *Session) coldLookup(ctx context.Context, p *engine.Probe, round int, rng *rand.Rand) []measure.LookupSample {
	dirs := createDirs()
	rng.Shuffle(len(dirs), func(i, j int) { dirs[i], dirs[j] = dirs[j], dirs[i] })
	depth := func(d string) int { return strings.Count(d, "/") + 1 }
	var out []measure.LookupSample

	argv := []string{engine.ContainerHelper, "probe-helper", "lookup"}
	for _, d := range dirs {
		argv = append(argv, path.Join(probeimage.TreeDir, d))
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	res, err := s.eng.Exec(cctx, p, argv)
	cancel()
	var lr helper.LookupResult
	if err == nil {
		if jerr := json.Unmarshal(res.Stdout, &lr); jerr != nil {
			err = fmt.Errorf("lookup helper (exit %d): %s", res.ExitCode, trim(res.Stderr))
		}
	}
	walk := measure.LookupSample{Round: round, Target: measure.TargetContainer, Op: measure.LookupWalk}
	switch {
	case err != nil:
		walk.Error = err.Error()
	case lr.Error != "":
		walk.Error = lr.Error
	default:
		walk.Seconds, walk.Entries = lr.WalkSeconds, lr.Entries
	}
	out = append(out, walk)
	for i, d := range dirs {
		cs := measure.LookupSample{Round: round, Target: measure.TargetContainer, Op: measure.LookupDirCreate, Depth: depth(d)}
		switch {
		case err != nil:
			cs.Error = err.Error()
		case i >= len(lr.Creates):
			cs.Error = "lookup helper reported no create"
		case lr.Creates[i].Error != "":
			cs.Error = lr.Creates[i].Error
		default:
			cs.Seconds = lr.Creates[i].Seconds
		}
		out = append(out, cs)
	}

	root := filepath.Join(s.hostDir, coldTreeDir)
	hw := measure.LookupSample{Round: round, Target: measure.TargetHost, Op: measure.LookupWalk}
	if d, n, err := helper.Walk(root); err != nil {
		hw.Error = err.Error()
	} else {
		hw.Seconds, hw.Entries = d.Seconds(), n
	}
	out = append(out, hw)
	for _, d := range dirs {
		hs := measure.LookupSample{Round: round, Target: measure.TargetHost, Op: measure.LookupDirCreate, Depth: depth(d)}
		if sec, err := helper.FirstCreate(filepath.Join(root, d)); err != nil {
			hs.Error = err.Error()
		} else {
			hs.Seconds = sec.Seconds()
		}
		out = append(out, hs)
	}
	return out
}
