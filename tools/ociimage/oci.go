package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

func parsePlatform(s string) (platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return platform{}, fmt.Errorf("platform %q: want OS/ARCH[/VARIANT]", s)
	}
	p := platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type configFile struct {
	Created      string      `json:"created"`
	Architecture string      `json:"architecture"`
	OS           string      `json:"os"`
	Variant      string      `json:"variant,omitempty"`
	Config       imageConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []history `json:"history"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// layout collects blobs in dir (one file a digest) until write.
type layout struct {
	dir string
}

func (l *layout) blobPath(digest string) string {
	return filepath.Join(l.dir, strings.Replace(digest, ":", "-", 1))
}

func (l *layout) putJSON(mediaType string, v any) (descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	sum := sha256.Sum256(b)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
	return d, os.WriteFile(l.blobPath(d.Digest), b, 0o644)
}

// image builds one platform's layer, configuration and manifest.
func (l *layout) image(p platform, binary string, debs []string, cfg imageConfig, epoch time.Time) (descriptor, error) {
	t, err := rootFS(binary, debs)
	if err != nil {
		return descriptor{}, err
	}
	f, err := os.CreateTemp(l.dir, "layer-")
	if err != nil {
		return descriptor{}, err
	}
	blob, diffID, err := writeLayer(f, t, epoch)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return descriptor{}, err
	}
	if err := os.Rename(f.Name(), l.blobPath(blob)); err != nil {
		return descriptor{}, err
	}
	fi, err := os.Stat(l.blobPath(blob))
	if err != nil {
		return descriptor{}, err
	}
	layer := descriptor{MediaType: mediaLayer, Digest: blob, Size: fi.Size()}

	pkgs := make([]string, 0, len(debs))
	for _, d := range debs {
		pkgs = append(pkgs, strings.SplitN(filepath.Base(d), "_", 2)[0])
	}
	created := epoch.Format(time.RFC3339)
	c := configFile{Created: created, Architecture: p.Architecture, OS: p.OS, Variant: p.Variant, Config: cfg}
	c.RootFS.Type = "layers"
	c.RootFS.DiffIDs = []string{diffID}
	c.History = []history{{Created: created, CreatedBy: "ociimage: Debian packages " + strings.Join(pkgs, " ") + "; /usr/bin/layerprobe"}}
	cd, err := l.putJSON(mediaConfig, c)
	if err != nil {
		return descriptor{}, err
	}
	md, err := l.putJSON(mediaManifest, manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cd, Layers: []descriptor{layer}})
	if err != nil {
		return descriptor{}, err
	}
	md.Platform = &p
	return md, nil
}

// write puts the image index and the layout's files into the tarball:
// index.json names one image index (the multi-platform image, named for
// containerd's and docker's import and by its tag for OCI tools), which
// lists the platforms' manifests.
func (l *layout) write(out, name string, manifests []descriptor, epoch time.Time) error {
	ix, err := l.putJSON(mediaIndex, index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests})
	if err != nil {
		return err
	}
	_, tag, _ := strings.Cut(name[strings.LastIndex(name, "/")+1:], ":")
	ix.Annotations = map[string]string{
		"io.containerd.image.name":          normalize(name),
		"org.opencontainers.image.ref.name": tag,
	}
	top, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{ix}})
	if err != nil {
		return err
	}
	blobs, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var digests []string
	for _, b := range blobs {
		if strings.HasPrefix(b.Name(), "sha256-") {
			digests = append(digests, b.Name())
		}
	}
	slices.Sort(digests)

	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	dir := func(n string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(n string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: size, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	for _, d := range digests {
		bf, err := os.Open(filepath.Join(l.dir, d))
		if err != nil {
			return err
		}
		fi, err := bf.Stat()
		if err == nil {
			err = file("blobs/sha256/"+strings.TrimPrefix(d, "sha256-"), fi.Size(), bf)
		}
		bf.Close()
		if err != nil {
			return err
		}
	}
	if err := file("index.json", int64(len(top)), strings.NewReader(string(top))); err != nil {
		return err
	}
	layoutFile := `{"imageLayoutVersion":"1.0.0"}`
	if err := file("oci-layout", int64(len(layoutFile)), strings.NewReader(layoutFile)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// normalize is the reference as docker and containerd spell it in full:
// layerprobe:0.1.0 is docker.io/library/layerprobe:0.1.0, as `docker
// load` of the docker-built image names it.
func normalize(name string) string {
	first, _, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + name
	}
	return name
}
