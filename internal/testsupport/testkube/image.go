package testkube

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// writeBinaryImage writes an OCI image layout tarball (what `ctr images
// import` reads) of an image named name whose one layer is the file at
// bin as /<entry>, its entrypoint.
func writeBinaryImage(out, name, bin, entry string) error {
	content, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: entry, Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(content); err != nil {
		return err
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
		"config":       map[string]any{"Entrypoint": []string{"/" + entry}},
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
