// Package topology tells where a container engine runs relative to
// layerprobe: on this host (its data root is on this machine's disks), or
// in a virtual machine (Docker Desktop, Lima, Colima, OrbStack, Rancher
// Desktop, Podman machine), whose data root, volumes and writable layers
// are on the VM's disk and whose bind mounts come through the VM's file
// sharing. The answer changes what layerprobe compares: on the host every
// target is on the data root's file system; in a VM every ratio is against
// the host's native disk.
//
// The package only decides from what it is given (the engine's answers,
// the socket's path, what this host sees), so recorded engine answers test
// it as well as live ones.
package topology

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Kind is an engine's topology.
type Kind string

// Topologies.
const (
	// Host: the engine runs on this host; every target is on its data
	// root's file system and the same-file-system rule holds.
	Host Kind = "host"
	// VM: the engine runs in a virtual machine; host is this host's native
	// disk, bind goes through the VM's file sharing, volume and container
	// are on the VM's disk.
	VM Kind = "vm"
)

// Kinds a configuration may name (engines[].topology); "" detects.
var Kinds = []Kind{Host, VM}

// Products: the VM an engine runs in, as detected.
const (
	DockerDesktop  = "docker-desktop"
	Lima           = "lima"
	Colima         = "colima"
	OrbStack       = "orbstack"
	RancherDesktop = "rancher-desktop"
	PodmanMachine  = "podman-machine"
)

// Input is what detection looks at.
type Input struct {
	// Forced is the configured topology (engines[].topology); "" detects.
	Forced Kind
	// Endpoint is the engine's address as configured (unix:///path, a bare
	// path, tcp://...).
	Endpoint string
	// The engine's own answers (docker info): OperatingSystem, Name (the
	// engine's host name), KernelVersion.
	OperatingSystem string
	EngineHostname  string
	KernelVersion   string
	// GOOS is this host's operating system: an engine that answers from
	// anything but a Linux host here runs in a VM.
	GOOS string
	// DataRootVisible says the engine's data root exists on this host.
	// LocalKernel and LocalHostname are this host's (uname -r, hostname):
	// a data root that is not visible here belongs to another kernel when
	// either differs (an agent in a container that lacks the data root's
	// mount shares the kernel, and usually the host name).
	DataRootVisible bool
	LocalKernel     string
	LocalHostname   string
}

// Result is the detected topology, the VM product when known, and the
// evidence, for the run's output and the logs.
type Result struct {
	Kind    Kind
	Product string // one of the product constants, or "" (unknown VM, or Host)
	Reason  string
}

// Detect decides an engine's topology. A configured topology wins; then the
// engine's and the socket's signs of a known VM product; then the generic
// test: the engine, on a local unix socket, answers from another kernel,
// or its data root is not visible here and it answers from another host
// name (a tcp:// or ssh://
// engine is another machine, not a VM sharing this host's directories).
// Everything else is Host, where the
// same-file-system rule applies (an engine whose data root is merely not
// mounted where layerprobe runs stays a host engine and fails that check).
func Detect(in Input) Result {
	product, why := productOf(in)
	switch in.Forced {
	case Host:
		return Result{Kind: Host, Reason: "configured topology: host"}
	case VM:
		r := Result{Kind: VM, Product: product, Reason: "configured topology: vm"}
		if why != "" {
			r.Reason += "; " + why
		}
		return r
	}
	if product != "" {
		return Result{Kind: VM, Product: product, Reason: why}
	}
	if socketPath(in.Endpoint) == "" && in.Endpoint != "" {
		// tcp:// or ssh://: another machine, whose disks are not this
		// host's to share; the data root check refuses it.
		return Result{Kind: Host, Reason: "a remote endpoint " + in.Endpoint + " is no local VM"}
	}
	if in.GOOS != "" && in.GOOS != "linux" {
		return Result{Kind: VM, Reason: fmt.Sprintf("this host runs %s: a Linux container engine answering here runs in a VM", in.GOOS)}
	}
	// Another kernel is another machine, whatever exists here: a VM's
	// /var/lib/docker has the same path as a native engine's on this host,
	// so a visible path alone proves nothing.
	if in.KernelVersion != "" && in.LocalKernel != "" && in.KernelVersion != in.LocalKernel {
		why := "the engine runs kernel %s, this host %s"
		if !in.DataRootVisible {
			why = "the engine's data root is not visible here and " + why
		}
		return Result{Kind: VM, Reason: fmt.Sprintf(why, in.KernelVersion, in.LocalKernel)}
	}
	if !in.DataRootVisible && in.EngineHostname != "" && in.LocalHostname != "" && in.EngineHostname != in.LocalHostname {
		return Result{Kind: VM, Reason: fmt.Sprintf("the engine's data root is not visible here and the engine runs on host %q, this is %q", in.EngineHostname, in.LocalHostname)}
	}
	return Result{Kind: Host, Reason: "the engine runs on this host"}
}

// productOf recognizes the VM products by what their engines answer and by
// where their sockets live; it returns the product and why, or "".
func productOf(in Input) (string, string) {
	os, name := strings.ToLower(in.OperatingSystem), strings.ToLower(in.EngineHostname)
	switch {
	case os == "docker desktop" || strings.HasPrefix(os, "docker desktop"):
		return DockerDesktop, fmt.Sprintf("docker info: OperatingSystem %q", in.OperatingSystem)
	case strings.Contains(os, "orbstack") || strings.Contains(strings.ToLower(in.KernelVersion), "orbstack"):
		return OrbStack, fmt.Sprintf("docker info: OperatingSystem %q, kernel %q", in.OperatingSystem, in.KernelVersion)
	case name == "lima-rancher-desktop":
		return RancherDesktop, fmt.Sprintf("docker info: Name %q", in.EngineHostname)
	case strings.HasPrefix(name, "lima-"):
		return Lima, fmt.Sprintf("docker info: Name %q", in.EngineHostname)
	case name == "colima" || strings.HasPrefix(name, "colima-"):
		return Colima, fmt.Sprintf("docker info: Name %q", in.EngineHostname)
	}
	if p := socketPath(in.Endpoint); p != "" {
		slash := filepath.ToSlash(p)
		base := filepath.Base(slash)
		switch {
		case strings.Contains(slash, "/.lima/") && strings.Contains(slash, "/sock/"):
			return Lima, "socket " + p
		case strings.Contains(slash, "/.colima/") || strings.Contains(slash, "/.config/colima/"):
			return Colima, "socket " + p
		case strings.Contains(slash, "/.orbstack/"):
			return OrbStack, "socket " + p
		case strings.Contains(slash, "/.rd/"):
			return RancherDesktop, "socket " + p
		case strings.Contains(slash, "/.docker/run/") || strings.Contains(slash, "/.docker/desktop/"):
			return DockerDesktop, "socket " + p
		case strings.Contains(slash, "/podman/machine/") || strings.HasPrefix(base, "podman-machine-"):
			return PodmanMachine, "socket " + p
		}
	}
	return "", ""
}

// socketPath is the file system path of a unix socket endpoint, or "".
func socketPath(endpoint string) string {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		return strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "/"):
		return endpoint
	}
	return ""
}

// HostDirHint suggests a host directory the product's VM shares writable,
// for the error that asks for one.
func HostDirHint(product string) string {
	switch product {
	case DockerDesktop:
		return "a directory under your home, which Docker Desktop shares (Settings > Resources > File sharing), e.g. ~/layerprobe"
	case Lima, RancherDesktop:
		return "a directory in a writable mount of the instance (lima.yaml mounts: writable: true), e.g. /tmp/lima/layerprobe with Lima's default template"
	case Colima:
		return "a directory under your home, which Colima mounts writable by default, e.g. ~/layerprobe"
	case OrbStack:
		return "a directory under your home or /tmp, which OrbStack shares, e.g. ~/layerprobe"
	case PodmanMachine:
		return "a directory under your home, which podman machine mounts by default, e.g. ~/layerprobe"
	}
	return "a directory the VM shares writable at the same path"
}

// Share names a file sharing mechanism from the file system type the probe
// container's mount table gives the bind mount (its fourth-from-last
// fields: /proc/self/mountinfo's fstype): 9p (Lima's and QEMU's
// virtio-9p), virtiofs, sshfs (fuse.sshfs: Lima's reverse-sshfs, Colima's
// sshfs), grpcfuse (Docker Desktop's older gRPC FUSE), fakeowner (Docker
// Desktop's layer over virtiofs), or the type itself when unknown.
func Share(fstype string) string {
	switch t := strings.ToLower(fstype); {
	case t == "9p":
		return "9p"
	case t == "virtiofs":
		return "virtiofs"
	case t == "fakeowner":
		return "virtiofs (Docker Desktop's fakeowner)"
	case t == "fuse.sshfs" || t == "sshfs":
		return "sshfs"
	case strings.Contains(t, "grpcfuse"):
		return "grpcfuse"
	case t == "":
		return "unknown"
	default:
		return t
	}
}

// MountType finds the file system type of the mount at mountpoint in a
// /proc/<pid>/mountinfo text (the last mount there wins, as the kernel
// stacks them), or "".
func MountType(mountinfo, mountpoint string) string {
	var fstype string
	for line := range strings.SplitSeq(mountinfo, "\n") {
		f := strings.Fields(line)
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		if len(f) < 10 || unescape(f[4]) != mountpoint {
			continue
		}
		for i := 6; i < len(f)-1; i++ {
			if f[i] == "-" {
				fstype = f[i+1]
				break
			}
		}
	}
	return fstype
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// Baseline says what the ratios of an engine of kind k are against.
func Baseline(k Kind) string {
	if k == VM {
		return "native host disk"
	}
	return "host directory on the data root's file system"
}
