// Package probeimage assembles the probe container's root file system from
// files already on the host, so no registry is ever needed.
//
// The image holds the host's own fio binary (both arms of every comparison
// run the same fio), every shared library it loads and the ELF interpreter,
// each at its original absolute path so the dynamic loader finds them
// without any configuration, plus the layerprobe binary as the container's
// idle process and helper. Dependencies are read from the ELF files
// themselves (PT_INTERP, DT_NEEDED, DT_RUNPATH/DT_RPATH), not from ldd,
// which would run the binary's loader.
//
// The tar stream is deterministic (sorted entries, fixed owner and mtime) and
// the image's Digest is a hash over every entry's path, mode and content, so
// an unchanged host yields the same digest and the engine can reuse the
// image it imported before.
package probeimage

import (
	"archive/tar"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	godigest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/layerprobe/layerprobe/internal/smallfiles"
)

// Paths inside the image (the engine package names the same paths for the
// container; they must agree).
const (
	FioPath    = "/lp/bin/fio"
	HelperPath = "/lp/bin/layerprobe"
)

// emptyDirs are created in every image: the mount points and the directory
// the container's writable-layer target uses.
var emptyDirs = map[string]fs.FileMode{
	"/lp/layer":  0o755,
	"/lp/bind":   0o755,
	"/lp/volume": 0o755,
	"/tmp":       0o777 | fs.ModeSticky,
}

// layoutVersion is hashed into every digest; bump it when WriteTar changes.
const layoutVersion = "layerprobe probe image layout 1"

// mtime is every entry's modification time: fixed, so the tar stream does
// not depend on when the host files were installed.
var mtime = time.Unix(946684800, 0).UTC() // 2000-01-01

// File is one entry of the image.
type File struct {
	Path   string      // absolute path inside the image
	Mode   fs.FileMode // permissions, with fs.ModeDir for directories and fs.ModeSticky where set
	Source string      // host file the content is copied from ("" for directories and generated files)
	Data   []byte      // content of a generated file (/etc/passwd, /etc/group)
	Size   int64
	SHA256 string // hex digest of the content ("" for directories)
	// Layer is the image layer that holds the entry, 0 the first. A
	// directory may have an entry in several layers: the engine merges
	// them, as it merges a real image's.
	Layer int
}

// Image is the probe image's root file system.
type Image struct {
	// Digest is the hex SHA-256 over the sorted entries' paths, modes and
	// content hashes.
	Digest string
	// FioPath is the host fio binary the image carries at /lp/bin/fio.
	FioPath string
	// Files lists every entry, directories included, sorted by path and
	// then layer.
	Files []File
}

// Build collects the image's files: fio at /lp/bin/fio and the helper at
// /lp/bin/layerprobe, each with its shared libraries and interpreter at
// their host paths. Symbolic links are resolved: the image stores regular
// files at the paths the loader asks for.
func Build(fioPath, helperPath string) (*Image, error) {
	r, err := newResolver()
	if err != nil {
		return nil, fmt.Errorf("build probe image: %w", err)
	}
	files := map[string]File{}
	add := func(imagePath, source string) error {
		if _, ok := files[imagePath]; ok {
			return nil
		}
		f, err := hostFile(imagePath, source)
		if err != nil {
			return err
		}
		files[imagePath] = f
		return nil
	}

	for _, bin := range []struct{ imagePath, host string }{{FioPath, fioPath}, {HelperPath, helperPath}} {
		if bin.host == "" {
			return nil, fmt.Errorf("build probe image: no host file for %s", bin.imagePath)
		}
		deps, err := r.dependencies(bin.imagePath, bin.host)
		if err != nil {
			return nil, fmt.Errorf("build probe image: resolve libraries of %s: %w", bin.host, err)
		}
		if err := add(bin.imagePath, bin.host); err != nil {
			return nil, fmt.Errorf("build probe image: %w", err)
		}
		for _, dep := range deps {
			if err := add(dep.image, dep.host); err != nil {
				return nil, fmt.Errorf("build probe image: %w", err)
			}
		}
	}
	// Libraries found only through /etc/ld.so.conf need the loader's cache
	// to be found again inside the container.
	if r.needsCache {
		if err := add(ldSoCache, ldSoCache); err != nil {
			return nil, fmt.Errorf("build probe image: %w", err)
		}
	}

	gen := func(p, content string) {
		sum := sha256.Sum256([]byte(content))
		files[p] = File{Path: p, Mode: 0o644, Data: []byte(content), Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	}
	gen("/etc/passwd", "root:x:0:0:root:/:/sbin/nologin\n")
	gen("/etc/group", "root:x:0:\n")
	for p, m := range emptyDirs {
		files[p] = File{Path: p, Mode: fs.ModeDir | m}
	}
	// Every parent directory gets an explicit entry, so the tar stream
	// does not depend on how the daemon creates implied directories.
	for _, p := range slices.Collect(maps.Keys(files)) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := files[d]; !ok {
				files[d] = File{Path: d, Mode: fs.ModeDir | 0o755}
			}
		}
	}

	im := &Image{FioPath: fioPath}
	for _, f := range files {
		im.Files = append(im.Files, f)
	}
	sortFiles(im.Files)
	im.Digest = digest(im.Files)
	return im, nil
}

// sortFiles sorts entries by path and then layer: the order of the tar
// streams and of the digest.
func sortFiles(files []File) {
	slices.SortFunc(files, func(a, b File) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Layer, b.Layer))
	})
}

// digest hashes the sorted entries' paths, modes and content hashes.
func digest(files []File) string {
	h := sha256.New()
	// The layout version first: a change to how the tar is written (owners,
	// mtimes, formats) must change the digest even for the same files.
	fmt.Fprintf(h, "%s\n", layoutVersion)
	for _, f := range files {
		// One line per entry; the path cannot contain a newline (checked
		// in hostFile), so lines cannot be confused. The layer is named
		// past the first, so a one-layer image keeps its digest.
		if f.Layer > 0 {
			fmt.Fprintf(h, "%s %o %s layer %d\n", f.Path, tarMode(f.Mode), f.SHA256, f.Layer)
		} else {
			fmt.Fprintf(h, "%s %o %s\n", f.Path, tarMode(f.Mode), f.SHA256)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// hostFile describes a host file (symlinks followed) stored at imagePath.
func hostFile(imagePath, source string) (File, error) {
	if !path.IsAbs(imagePath) || strings.ContainsAny(imagePath, "\n\x00") || path.Clean(imagePath) != imagePath {
		return File{}, fmt.Errorf("bad image path %q", imagePath)
	}
	f, err := os.Open(source)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, err
	}
	if !fi.Mode().IsRegular() {
		return File{}, fmt.Errorf("%s is not a regular file", source)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", source, err)
	}
	return File{
		Path:   imagePath,
		Mode:   fi.Mode().Perm(),
		Source: source,
		Size:   n,
		SHA256: hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// tarMode is the tar header mode for m (permission bits plus sticky).
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// Layers is how many layers the image has.
func (im *Image) Layers() int {
	n := 1
	for _, f := range im.Files {
		n = max(n, f.Layer+1)
	}
	return n
}

// WriteTar writes the root file system of a one-layer image as an
// uncompressed tar stream (WriteLayer 0); an image of several layers is
// written layer by layer.
func (im *Image) WriteTar(w io.Writer) error {
	if n := im.Layers(); n != 1 {
		return fmt.Errorf("write probe image tar: the image has %d layers; write each with WriteLayer", n)
	}
	_, err := im.WriteLayer(w, 0)
	return err
}

// WriteLayer writes the entries of one layer as an uncompressed tar
// stream and returns its size (what a content store's descriptor
// needs). Each host file is hashed again while it is copied: a file that
// changed since Build fails the write rather than producing an image that
// does not match its digest.
func (im *Image) WriteLayer(w io.Writer, layer int) (int64, error) {
	cw := &countWriter{w: w}
	err := im.writeLayer(cw, layer)
	return cw.n, err
}

func (im *Image) writeLayer(w io.Writer, layer int) error {
	tw := tar.NewWriter(w)
	for _, f := range im.Files {
		if f.Layer != layer {
			continue
		}
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(f.Path, "/"),
			Mode:    tarMode(f.Mode),
			ModTime: mtime,
			Uname:   "root",
			Gname:   "root",
			Format:  tar.FormatPAX,
		}
		if f.Mode.IsDir() {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = f.Size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write probe image tar: %s: %w", f.Path, err)
		}
		if f.Mode.IsDir() {
			continue
		}
		if err := writeContent(tw, f); err != nil {
			return fmt.Errorf("write probe image tar: %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write probe image tar: %w", err)
	}
	return nil
}

func writeContent(w io.Writer, f File) error {
	if strings.HasPrefix(f.SHA256, genPrefix) {
		n, err := io.Copy(w, genReader(f))
		if err == nil && n != f.Size {
			err = fmt.Errorf("generated %d of %d bytes", n, f.Size)
		}
		return err
	}
	h := sha256.New()
	if f.Source == "" {
		h.Write(f.Data)
		if _, err := w.Write(f.Data); err != nil {
			return err
		}
		return checkSum(h, f)
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	// LimitReader: a file that grew must not overrun the header's size.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(src, f.Size))
	if err != nil {
		return fmt.Errorf("copy %s: %w", f.Source, err)
	}
	if n != f.Size {
		return fmt.Errorf("%s shrank from %d to %d bytes since the image was built", f.Source, f.Size, n)
	}
	if m, _ := src.Read(make([]byte, 1)); m > 0 {
		return fmt.Errorf("%s grew since the image was built", f.Source)
	}
	return checkSum(h, f)
}

func checkSum(h hash.Hash, f File) error {
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("content of %s changed since the image was built", f.Path)
	}
	return nil
}

// LayerDigest is the hex SHA-256 of the tar stream WriteTar writes: the
// diff ID an engine computes for the layer it imports from that stream, and
// so the image's identity on an engine that drops or mangles import-time
// labels. It costs one pass over the image's content.
func (im *Image) LayerDigest() (string, error) {
	if n := im.Layers(); n != 1 {
		return "", fmt.Errorf("probe image layer digest: the image has %d layers", n)
	}
	l, err := im.LayerStreams()
	if err != nil {
		return "", err
	}
	return l[0].DiffID, nil
}

// Config is the image configuration of a probe image with the given
// labels and layer diff IDs (hex, in order): the helper idling as its
// entrypoint, for the engines that write one themselves (containerd's
// content store, a docker-archive).
func Config(labels map[string]string, diffIDs []string) ocispec.Image {
	cfg := ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Config: ocispec.ImageConfig{
			Entrypoint: []string{HelperPath, "probe-helper", "idle"},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: ocispec.RootFS{Type: "layers"},
	}
	for _, d := range diffIDs {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, godigest.NewDigestFromEncoded(godigest.SHA256, d))
	}
	return cfg
}

// LayerStream is what one layer's tar stream (WriteLayer) is.
type LayerStream struct {
	DiffID string // hex SHA-256 of the stream: the layer's diff ID
	Size   int64  // bytes
}

// LayerStreams returns every layer's diff ID and size, in order: what an
// image configuration and an archive header name before the layers'
// content follows. It costs one pass over the image's content.
func (im *Image) LayerStreams() ([]LayerStream, error) {
	out := make([]LayerStream, im.Layers())
	for i := range out {
		h := sha256.New()
		n, err := im.WriteLayer(h, i)
		if err != nil {
			return nil, err
		}
		out[i] = LayerStream{DiffID: hex.EncodeToString(h.Sum(nil)), Size: n}
	}
	return out, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Paths lists the image's paths, each once, for messages and tests.
func (im *Image) Paths() []string {
	out := make([]string, 0, len(im.Files))
	for _, f := range im.Files {
		if len(out) == 0 || out[len(out)-1] != f.Path {
			out = append(out, f.Path)
		}
	}
	return out
}

// Size is the total content size in bytes.
func (im *Image) Size() int64 {
	var n int64
	for _, f := range im.Files {
		n += f.Size
	}
	return n
}

// CopyUpDir holds the cold probe's copy-up files inside the image.
const CopyUpDir = "/lp/copyup"

// CopyUpSizes are the sizes of the files the cold image carries in its image
// layer. Copy-up copies a whole file before its first byte changes, so the
// first write's latency grows with the size on drivers that copy (overlay2
// on a file system without reflink) and stays flat on those that share
// extents. Three sizes spanning 64x make the growth measurable while a cold
// round copies at most 81 MiB.
var CopyUpSizes = []int64{1 << 20, 16 << 20, 64 << 20}

// CopyUpPath is the image path of the copy-up file of size bytes.
func CopyUpPath(size int64) string {
	return fmt.Sprintf("%s/%dM", CopyUpDir, size>>20)
}

// genPrefix marks the SHA256 field of a generated file: its content is
// fully determined by its path and size (see genReader), so the digest line
// names the generator instead of hashing tens of MiB on every image check.
const genPrefix = "gen:chacha8:"

// WithCopyUpFiles returns a copy of im that also carries the copy-up files:
// pseudo-random content, so neither compression nor zero detection nor
// deduplication anywhere in the stack can make a copy cheaper than it is.
func (im *Image) WithCopyUpFiles() *Image {
	out := &Image{FioPath: im.FioPath, Files: slices.Clone(im.Files)}
	have := map[string]bool{}
	for _, f := range out.Files {
		have[f.Path] = true
	}
	if !have[CopyUpDir] {
		out.Files = append(out.Files, File{Path: CopyUpDir, Mode: fs.ModeDir | 0o755})
	}
	for _, size := range CopyUpSizes {
		p := CopyUpPath(size)
		// 0o666: the probe runs without capabilities, and root without
		// CAP_DAC_OVERRIDE may only write files its mode allows.
		out.Files = append(out.Files, File{Path: p, Mode: 0o666, Size: size,
			SHA256: fmt.Sprintf("%s%s:%d", genPrefix, p, size)})
	}
	out.Files = append(out.Files, treeFiles()...)
	sortFiles(out.Files)
	out.Digest = digest(out.Files)
	return out
}

// TreeDir holds the cold image's tree of small files: the smallfiles
// workload's tree (smallfiles.NewTree), whose stat walk and first creates
// in its directories a fresh container times against the same tree on
// the host.
const TreeDir = "/lp/tree"

// TreeFiles is how many files the cold image's tree holds.
const TreeFiles = 2000

// TreeLayers is how many image layers the tree spreads over, above the
// layer of fio and the helper: every layer has every directory of the
// tree and file i is in layer 1 + i mod TreeLayers, as a package tree
// installed by several build steps is. A lookup then searches the
// directory in each lower layer, and a first create copies up a
// directory merged from all of them: the cost a one-layer tree hides.
const TreeLayers = 3

// treeFiles are the entries of the cold image's tree, in layers 1 to
// TreeLayers. The directories are writable by all: the probe runs without
// capabilities, and a first create in each is what is timed.
func treeFiles() []File {
	tree := smallfiles.NewTree(smallfiles.Spec{Files: TreeFiles})
	out := make([]File, 0, TreeLayers*(len(tree.Dirs)+1)+len(tree.Sizes))
	for l := 1; l <= TreeLayers; l++ {
		// Each layer's tar names the tree's parent too, so that it
		// does not depend on how an engine creates implied directories.
		out = append(out, File{Path: path.Dir(TreeDir), Mode: fs.ModeDir | 0o755, Layer: l})
		for _, d := range tree.Dirs {
			out = append(out, File{Path: path.Join(TreeDir, d), Mode: fs.ModeDir | 0o777, Layer: l})
		}
	}
	for i, size := range tree.Sizes {
		p := path.Join(TreeDir, tree.FilePath(i))
		out = append(out, File{Path: p, Mode: 0o644, Size: int64(size), Layer: 1 + i%TreeLayers,
			SHA256: fmt.Sprintf("%s%s:%d", genPrefix, p, size)})
	}
	return out
}

// StartupDir holds the files of a start-up image.
const StartupDir = "/lp/startup"

// StartupFileBytes is the size of each file of a start-up image: an image
// of n MiB of files holds n of them.
const StartupFileBytes = 1 << 20

// WithStartupFiles returns a copy of im that also carries size bytes of
// files (rounded down to whole StartupFileBytes) under StartupDir, with
// generated content like the copy-up files': the images a start-up
// measurement compares differ in nothing else. Container start-up
// scales with them only on a driver that copies the image for every
// container.
func (im *Image) WithStartupFiles(size int64) *Image {
	out := &Image{FioPath: im.FioPath, Files: slices.Clone(im.Files)}
	out.Files = append(out.Files, File{Path: StartupDir, Mode: fs.ModeDir | 0o755})
	for i := range size / StartupFileBytes {
		p := fmt.Sprintf("%s/f%04d", StartupDir, i)
		out.Files = append(out.Files, File{Path: p, Mode: 0o444, Size: StartupFileBytes,
			SHA256: fmt.Sprintf("%s%s:%d", genPrefix, p, StartupFileBytes)})
	}
	sortFiles(out.Files)
	out.Digest = digest(out.Files)
	return out
}

// genReader streams a generated file's content: ChaCha8 seeded from the
// path, so the same image always has the same bytes.
func genReader(f File) io.Reader {
	return io.LimitReader(rand.NewChaCha8(sha256.Sum256([]byte(f.Path))), f.Size)
}
