package topology

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorded is one engine's answer as recorded in testdata/*.json: the
// fields of `docker info` detection reads, the socket the engine was
// reached through, and the topology and product it must yield.
type recorded struct {
	Endpoint string `json:"endpoint"`
	Info     struct {
		OperatingSystem string
		Name            string
		KernelVersion   string
		DockerRootDir   string
	} `json:"info"`
	GOOS        string `json:"goos"`
	WantKind    Kind   `json:"want_kind"`
	WantProduct string `json:"want_product"`
}

// Every recorded engine answer yields its topology and product: the VM
// products from their docker info or their socket, the engines on a Linux
// host as host engines.
func TestDetectRecorded(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) < 6 {
		t.Fatalf("recorded engine answers: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var r recorded
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			in := Input{Endpoint: r.Endpoint, OperatingSystem: r.Info.OperatingSystem, EngineHostname: r.Info.Name,
				KernelVersion: r.Info.KernelVersion, GOOS: r.GOOS,
				// What the recording's host saw: a VM's data root is not
				// on it; a host engine's is.
				DataRootVisible: r.WantKind == Host, LocalKernel: "6.1.0-28-amd64", LocalHostname: "workstation"}
			if r.WantKind == Host {
				in.LocalKernel, in.LocalHostname = r.Info.KernelVersion, r.Info.Name
			}
			got := Detect(in)
			if got.Kind != r.WantKind || got.Product != r.WantProduct {
				t.Errorf("Detect = %+v, want %s %q", got, r.WantKind, r.WantProduct)
			}
			if got.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}

// The generic test, with no product sign: an engine that answers from
// another kernel is a VM's, even where its data root's path exists here
// too; a data root not visible here is a VM's also when the engine answers
// from another host name.
// An agent in a container that lacks the data root's mount (same kernel,
// same host name) stays a host engine, which the same-file-system check
// then refuses.
func TestDetectGeneric(t *testing.T) {
	base := Input{Endpoint: "unix:///tmp/x/docker.sock", OperatingSystem: "Debian GNU/Linux 12 (bookworm)",
		EngineHostname: "box", KernelVersion: "6.1.0-50-amd64", GOOS: "linux", LocalKernel: "6.1.0-50-amd64", LocalHostname: "box"}
	for _, tc := range []struct {
		name string
		mod  func(*Input)
		want Kind
	}{
		{"visible", func(in *Input) { in.DataRootVisible = true }, Host},
		{"not visible, same kernel and host", func(*Input) {}, Host},
		{"not visible, other kernel", func(in *Input) { in.KernelVersion = "6.12.0" }, VM},
		{"not visible, other host name", func(in *Input) { in.EngineHostname = "lpvm" }, VM},
		// A VM's /var/lib/docker beside a native engine's on this host.
		{"visible, other kernel", func(in *Input) { in.DataRootVisible, in.KernelVersion = true, "6.12.0" }, VM},
		{"visible, other host name", func(in *Input) { in.DataRootVisible, in.EngineHostname = true, "lpvm" }, Host},
		{"darwin", func(in *Input) { in.GOOS, in.DataRootVisible = "darwin", true }, VM},
		{"remote tcp engine, other kernel", func(in *Input) { in.Endpoint, in.KernelVersion = "tcp://10.0.0.5:2376", "6.12.0" }, Host},
		{"remote ssh engine, other host", func(in *Input) { in.Endpoint, in.EngineHostname = "ssh://me@build-02", "build-02" }, Host},
		{"forced host over a product", func(in *Input) { in.Forced, in.OperatingSystem = Host, "Docker Desktop" }, Host},
		{"forced vm", func(in *Input) { in.Forced, in.DataRootVisible = VM, true }, VM},
	} {
		in := base
		tc.mod(&in)
		if got := Detect(in); got.Kind != tc.want {
			t.Errorf("%s: Detect = %+v, want %s", tc.name, got, tc.want)
		}
	}
}

// The bind mount's file system type in a probe container's mountinfo names
// the VM's file sharing. The lines are recorded from containers of a Lima
// 9p instance, Docker Desktop (virtiofs and gRPC FUSE), Colima (sshfs) and
// a Linux host's engine.
func TestMountTypeAndShare(t *testing.T) {
	const mi = `1022 990 0:84 / / rw,relatime master:513 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work
1023 1022 0:87 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1030 1022 0:31 /tmp/lima/layerprobe /lp/bind rw,relatime - 9p mount0 rw,sync,dirsync,access=client,msize=131072,trans=virtio
1031 1022 254:1 /docker/volumes/lp/_data /lp/volume rw,relatime master:1 - ext4 /dev/vda1 rw
1032 1022 0:45 /Users/me/lp\040dir /lp/with\040space rw,nosuid,nodev,relatime - fakeowner /run/host_mark/Users rw,fakeowner
`
	for _, tc := range []struct{ mp, fstype, share string }{
		{"/lp/bind", "9p", "9p"},
		{"/lp/volume", "ext4", "ext4"},
		{"/lp/with space", "fakeowner", "virtiofs (Docker Desktop's fakeowner)"},
		{"/lp/missing", "", "unknown"},
	} {
		got := MountType(mi, tc.mp)
		if got != tc.fstype {
			t.Errorf("MountType(%s) = %q, want %q", tc.mp, got, tc.fstype)
		}
		if s := Share(got); s != tc.share {
			t.Errorf("Share(%q) = %q, want %q", got, s, tc.share)
		}
	}
	for fstype, want := range map[string]string{"virtiofs": "virtiofs", "fuse.sshfs": "sshfs", "fuse.grpcfuse": "grpcfuse", "grpcfuse": "grpcfuse"} {
		if got := Share(fstype); got != want {
			t.Errorf("Share(%q) = %q, want %q", fstype, got, want)
		}
	}
}

// Every product has a hint that names a directory, and the baseline says
// "native host disk" for a VM only.
func TestHintsAndBaseline(t *testing.T) {
	for _, p := range []string{DockerDesktop, Lima, Colima, OrbStack, RancherDesktop, PodmanMachine, ""} {
		if h := HostDirHint(p); !strings.Contains(h, "director") {
			t.Errorf("HostDirHint(%q) = %q", p, h)
		}
	}
	if Baseline(VM) != "native host disk" || Baseline(Host) == Baseline(VM) {
		t.Errorf("baselines: vm %q, host %q", Baseline(VM), Baseline(Host))
	}
}
