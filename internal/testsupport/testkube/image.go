package testkube

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"time"
)

// ImageFile is a file of an image: the machine's file Src at Path.
type ImageFile struct {
	Path, Src string
	Mode      int64
}

// writeBinaryImage writes an OCI image layout tarball (what `ctr images
// import` reads) of an image named name whose one layer is the file at
// bin as /<entry>, its entrypoint.
func writeBinaryImage(out, name, bin, entry string) error {
	return WriteImage(out, name, []ImageFile{{Path: entry, Src: bin, Mode: 0o755}}, []string{"/" + entry})
}

// ExecutableFiles are the executable bin at path and the shared libraries
// ldd lists for it, each at the path ldd gives (a link's target's content):
// an image of a dynamically linked executable of the machine's own.
func ExecutableFiles(bin, path string) ([]ImageFile, error) {
	files := []ImageFile{{Path: path, Src: bin, Mode: 0o755}}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		// ldd fails on a static executable: it needs no library.
		if strings.Contains(string(out), "not a dynamic executable") {
			return files, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		lib := ""
		switch {
		case len(f) >= 3 && f[1] == "=>":
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		}
		if strings.HasPrefix(lib, "/") {
			files = append(files, ImageFile{Path: lib, Src: lib, Mode: 0o755})
		}
	}
	return files, nil
}

// WriteImage writes an OCI image layout tarball (what `ctr images import`
// reads) of an image named name whose one layer holds files (and their
// directories), run as entrypoint.
func WriteImage(out, name string, files []ImageFile, entrypoint []string) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, f := range files {
		content, err := os.ReadFile(f.Src)
		if err != nil {
			return err
		}
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0), Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: f.Mode, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	blobs := map[string][]byte{}
	add := func(mediaType string, b []byte) map[string]any {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return map[string]any{"mediaType": mediaType, "digest": d, "size": len(b)}
	}
	layerDesc := add("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc["digest"].(string)}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        add("application/vnd.oci.image.config.v1+json", config),
		"layers":        []any{layerDesc},
	})
	if err != nil {
		return err
	}
	md := add("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{"io.containerd.image.name": name}
	md["platform"] = map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{md},
	})
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	ow := tar.NewWriter(f)
	file := func(path string, b []byte) error {
		if err := ow.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := ow.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", index); err != nil {
		return err
	}
	for d, b := range blobs {
		if err := file("blobs/sha256/"+d[len("sha256:"):], b); err != nil {
			return err
		}
	}
	if err := ow.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return f.Close()
}
