package ops

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// ociDescriptor, ociIndex, ociManifest and ociConfig are what the test reads
// of the OCI image index, manifests and configurations.
type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		WorkingDir   string              `json:"WorkingDir"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
}

// TestReleaseImageIndex: `make release` (the build TestReleaseArtifacts
// checks) writes the agent image for linux/amd64 and linux/arm64 as an OCI
// image layout tarball. Imported into a private containerd with all
// platforms, it is one image index with exactly those two manifests, each
// configuration of its architecture and configured as
// deploy/docker/Dockerfile says; the arm64 layer holds aarch64 ELF fio and
// layerprobe binaries, fio's loader and every library fio names (read from
// the ELF headers: nothing of arm64 runs); and this machine's image runs
// `layerprobe --version` and `fio --version`.
func TestReleaseImageIndex(t *testing.T) {
	needsSystem(t)
	ctr := tool(t, "ctr")
	queue.Parallel(t)
	version := versionFile(t)
	dist := releaseDist(t)
	file := filepath.Join(dist, "layerprobe-"+version+".oci.tar")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("make release wrote no image index: %v", err)
	}
	t.Logf("%s: %.1f MiB", filepath.Base(file), float64(fi.Size())/(1<<20))

	d := testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs"})
	sock := strings.TrimPrefix(d.Host, "unix://")
	ctrCmd := func(timeout time.Duration, args ...string) cmdResult {
		t.Helper()
		return run(t, timeout, "", nil, ctr, append([]string{"-a", sock, "-n", "lprelease"}, args...)...)
	}
	// content reads a blob back from containerd's content store.
	content := func(digest string) []byte {
		t.Helper()
		cmd := exec.Command(ctr, "-a", sock, "-n", "lprelease", "content", "get", digest)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("ctr content get %s: %v\n%s", digest, err, stderr.String())
		}
		return b
	}
	start := time.Now()
	if r := ctrCmd(5*time.Minute, "images", "import", "--all-platforms", file); r.err != nil {
		t.Fatalf("ctr images import --all-platforms:\n%s", r)
	}
	t.Logf("ctr images import: %s", time.Since(start).Round(time.Second))

	// The image, by the name docker gives the docker-load tarball's.
	ref := "docker.io/library/layerprobe:" + version
	var digest string
	for line := range strings.Lines(ctrCmd(time.Minute, "images", "ls").stdout) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == ref {
			digest = f[2]
		}
	}
	if digest == "" {
		t.Fatalf("no image %s after the import:\n%s", ref, ctrCmd(time.Minute, "images", "ls").stdout)
	}
	var ix ociIndex
	if err := json.Unmarshal(content(digest), &ix); err != nil || ix.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("%s is no OCI image index (%v, media type %q)", ref, err, ix.MediaType)
	}
	want := map[string]string{"amd64": "", "arm64": "v8"}
	manifests := map[string]ociManifest{}
	for _, m := range ix.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Errorf("manifest %s: platform %+v", m.Digest, m.Platform)
			continue
		}
		arch := m.Platform.Architecture
		if v, ok := want[arch]; !ok || v != m.Platform.Variant || manifests[arch].Layers != nil {
			t.Errorf("manifest %s for linux/%s/%s: want one manifest each for linux/amd64 and linux/arm64/v8", m.Digest, arch, m.Platform.Variant)
			continue
		}
		var mf ociManifest
		if err := json.Unmarshal(content(m.Digest), &mf); err != nil || len(mf.Layers) == 0 {
			t.Fatalf("manifest %s: %v, %d layers", m.Digest, err, len(mf.Layers))
		}
		manifests[arch] = mf
		var cfg ociConfig
		if err := json.Unmarshal(content(mf.Config.Digest), &cfg); err != nil {
			t.Fatalf("config of linux/%s: %v", arch, err)
		}
		if cfg.OS != "linux" || cfg.Architecture != arch {
			t.Errorf("linux/%s manifest's configuration is for %s/%s", arch, cfg.OS, cfg.Architecture)
		}
		checkImageConfig(t, arch, cfg, version)
	}
	if len(ix.Manifests) != 2 || len(manifests) != 2 {
		t.Fatalf("image index has %d manifests for %v, want linux/amd64 and linux/arm64", len(ix.Manifests), slices.Sorted(maps.Keys(manifests)))
	}

	// The arm64 layer, read without running it.
	arm := manifests["arm64"]
	files := layerFiles(t, content(arm.Layers[len(arm.Layers)-1].Digest))
	for _, f := range []string{"usr/bin/fio", "usr/bin/layerprobe"} {
		b, ok := files[f]
		if !ok {
			t.Errorf("arm64 layer lacks %s", f)
			continue
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("arm64 %s: %v", f, err)
			continue
		}
		if ef.Machine != elf.EM_AARCH64 {
			t.Errorf("arm64 %s is for %v", f, ef.Machine)
		}
		if f != "usr/bin/fio" {
			continue
		}
		// fio's loader and libraries, where the loader looks for them.
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				interp, _ := io.ReadAll(p.Open())
				if name := strings.TrimRight(string(interp), "\x00"); !hasLayerFile(files, name) {
					t.Errorf("arm64 layer lacks fio's loader %s", name)
				}
			}
		}
		libs, err := ef.ImportedLibraries()
		if err != nil || len(libs) == 0 {
			t.Errorf("arm64 fio's libraries: %v %v", libs, err)
		}
		for _, l := range libs {
			if !hasLayerFile(files, "/usr/lib/aarch64-linux-gnu/"+l) && !hasLayerFile(files, "/usr/lib/"+l) {
				t.Errorf("arm64 layer lacks fio's library %s", l)
			}
		}
	}

	// This machine's image runs.
	if _, ok := manifests[runtime.GOARCH]; !ok {
		t.Fatalf("no manifest for this machine's linux/%s", runtime.GOARCH)
	}
	v := ctrCmd(2*time.Minute, "run", "--rm", ref, "lprelease-version", "/usr/bin/layerprobe", "--version")
	if !strings.HasPrefix(v.stdout, "layerprobe, version "+version+" ") {
		t.Errorf("layerprobe --version in the image:\n%s", v)
	}
	v = ctrCmd(2*time.Minute, "run", "--rm", ref, "lprelease-fio", "fio", "--version")
	if !strings.HasPrefix(v.stdout, "fio-") {
		t.Errorf("fio --version in the image:\n%s", v)
	}
}

// checkImageConfig compares an image configuration with what
// deploy/docker/Dockerfile sets, and the version label with VERSION.
func checkImageConfig(t *testing.T, arch string, cfg ociConfig, version string) {
	t.Helper()
	df := readFile(t, repoPath("deploy/docker/Dockerfile"))
	c := cfg.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/layerprobe"}) || !slices.Equal(c.Cmd, []string{"agent"}) ||
		c.User != "0:0" || c.WorkingDir != "/var/lib/layerprobe" {
		t.Errorf("linux/%s: entrypoint %q, cmd %q, user %q, workdir %q; want the Dockerfile's", arch, c.Entrypoint, c.Cmd, c.User, c.WorkingDir)
	}
	for _, w := range []string{`ENTRYPOINT ["/usr/bin/layerprobe"]`, `CMD ["agent"]`, "USER 0:0", "WORKDIR /var/lib/layerprobe", "EXPOSE 9811"} {
		if !strings.Contains(df, "\n"+w+"\n") {
			t.Errorf("the Dockerfile no longer says %s: update this test", w)
		}
	}
	if _, ok := c.ExposedPorts["9811/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("linux/%s: exposed ports %v, want 9811/tcp", arch, c.ExposedPorts)
	}
	labels := map[string]string{"org.opencontainers.image.version": version}
	for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)="([^"]*)"`).FindAllStringSubmatch(df, -1) {
		labels[m[1]] = m[2]
	}
	if len(labels) < 4 || !maps.Equal(c.Labels, labels) {
		t.Errorf("linux/%s: labels %v, want %v", arch, c.Labels, labels)
	}
}

// layerFiles reads a gzip-compressed layer: regular files' contents and
// symbolic links' targets (as "->target"), by path without a leading "/".
func layerFiles(t *testing.T, blob []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = b
		case tar.TypeSymlink:
			files[name] = []byte("->" + h.Linkname)
		case tar.TypeDir:
			files[name] = nil
		}
	}
	return files
}

// hasLayerFile resolves an absolute path through the layer's symbolic
// links (/lib -> usr/lib and the libraries' own) to a regular file.
func hasLayerFile(files map[string][]byte, p string) bool {
	for range 16 {
		parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
		resolved := false
		for i := range parts {
			cur := strings.Join(parts[:i+1], "/")
			b, ok := files[cur]
			if !ok {
				return false
			}
			if target, isLink := strings.CutPrefix(string(b), "->"); isLink && b != nil {
				if !path.IsAbs(target) {
					target = path.Join("/", path.Dir(cur), target)
				}
				p = path.Join(append([]string{target}, parts[i+1:]...)...)
				resolved = true
				break
			}
		}
		if !resolved {
			b := files[strings.Join(parts, "/")]
			return b != nil
		}
	}
	return false
}
