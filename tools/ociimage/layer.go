package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"
)

// entry is one file of the layer; data is a regular file's content.
type entry struct {
	hdr  tar.Header
	data []byte
}

// usrMerged are the top-level directories that Debian 12's root has as
// symbolic links into /usr; packages still ship files under them.
var usrMerged = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// cleanName is a package path as the usr-merged root holds it: no leading
// "./" or "/", and /bin/x as usr/bin/x.
func cleanName(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	first, rest, _ := strings.Cut(name, "/")
	if slices.Contains(usrMerged, first) {
		return path.Join("usr", first, rest)
	}
	return name
}

// tree is the root file system being assembled, by cleaned path.
type tree map[string]*entry

// addDeb adds a package's files. A file that an earlier package also
// shipped is replaced (as dpkg would refuse; the dependency closure of one
// package has no such conflicts in practice); a directory stays as first
// seen. Maintainer scripts are not run: nothing of the package's
// architecture is executed.
func (t tree) addDeb(deb string) error {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dpkg-deb: %w", err)
	}
	tr := tar.NewReader(out)
	var hardlinks []tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			cmd.Wait()
			return fmt.Errorf("%s: %w (%s)", deb, err, strings.TrimSpace(stderr.String()))
		}
		name := cleanName(h.Name)
		if name == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if _, ok := t[name]; !ok {
				t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: h.Mode, Uid: h.Uid, Gid: h.Gid}}
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				cmd.Wait()
				return fmt.Errorf("%s: %s: %w", deb, h.Name, err)
			}
			t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: h.Mode, Uid: h.Uid, Gid: h.Gid, Size: int64(len(data))}, data: data}
		case tar.TypeSymlink:
			t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: h.Linkname, Mode: h.Mode, Uid: h.Uid, Gid: h.Gid}}
		case tar.TypeLink:
			hl := *h
			hl.Name = name
			hardlinks = append(hardlinks, hl)
		default:
			cmd.Wait()
			return fmt.Errorf("%s: %s: file type %q is not expected in a package", deb, h.Name, h.Typeflag)
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w (%s)", deb, err, strings.TrimSpace(stderr.String()))
	}
	// Hard links become copies: in a sorted layer the link could come
	// before its target.
	for _, hl := range hardlinks {
		target, ok := t[cleanName(hl.Linkname)]
		if !ok || target.hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s: %s: hard link to %s, which is not a file of the package", deb, hl.Name, hl.Linkname)
		}
		e := *target
		e.hdr.Name, e.hdr.Mode, e.hdr.Uid, e.hdr.Gid = hl.Name, hl.Mode, hl.Uid, hl.Gid
		t[hl.Name] = &e
	}
	return nil
}

func (t tree) addFile(name string, mode int64, data []byte) {
	t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
}

func (t tree) addDir(name string, mode int64) {
	t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode}}
}

func (t tree) addSymlink(name, target string) {
	t[name] = &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
}

// rootFS assembles a platform's root: the packages, Debian's usr-merge
// links, the files a Debian root has that package scripts would have
// made (root in /etc/passwd and /etc/group, /tmp, /root), the agent's
// working directory and the layerprobe binary.
func rootFS(binary string, debs []string) (tree, error) {
	t := tree{}
	for _, d := range debs {
		if err := t.addDeb(d); err != nil {
			return nil, err
		}
	}
	for _, d := range usrMerged {
		if _, ok := t["usr/"+d]; ok || d == "bin" || d == "sbin" || d == "lib" {
			if _, ok := t["usr/"+d]; !ok {
				t.addDir("usr/"+d, 0o755)
			}
			t.addSymlink(d, "usr/"+d)
		}
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	t.addFile("usr/bin/layerprobe", 0o755, bin)
	t.addFile("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	t.addFile("etc/group", 0o644, []byte("root:x:0:\n"))
	t.addDir("tmp", 0o1777)
	t.addDir("root", 0o700)
	t.addDir("var/lib/layerprobe", 0o755)
	// Every parent directory has its own entry.
	for name := range t {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := t[d]; !ok {
				t.addDir(d, 0o755)
			}
		}
	}
	return t, nil
}

// writeLayer writes the tree as a gzip-compressed tar, entries sorted by
// name, owners numeric, every time epoch's, and returns the compressed
// blob's and the uncompressed tar's (diff ID) sha256 digests.
func writeLayer(w io.Writer, t tree, epoch time.Time) (blob, diffID string, err error) {
	blobHash, tarHash := sha256.New(), sha256.New()
	gz, err := gzip.NewWriterLevel(io.MultiWriter(w, blobHash), gzip.DefaultCompression)
	if err != nil {
		return "", "", err
	}
	tw := tar.NewWriter(io.MultiWriter(gz, tarHash))
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e := t[n]
		h := e.hdr
		h.ModTime = epoch
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return "", "", fmt.Errorf("%s: %w", n, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return "", "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	if err := gz.Close(); err != nil {
		return "", "", err
	}
	return "sha256:" + hex.EncodeToString(blobHash.Sum(nil)), "sha256:" + hex.EncodeToString(tarHash.Sum(nil)), nil
}
