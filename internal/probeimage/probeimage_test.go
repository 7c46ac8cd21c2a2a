package probeimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/layerprobe/layerprobe/internal/smallfiles"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// smallBinary copies a small dynamically linked host binary into a temp
// dir, so a test can change it.
func smallBinary(t *testing.T) string {
	t.Helper()
	src, err := exec.LookPath("true")
	if err != nil {
		t.Fatalf("no true binary: %v", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "helper")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

func interpreterOf(t *testing.T, bin string) string {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	t.Fatalf("%s has no PT_INTERP", bin)
	return ""
}

type entry struct {
	hdr  *tar.Header
	sum  string // sha256 of the content
	data []byte // content, kept for small files only (memory, and -race speed)
}

// readTar streams the image's tar through a pipe, as the engine does, and
// returns its entries. With dir set, it also unpacks the files there.
func readTar(t *testing.T, im *Image, dir string) []entry {
	t.Helper()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(im.WriteTar(pw)) }()
	defer pr.Close()
	tr := tar.NewReader(pr)
	var out []entry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		e := entry{hdr: hdr}
		h := sha256.New()
		w := io.Writer(h)
		var small bytes.Buffer
		if hdr.Size < 64<<10 {
			w = io.MultiWriter(h, &small)
		}
		var f *os.File
		if dir != "" {
			p := filepath.Join(dir, hdr.Name)
			if hdr.Typeflag == tar.TypeDir {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			} else {
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)); err != nil {
					t.Fatal(err)
				}
				w = io.MultiWriter(w, f)
			}
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		if f != nil {
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		e.sum = hex.EncodeToString(h.Sum(nil))
		e.data = small.Bytes()
		out = append(out, e)
	}
	return out
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestBuildContents(t *testing.T) {
	hostFio := testharness.RequireFio(t)
	helper := smallBinary(t)
	im, err := Build(hostFio, helper)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if im.FioPath != hostFio {
		t.Errorf("FioPath = %q, want %q", im.FioPath, hostFio)
	}
	if len(im.Digest) != 64 {
		t.Errorf("Digest = %q, want 64 hex digits", im.Digest)
	}

	entries := readTar(t, im, "")
	byName := map[string]entry{}
	var names []string
	for _, e := range entries {
		byName[e.hdr.Name] = e
		names = append(names, e.hdr.Name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("tar entries are not sorted: %v", names)
	}

	if e, ok := byName["lp/bin/fio"]; !ok {
		t.Errorf("no lp/bin/fio in %v", names)
	} else if e.sum != fileSum(t, hostFio) {
		t.Errorf("lp/bin/fio differs from %s", hostFio)
	}
	if _, ok := byName["lp/bin/layerprobe"]; !ok {
		t.Errorf("no lp/bin/layerprobe in %v", names)
	}
	interp := interpreterOf(t, hostFio)
	if _, ok := byName[strings.TrimPrefix(interp, "/")]; !ok {
		t.Errorf("interpreter %s missing from %v", interp, names)
	}
	if !slices.ContainsFunc(names, func(n string) bool { return path.Base(n) == "libc.so.6" }) {
		t.Errorf("no libc.so.6 in %v", names)
	}
	// Every library ldd names must be there (ldd is the reference here,
	// not the implementation).
	if out, err := exec.Command("ldd", hostFio).Output(); err == nil {
		for line := range strings.SplitSeq(string(out), "\n") {
			if _, p, ok := strings.Cut(line, "=> "); ok {
				p, _, _ = strings.Cut(p, " (")
				if path.IsAbs(p) {
					if _, ok := byName[strings.TrimPrefix(p, "/")]; !ok {
						t.Errorf("ldd lists %s, the image lacks it", p)
					}
				}
			}
		}
	}

	for name, want := range map[string]int64{"tmp/": 0o1777, "lp/layer/": 0o755, "lp/bind/": 0o755, "lp/volume/": 0o755} {
		e, ok := byName[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		if e.hdr.Typeflag != tar.TypeDir || e.hdr.Mode != want {
			t.Errorf("%s: type %c mode %o, want directory mode %o", name, e.hdr.Typeflag, e.hdr.Mode, want)
		}
	}
	if e := byName["etc/passwd"]; !strings.HasPrefix(string(e.data), "root:x:0:0:") {
		t.Errorf("etc/passwd = %q", e.data)
	}
	if e := byName["etc/group"]; !strings.HasPrefix(string(e.data), "root:x:0:") {
		t.Errorf("etc/group = %q", e.data)
	}

	for _, e := range entries {
		if e.hdr.Uid != 0 || e.hdr.Gid != 0 || !e.hdr.ModTime.Equal(mtime) {
			t.Errorf("%s: uid %d gid %d mtime %v, want 0 0 %v", e.hdr.Name, e.hdr.Uid, e.hdr.Gid, e.hdr.ModTime, mtime)
		}
		if e.hdr.Typeflag != tar.TypeDir && e.hdr.Typeflag != tar.TypeReg {
			t.Errorf("%s: type %c, want only directories and regular files", e.hdr.Name, e.hdr.Typeflag)
		}
		// Parents come first.
		if dir := path.Dir(strings.TrimSuffix(e.hdr.Name, "/")); dir != "." {
			if _, ok := byName[dir+"/"]; !ok {
				t.Errorf("%s: parent directory %s/ has no entry", e.hdr.Name, dir)
			}
		}
	}
}

func TestDigest(t *testing.T) {
	hostFio := testharness.RequireFio(t)
	helper := smallBinary(t)
	a, err := Build(hostFio, helper)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(hostFio, helper)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Errorf("two builds of the same inputs: digests %s and %s", a.Digest, b.Digest)
	}
	sa, sb := sha256.New(), sha256.New()
	if err := a.WriteTar(sa); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteTar(sb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.Sum(nil), sb.Sum(nil)) {
		t.Errorf("two builds of the same inputs wrote different tar streams")
	}

	// Change the helper's last byte (section headers or padding: the
	// binary stays a valid ELF file of the same size).
	data, err := os.ReadFile(helper)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(helper, data, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Build(hostFio, helper)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest == a.Digest {
		t.Errorf("digest %s unchanged after the helper changed", c.Digest)
	}
	// The image built before the change must refuse to write a tar that
	// does not match its digest, whether the file changed or grew.
	if err := a.WriteTar(io.Discard); err == nil {
		t.Errorf("WriteTar of an image whose helper changed since Build: nil error")
	}
	if err := os.WriteFile(helper, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteTar(io.Discard); err == nil {
		t.Errorf("WriteTar of an image whose helper grew since Build: nil error")
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][2]string{
		"missing fio":    {filepath.Join(dir, "nope"), script},
		"fio not ELF":    {script, script},
		"helper missing": {testharness.HostFio, ""},
	} {
		if _, err := Build(args[0], args[1]); err == nil {
			t.Errorf("%s: Build(%q, %q) = nil error", name, args[0], args[1])
		}
	}
}

func TestReadLdSoConf(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "include conf.d/*.conf\n/opt/a # comment\n")
	write("conf.d/b.conf", "# multiarch\n/usr/local/lib\n/opt/b:/opt/c\n")
	write("conf.d/a.conf", "hwcap 0 nosegneg\n/opt/first\n")
	got, err := readLdSoConf(filepath.Join(dir, "ld.so.conf"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/first", "/usr/local/lib", "/opt/b", "/opt/c", "/opt/a"}
	if !slices.Equal(got, want) {
		t.Errorf("readLdSoConf = %v, want %v", got, want)
	}
}

func TestExpandOrigin(t *testing.T) {
	for _, c := range []struct{ entry, origin, want string }{
		{"$ORIGIN/../lib", "/lp/bin", "/lp/lib"},
		{"${ORIGIN}/x", "/usr/bin", "/usr/bin/x"},
		{"/opt/lib", "/usr/bin", "/opt/lib"},
	} {
		if got := expandOrigin(c.entry, c.origin); got != c.want {
			t.Errorf("expandOrigin(%q, %q) = %q, want %q", c.entry, c.origin, got, c.want)
		}
	}
}

// TestImageRunsFio unpacks the image into a directory and runs its fio
// chrooted there: the library resolution is right only if fio starts with
// nothing but the image's files.
func TestImageRunsFio(t *testing.T) {
	hostFio := testharness.RequireFio(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("chroot needs root (CI is set: not skipping)")
		}
		t.Skip("chroot needs root")
	}
	im, err := Build(hostFio, smallBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	readTar(t, im, root)
	want, err := exec.Command(hostFio, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{FioPath, "--version"}, {HelperPath}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("chroot %v: %v: %s", argv, err, out)
			continue
		}
		if argv[0] == FioPath && string(out) != string(want) {
			t.Errorf("chrooted fio --version = %q, host %q", out, want)
		}
	}
}

func TestWithCopyUpFiles(t *testing.T) {
	base := &Image{Files: []File{{Path: "/lp", Mode: fs.ModeDir | 0o755}}}
	base.Digest = digest(base.Files)
	im := base.WithCopyUpFiles()
	if im.Digest == base.Digest || im.Digest != base.WithCopyUpFiles().Digest {
		t.Fatalf("digest: base %s, with copy-up %s: want different from base and stable", base.Digest, im.Digest)
	}
	if len(base.Files) != 1 {
		t.Fatalf("WithCopyUpFiles changed its receiver: %v", base.Paths())
	}
	if n := im.Layers(); n != 1+TreeLayers {
		t.Fatalf("%d layers, want %d", n, 1+TreeLayers)
	}
	if err := im.WriteTar(io.Discard); err == nil {
		t.Errorf("WriteTar of a %d-layer image: nil error", im.Layers())
	}
	streams, err := im.LayerStreams()
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	layerOf := map[string]int{}
	dirsIn := make([]int, im.Layers())
	var first []byte
	for layer := range im.Layers() {
		var buf bytes.Buffer
		n, err := im.WriteLayer(&buf, layer)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(buf.Len()) {
			t.Errorf("layer %d: WriteLayer says %d bytes, wrote %d", layer, n, buf.Len())
		}
		if sum := sha256.Sum256(buf.Bytes()); hex.EncodeToString(sum[:]) != streams[layer].DiffID || int64(buf.Len()) != streams[layer].Size {
			t.Errorf("layer %d: %d bytes, not the stream LayerStreams described (%+v)", layer, buf.Len(), streams[layer])
		}
		readLayer(t, &buf, func(hdr *tar.Header, b []byte) {
			name := "/" + strings.TrimSuffix(hdr.Name, "/")
			if hdr.Typeflag == tar.TypeDir && strings.HasPrefix(name, TreeDir) {
				dirsIn[layer]++
			}
			if hdr.Typeflag != tar.TypeReg {
				return
			}
			if _, dup := sizes[name]; dup {
				t.Errorf("%s in layers %d and %d", name, layerOf[name], layer)
			}
			sizes[name], layerOf[name] = int64(len(b)), layer
			if hdr.Name == "lp/copyup/1M" {
				first = b[:4096]
			}
		})
	}
	// The tree: every directory in each of its layers, its files spread
	// over all of them, none in the first.
	tree := smallfiles.NewTree(smallfiles.Spec{Files: TreeFiles})
	perLayer := make([]int, im.Layers())
	for i := range tree.Sizes {
		perLayer[layerOf[path.Join(TreeDir, tree.FilePath(i))]]++
	}
	for layer := range im.Layers() {
		wantDirs := len(tree.Dirs)
		if layer == 0 {
			wantDirs = 0
		}
		if dirsIn[layer] != wantDirs || (layer == 0) != (perLayer[layer] == 0) {
			t.Errorf("layer %d: %d tree directories and %d tree files, want %d directories and files in every layer but the first",
				layer, dirsIn[layer], perLayer[layer], wantDirs)
		}
	}
	for _, size := range CopyUpSizes {
		if l := layerOf[CopyUpPath(size)]; l != 0 {
			t.Errorf("%s in layer %d, want the first", CopyUpPath(size), l)
		}
	}
	for _, size := range CopyUpSizes {
		if got := sizes[CopyUpPath(size)]; got != size {
			t.Errorf("%s: %d bytes in the tar, want %d", CopyUpPath(size), got, size)
		}
	}
	// Pseudo-random, not zeros: a zero page could be skipped by sparse
	// handling somewhere and make the copy look cheap.
	if bytes.Count(first, []byte{0}) > 64 {
		t.Errorf("copy-up content looks sparse: %d zero bytes in the first 4 KiB", bytes.Count(first, []byte{0}))
	}
}

// readLayer calls f with every entry of a tar stream and its content.
func readLayer(t *testing.T, r io.Reader, f func(*tar.Header, []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f(hdr, b)
	}
}
