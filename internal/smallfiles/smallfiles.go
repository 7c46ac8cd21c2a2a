// Package smallfiles is layerprobe's small-file workload: what a package
// install or a checkout does to a file system. It creates a nested tree
// of directories, creates and writes many small files in it, stats every
// file and then deletes the files and the directories, timing each
// operation. Its figures are in fio's json+ shape (FioJSON), so that the
// same parser and summaries read them as fio's.
//
// fio has engines for parts of it (filecreate, filestat, filedelete), but
// fio 3.33 neither creates a file in a directory that does not exist yet
// (filename_format with a '/' fails with ENOENT) nor sizes files other than
// uniformly at random (filesize=lo-hi), so the tree and its size
// distribution would not be a package tree's (docs/methodology.md).
package smallfiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// TreeName is the one entry Run creates in its directory, and removes.
const TreeName = "smallfiles.tree"

// MaxFileBytes is the largest file the workload writes.
const MaxFileBytes = 16 << 10

// MaxFiles bounds Spec.Files: a tree is a package install, not a file
// system's worth.
const MaxFiles = 100000

// sizeQuantiles are the 0th, 5th, ..., 100th percentiles of the sizes, in
// bytes, of the 1840 files of at most 16 KiB (92% of its 1994 files) in a
// real node_modules tree: npm 11.19.1's own, as Node.js 20.20.2 installs
// it (/usr/lib/node_modules/npm), measured on the test machine with
// `find -type f -size -16385c -printf '%s\n'`. Their median is 1661
// bytes. Sizes are drawn from them by linear interpolation.
var sizeQuantiles = [21]int{0, 136, 273, 451, 661, 765, 909, 1090, 1232, 1439, 1661,
	1975, 2398, 2979, 3631, 4578, 5881, 7239, 9261, 12008, 16384}

// FilesPerDir is the mean number of files per directory of the tree: that
// tree held its 1994 files in 424 directories (4.7 a directory), 3 to 9
// levels deep.
const FilesPerDir = 5

// Seed fixes the tree: every execution, on every target, writes the same
// files.
const Seed = 0x5eed

// Spec is one execution of the workload.
type Spec struct {
	// Files is the number of files; MaxBytes, when positive, lowers it to
	// the most files (the first of the tree) whose sizes together fit.
	Files    int
	MaxBytes int64
}

// Tree is the files and directories an execution creates: Dirs[0] is
// the tree's root, the parent of Dirs[i] is Dirs[(i-1)/3], and file i lies
// in Dirs[i % len(Dirs)] with Sizes[i] bytes.
type Tree struct {
	Dirs  []string // relative to the tree's root, "" for the root
	Sizes []int
}

// NewTree is the tree of spec: deterministic, so that every target and
// every round write the same files.
func NewTree(spec Spec) Tree {
	rng := rand.New(rand.NewPCG(Seed, Seed))
	var sizes []int
	var total int64
	for range spec.Files {
		n := drawSize(rng.Float64())
		if spec.MaxBytes > 0 && total+int64(n) > spec.MaxBytes {
			break
		}
		total += int64(n)
		sizes = append(sizes, n)
	}
	nd := max(1, (len(sizes)+FilesPerDir-1)/FilesPerDir)
	dirs := make([]string, nd)
	for i := 1; i < nd; i++ {
		dirs[i] = filepath.Join(dirs[(i-1)/3], "d"+strconv.Itoa(i))
	}
	return Tree{Dirs: dirs, Sizes: sizes}
}

// FilePath is file i's path relative to the tree's root.
func (t Tree) FilePath(i int) string {
	return filepath.Join(t.Dirs[i%len(t.Dirs)], "f"+strconv.Itoa(i)+".js")
}

// Bytes is what writing the tree's files writes.
func (t Tree) Bytes() int64 {
	var n int64
	for _, s := range t.Sizes {
		n += int64(s)
	}
	return n
}

// drawSize maps u in [0, 1) to a file size by the quantile table.
func drawSize(u float64) int {
	x := u * float64(len(sizeQuantiles)-1)
	i := int(x)
	if i >= len(sizeQuantiles)-1 {
		return sizeQuantiles[len(sizeQuantiles)-1]
	}
	f := x - float64(i)
	return int(math.Round(float64(sizeQuantiles[i]) + f*float64(sizeQuantiles[i+1]-sizeQuantiles[i])))
}

// Result is what one execution measured.
type Result struct {
	Files, Dirs int
	// Ops counts the timed operations: every mkdir, every file's
	// create+write+close, stat and unlink, every rmdir.
	Ops   int
	Bytes int64
	// Seconds is the time the operations took together, as the sum of
	// their latencies (the workload's own loop between them left out).
	Seconds float64
	// Bins is the operations' latency histogram in fio's buckets
	// (measure.FioBucket): nanoseconds to count.
	Bins map[int64]uint64
	// Phase holds each phase's operations' summed seconds: mkdir, create,
	// stat, unlink, rmdir.
	Phase map[string]float64
}

// Run creates spec's tree under dir/TreeName, then stats and deletes it,
// timing every operation. dir must exist; a TreeName left there by an
// execution that was killed is removed first, and the tree is removed
// whatever happens.
func Run(dir string, spec Spec) (Result, error) {
	if spec.Files <= 0 || spec.Files > MaxFiles {
		return Result{}, fmt.Errorf("smallfiles: files %d out of range 1..%d", spec.Files, MaxFiles)
	}
	tree := NewTree(spec)
	if len(tree.Sizes) == 0 {
		return Result{}, fmt.Errorf("smallfiles: a byte cap of %d leaves no file", spec.MaxBytes)
	}
	root := filepath.Join(dir, TreeName)
	if err := os.RemoveAll(root); err != nil {
		return Result{}, fmt.Errorf("smallfiles: remove a leftover tree: %w", err)
	}
	defer os.RemoveAll(root)

	res := Result{Files: len(tree.Sizes), Dirs: len(tree.Dirs), Bins: map[int64]uint64{}, Phase: map[string]float64{}}
	timed := func(phase string, op func() error) error {
		start := time.Now()
		err := op()
		d := time.Since(start)
		res.Ops++
		res.Seconds += d.Seconds()
		res.Phase[phase] += d.Seconds()
		res.Bins[measure.FioBucket(d.Nanoseconds())]++
		return err
	}
	buf := make([]byte, MaxFileBytes)
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	paths := make([]string, len(tree.Sizes))
	for i := range paths {
		paths[i] = filepath.Join(root, tree.FilePath(i))
	}
	for _, d := range tree.Dirs {
		p := filepath.Join(root, d)
		if err := timed("mkdir", func() error { return os.Mkdir(p, 0o755) }); err != nil {
			return res, fmt.Errorf("smallfiles: %w", err)
		}
	}
	for i, p := range paths {
		data := buf[:tree.Sizes[i]]
		if err := timed("create", func() error { return writeFile(p, data) }); err != nil {
			return res, fmt.Errorf("smallfiles: %w", err)
		}
		res.Bytes += int64(len(data))
	}
	for _, p := range paths {
		if err := timed("stat", func() error { _, err := os.Lstat(p); return err }); err != nil {
			return res, fmt.Errorf("smallfiles: %w", err)
		}
	}
	for _, p := range paths {
		if err := timed("unlink", func() error { return os.Remove(p) }); err != nil {
			return res, fmt.Errorf("smallfiles: %w", err)
		}
	}
	for i := len(tree.Dirs) - 1; i >= 0; i-- {
		p := filepath.Join(root, tree.Dirs[i])
		if err := timed("rmdir", func() error { return os.Remove(p) }); err != nil {
			return res, fmt.Errorf("smallfiles: %w", err)
		}
	}
	return res, nil
}

// writeFile creates a file that must not exist, writes data and closes
// it: what an installer does for each file it unpacks (no fsync).
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Percentiles FioJSON prints, as fio does (a subset of its list).
var percentiles = []float64{50, 99, 99.9}

// FioJSON renders r as fio's json+ output of one job named name: every
// operation is a write I/O of the "write" direction (io_bytes the files'
// data), iops the operations over their summed latency, runtime that
// time in milliseconds, clat_ns the operations' latencies with their
// histogram. A failed execution is a job with error set, as fio reports
// one. The "smallfiles" object carries what fio has no place for.
func FioJSON(name string, r Result, runErr error) []byte {
	write := map[string]any{"io_bytes": r.Bytes, "io_kbytes": r.Bytes / 1024, "total_ios": r.Ops,
		"runtime": r.Seconds * 1000, "iops": 0.0, "bw_bytes": 0.0}
	if r.Seconds > 0 {
		write["iops"] = float64(r.Ops) / r.Seconds
		write["bw_bytes"] = float64(r.Bytes) / r.Seconds
	}
	if r.Ops > 0 {
		bins := make(map[string]uint64, len(r.Bins))
		h := measure.NewHistogram(r.Bins)
		for ns, n := range r.Bins {
			bins[strconv.FormatInt(ns, 10)] = n
		}
		pct := map[string]float64{}
		for _, p := range percentiles {
			pct[strconv.FormatFloat(p, 'f', 6, 64)] = h.Quantile(p/100) * 1e9
		}
		write["clat_ns"] = map[string]any{"N": r.Ops, "mean": r.Seconds / float64(r.Ops) * 1e9,
			"percentile": pct, "bins": bins}
	}
	job := map[string]any{"jobname": name, "error": 0, "job_runtime": r.Seconds * 1000,
		"read":       map[string]any{"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "iops": 0, "runtime": 0, "total_ios": 0},
		"write":      write,
		"smallfiles": map[string]any{"files": r.Files, "dirs": r.Dirs, "phase_seconds": r.Phase},
	}
	if runErr != nil {
		job["error"] = errnoOf(runErr)
	}
	b, _ := json.Marshal(map[string]any{"jobs": []any{job}})
	return b
}

// errnoOf is the errno a failed operation returned, as fio's job error
// reports one (EIO when none is known).
func errnoOf(err error) int {
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return int(errno)
	}
	return int(syscall.EIO)
}
