package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// recordedEngine serves a directory of recorded engine answers (see
// testdata/README.md) the way dockerd does, so the real moby client talks
// to it. Requests it does not know get a 404 like dockerd's.
type recordedEngine struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string // request paths, to check the negotiated API version
	// extra handles paths beyond /_ping, /version and /info.
	extra map[string]http.HandlerFunc
}

var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

func serveRecorded(t *testing.T, dir string, extra map[string]http.HandlerFunc) *recordedEngine {
	t.Helper()
	var ping struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := json.Unmarshal(read("ping.json"), &ping); err != nil {
		t.Fatalf("%s/ping.json: %v", dir, err)
	}
	version, info := read("version.json"), read("info.json")
	re := &recordedEngine{extra: extra}
	re.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		re.mu.Lock()
		re.paths = append(re.paths, r.Method+" "+r.URL.Path)
		re.mu.Unlock()
		p := versionPrefix.ReplaceAllString(r.URL.Path, "")
		if p == "/_ping" {
			for k, v := range ping.Headers {
				w.Header().Set(k, v)
			}
			w.WriteHeader(ping.Status)
			if r.Method != http.MethodHead {
				io.WriteString(w, ping.Body)
			}
			return
		}
		var body []byte
		switch p {
		case "/version":
			body = version
		case "/info":
			body = info
		default:
			if h, ok := re.extra[r.Method+" "+p]; ok {
				h(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"page not found"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Api-Version", ping.Headers["Api-Version"])
		w.Write(body)
	}))
	t.Cleanup(re.Close)
	return re
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (re *recordedEngine) requests() []string {
	re.mu.Lock()
	defer re.mu.Unlock()
	return append([]string(nil), re.paths...)
}

func (re *recordedEngine) host() string {
	return "tcp://" + re.Listener.Addr().String()
}

func TestInfoRecordedEngines(t *testing.T) {
	// Data roots of engines that do not run here, and what statfs would
	// say about them on their hosts.
	fakeFS := map[string]string{
		"/var/lib/docker":                            "xfs",
		"/home/user/.local/share/docker":             "extfs",
		"/var/lib/containers/storage":                "extfs",
		"/home/user/.local/share/containers/storage": "extfs",
	}
	tests := []struct {
		dir        string
		api        string // negotiated API version
		want       engine.Info
		noteSubstr string
	}{
		{
			dir: "docker-20.10-overlay2", api: "1.41",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "overlay2", DriverClass: engine.DriverSupported,
				BackingFS: "extfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-20.10-btrfs", api: "1.41",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "btrfs", DriverClass: engine.DriverSupported,
				BackingFS: "btrfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			// vfs reports no DriverStatus: the data root is statfs'ed.
			dir: "docker-20.10-vfs", api: "1.41",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "vfs", DriverClass: engine.DriverSupported,
				BackingFS: "xfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-20.10-zfs", api: "1.41",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "zfs", DriverClass: engine.DriverSupported,
				BackingFS: "zfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				Zpool: "rpool", ZFSDataset: "rpool/var/lib/docker",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-29-containerd-overlayfs", api: "1.52",
			want: engine.Info{Runtime: "docker", ServerVersion: "29.1.3", APIVersion: "1.52", Driver: "overlayfs", DriverClass: engine.DriverSupported,
				BackingFS: "xfs", DataRoot: "/var/lib/docker", ImageStore: "containerd",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-20.10-devicemapper", api: "1.41", noteSubstr: "removed in Docker Engine 25",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "devicemapper", DriverClass: engine.DriverDeprecated,
				BackingFS: "xfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-20.10-aufs", api: "1.41", noteSubstr: "aufs is deprecated",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "aufs", DriverClass: engine.DriverDeprecated,
				BackingFS: "extfs", DataRoot: "/var/lib/docker", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			dir: "docker-20.10-rootless-fuse-overlayfs", api: "1.41",
			want: engine.Info{Runtime: "docker", ServerVersion: "20.10.24+dfsg1", APIVersion: "1.41", Driver: "fuse-overlayfs", DriverClass: engine.DriverSupported,
				BackingFS: "extfs", DataRoot: "/home/user/.local/share/docker", ImageStore: "graphdriver", Rootless: true,
				KernelVersion: "6.18.44-fc-v769", OS: "Debian GNU/Linux 12 (bookworm)"},
		},
		{
			// Podman's Docker-compatible API: its overlay driver is
			// containers/storage's, not Docker's legacy overlay.
			dir: "podman-4.3-overlay", api: "1.41",
			want: engine.Info{Runtime: "podman", ServerVersion: "4.3.1", APIVersion: "1.41", Driver: "overlay", DriverClass: engine.DriverSupported,
				BackingFS: "extfs", DataRoot: "/var/lib/containers/storage", ImageStore: "graphdriver",
				KernelVersion: "6.18.44-fc-v782", OS: "debian"},
		},
		{
			// Rootless Podman 4.3 says so only in its own "Rootless"
			// field, not in SecurityOptions.
			dir: "podman-4.3-rootless-vfs", api: "1.41",
			want: engine.Info{Runtime: "podman", ServerVersion: "4.3.1", APIVersion: "1.41", Driver: "vfs", DriverClass: engine.DriverSupported,
				BackingFS: "extfs", DataRoot: "/home/user/.local/share/containers/storage", ImageStore: "graphdriver", Rootless: true,
				KernelVersion: "6.18.44-fc-v782", OS: "debian"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			re := serveRecorded(t, filepath.Join("testdata", tt.dir), nil)
			c, err := New("rec", re.host(), testharness.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.fsName = func(p string) (string, error) {
				if fs, ok := fakeFS[p]; ok {
					return fs, nil
				}
				return "", errors.New("no such data root here")
			}
			got, err := c.Info(context.Background())
			if err != nil {
				t.Fatalf("Info: %v", err)
			}
			want := tt.want
			want.Name, want.Endpoint = "rec", re.host()
			// Hostname is docker info's Name: every answer here was
			// recorded on the development machine, whose host name is vm.
			want.Hostname = "vm"
			if tt.noteSubstr == "" {
				if got.DriverNote != "" {
					t.Errorf("DriverNote = %q, want none", got.DriverNote)
				}
			} else if !strings.Contains(got.DriverNote, tt.noteSubstr) || !strings.Contains(got.DriverNote, "overlay2") {
				t.Errorf("DriverNote = %q, want it to mention %q and overlay2", got.DriverNote, tt.noteSubstr)
			}
			want.DriverNote = got.DriverNote
			if got != want {
				t.Errorf("Info() =\n%+v\nwant\n%+v", got, want)
			}
			// Negotiation: the client must use the engine's version
			// (never pinned), for every call after the ping.
			for _, r := range re.requests() {
				if strings.HasSuffix(r, "/info") && !strings.Contains(r, "/v"+tt.api+"/") {
					t.Errorf("request %q, want API version %s", r, tt.api)
				}
			}
		})
	}
}

func TestClassifyDriver(t *testing.T) {
	for _, tt := range []struct {
		runtime, driver string
		want            engine.DriverClass
	}{
		{"docker", "overlay2", engine.DriverSupported}, {"docker", "overlayfs", engine.DriverSupported},
		{"docker", "btrfs", engine.DriverSupported}, {"docker", "zfs", engine.DriverSupported},
		{"docker", "vfs", engine.DriverSupported}, {"docker", "fuse-overlayfs", engine.DriverSupported},
		{"docker", "devicemapper", engine.DriverDeprecated}, {"docker", "aufs", engine.DriverDeprecated},
		// Docker's legacy overlay, removed in Engine 24; Podman's current one.
		{"docker", "overlay", engine.DriverDeprecated}, {"podman", "overlay", engine.DriverSupported},
		{"podman", "vfs", engine.DriverSupported}, {"podman", "btrfs", engine.DriverSupported},
		{"docker", "windowsfilter", engine.DriverUnknown}, {"docker", "", engine.DriverUnknown},
	} {
		class, note := engine.ClassifyDriver(tt.runtime, tt.driver)
		if class != tt.want {
			t.Errorf("ClassifyDriver(%q, %q) = %q, want %q", tt.runtime, tt.driver, class, tt.want)
		}
		if (class == engine.DriverSupported) != (note == "") {
			t.Errorf("ClassifyDriver(%q, %q): note %q; want a note exactly for unsupported drivers", tt.runtime, tt.driver, note)
		}
	}
}

// TestUnreachable checks the one-line error for an engine that is not
// there: a missing socket and a socket nobody listens on.
func TestUnreachable(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "lpeng") // short: unix socket path limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	dead := filepath.Join(dir, "dead.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the socket file stays, nobody accepts: connection refused

	for _, tc := range []struct{ sock, cause string }{
		{filepath.Join(dir, "missing.sock"), "no such socket"},
		{dead, "connection refused"},
	} {
		host := "unix://" + tc.sock
		c, err := New("gone", host, testharness.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = c.Info(ctx)
		cancel()
		c.Close()
		if !errors.Is(err, engine.ErrUnreachable) {
			t.Fatalf("Info on %s: %v, want ErrUnreachable", host, err)
		}
		want := "cannot reach Docker engine at " + host + ": "
		msg := err.Error()
		t.Logf("unreachable: %s", msg)
		if !strings.HasPrefix(msg, want) || !strings.Contains(msg, tc.cause) || strings.Contains(msg, "\n") {
			t.Errorf("error = %q, want one line starting %q naming %q", msg, want, tc.cause)
		}
	}
}

// TestEndpointFromEnv: an empty host means DOCKER_HOST, else the default
// socket (only its name is checked: the machine's own daemon, if any, is
// not touched).
func TestEndpointFromEnv(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	c, err := New("default", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoint(); got != "unix:///var/run/docker.sock" {
		t.Errorf("Endpoint() without DOCKER_HOST = %q, want unix:///var/run/docker.sock", got)
	}
	c.Close()

	host := "unix:///tmp/lp-no-such-dir/docker.sock"
	t.Setenv("DOCKER_HOST", host)
	c, err = New("env", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Endpoint(); got != host {
		t.Errorf("Endpoint() = %q, want DOCKER_HOST %q", got, host)
	}
	_, err = c.Info(context.Background())
	if !errors.Is(err, engine.ErrUnreachable) || !strings.Contains(err.Error(), host) {
		t.Errorf("Info = %v, want ErrUnreachable naming %s", err, host)
	}
}

// TestEnsureImageStreamError: the engine answers 200 and reports the
// failure inside the JSON stream; EnsureImage must not take that as success.
func TestEnsureImageStreamError(t *testing.T) {
	var gotChanges []string
	var gotRef string
	re := serveRecorded(t, filepath.Join("testdata", "docker-20.10-overlay2"), map[string]http.HandlerFunc{
		"GET /images/json": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "[]")
		},
		"POST /images/create": func(w http.ResponseWriter, r *http.Request) {
			gotChanges = r.URL.Query()["changes"]
			gotRef = r.URL.Query().Get("repo")
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"Importing"}`+"\n")
			io.WriteString(w, `{"errorDetail":{"message":"failed to register layer: no space left on device"},"error":"failed to register layer: no space left on device"}`+"\n")
		},
	})
	c, err := New("rec", re.host(), testharness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	im := &probeimage.Image{
		Digest: strings.Repeat("ab", 32),
		Files: []probeimage.File{
			{Path: "/etc", Mode: os.ModeDir | 0o755},
			// A correct hash: WriteTar succeeds, only the engine fails.
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\n"), Size: 10, SHA256: sha256Hex("root:x:0:\n")},
		},
	}

	_, err = c.EnsureImage(context.Background(), im, "lp-test-1-2")
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("EnsureImage = %v, want the error reported in the stream", err)
	}
	if gotRef != "layerprobe-probe:abababababab" {
		t.Errorf("import repo = %q, want layerprobe-probe:abababababab", gotRef)
	}
	// One label per LABEL: Podman reads the first key and takes the rest of
	// the line as its value.
	wantChanges := []string{
		"LABEL io.layerprobe.managed=true",
		"LABEL io.layerprobe.role=image",
		"LABEL io.layerprobe.digest=" + im.Digest,
		"LABEL io.layerprobe.owner=lp-test-1-2",
		`ENTRYPOINT ["/lp/bin/layerprobe","probe-helper","idle"]`,
	}
	if strings.Join(gotChanges, "\n") != strings.Join(wantChanges, "\n") {
		t.Errorf("changes = %q, want %q", gotChanges, wantChanges)
	}
}

// TestEnsureImageWithoutLabels: an engine that drops import-time labels
// (the recorded Podman answers, with an image store that keeps none) still
// gets its probe image found again, by reference and layer diff ID, and an
// image under the probe's tag that is not the probe image is replaced.
func TestEnsureImageWithoutLabels(t *testing.T) {
	im := &probeimage.Image{
		Digest: strings.Repeat("cd", 32),
		Files: []probeimage.File{
			{Path: "/etc", Mode: os.ModeDir | 0o755},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\n"), Size: 10, SHA256: sha256Hex("root:x:0:\n")},
		},
	}
	diffID, err := im.LayerDigest()
	if err != nil {
		t.Fatal(err)
	}
	ref := "layerprobe-probe:" + im.Digest[:12]
	for _, tc := range []struct {
		name       string
		stored     string // the layer of the image under ref before the call; "" = none
		imported   string // the layer the engine reports after an import
		wantImport bool
		wantErr    string
	}{
		{name: "reused by diff ID", stored: diffID, wantImport: false},
		{name: "imported", imported: diffID, wantImport: true},
		{name: "foreign image under the tag", stored: strings.Repeat("ee", 32), imported: diffID, wantImport: true},
		{name: "import not kept", imported: strings.Repeat("ff", 32), wantImport: true, wantErr: "is not the image just imported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			layer := tc.stored
			imported := false
			inspect := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if layer == "" {
					w.WriteHeader(http.StatusNotFound)
					io.WriteString(w, `{"message":"failed to find image"}`)
					return
				}
				// Podman's spelling of the name, no labels.
				json.NewEncoder(w).Encode(map[string]any{
					"Id": "sha256:" + strings.Repeat("01", 32), "RepoTags": []string{"docker.io/library/" + ref},
					"Config": map[string]any{"Labels": nil},
					"RootFS": map[string]any{"Type": "layers", "Layers": []string{"sha256:" + layer}},
				})
			}
			re := serveRecorded(t, filepath.Join("testdata", "podman-4.3-overlay"), map[string]http.HandlerFunc{
				"GET /images/" + ref + "/json": inspect,
				"GET /images/json": func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, "[]") // no labels: the label filter finds nothing
				},
				// Podman: every probe image is loaded, not imported.
				"POST /images/load": func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					mu.Lock()
					imported, layer = true, tc.imported
					mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"stream":"Loaded image: `+ref+`"}`+"\n")
				},
			})
			c, err := New("rec", re.host(), testharness.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := c.EnsureImage(context.Background(), im, "lp-test-1-2")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("EnsureImage = %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
			} else if err != nil || got != ref {
				t.Fatalf("EnsureImage = %q, %v; want %q", got, err, ref)
			}
			if imported != tc.wantImport {
				t.Errorf("imported = %v, want %v", imported, tc.wantImport)
			}
		})
	}
}

// TestLayerDir: where the writable layer lies, from an inspect answer's
// GraphDriver data. overlay2's is recorded from the private daemons; zfs's
// is what moby's zfs driver GetMetadata returns (daemon/graphdriver/zfs:
// Mountpoint <data root>/zfs/graph/<id>, Dataset <parent dataset>/<id>),
// reconstructed since this machine has no zfs.
func TestLayerDir(t *testing.T) {
	const id = "5d1f9b2c7a3e4f6081b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	for _, tc := range []struct {
		driver string
		data   map[string]string
		want   string
	}{
		{"overlay2", map[string]string{
			"LowerDir":  "/var/lib/docker/overlay2/" + id + "-init/diff:/var/lib/docker/overlay2/9a8b/diff",
			"MergedDir": "/var/lib/docker/overlay2/" + id + "/merged",
			"UpperDir":  "/var/lib/docker/overlay2/" + id + "/diff",
			"WorkDir":   "/var/lib/docker/overlay2/" + id + "/work",
		}, "/var/lib/docker/overlay2/" + id + "/diff"},
		{"zfs", map[string]string{
			"Dataset":    "rpool/var/lib/docker/" + id,
			"Mountpoint": "/var/lib/docker/zfs/graph/" + id,
		}, "/var/lib/docker/zfs/graph/" + id},
		{"btrfs", nil, ""},
	} {
		if got := layerDir(tc.data); got != tc.want {
			t.Errorf("%s: layerDir = %q, want %q", tc.driver, got, tc.want)
		}
	}
}

// TestImagePathsAgree: the image puts fio, the helper and the mount points
// where the container expects them.
func TestImagePathsAgree(t *testing.T) {
	if probeimage.FioPath != engine.ContainerFio || probeimage.HelperPath != engine.ContainerHelper {
		t.Errorf("probeimage paths %s, %s; engine expects %s, %s", probeimage.FioPath, probeimage.HelperPath, engine.ContainerFio, engine.ContainerHelper)
	}
}
