package engine

import (
	"slices"
	"strings"
	"time"
)

// Container is what the layer-write advisor needs to know about one running
// container of the user's. Everything comes from listing and inspecting:
// nothing here starts, stops, pauses or execs into a container.
type Container struct {
	ID    string
	Name  string // without the leading "/"
	Image string // the image as the user named it (Config.Image)
	// ImageID is the image's content-addressed ID.
	ImageID   string
	StartedAt time.Time
	// Pid is the container's init process in the engine host's pid
	// namespace; 0 when the engine does not say.
	Pid int
	// Driver is the storage driver of the container's writable layer;
	// UpperDir the host directory that holds it when the driver has one
	// (overlay2, fuse-overlayfs), else "".
	Driver   string
	UpperDir string
	Mounts   []Mount
	// Env holds only the environment variables asked for by name (a
	// database's data directory, say); the rest never leaves this package,
	// because containers keep secrets there.
	Env map[string]string
}

// Mount is one mount of a container.
type Mount struct {
	Type        string // volume, bind, tmpfs, ...
	Name        string // a volume's name
	Source      string // host path of a bind, or of a local volume's data
	Destination string // path inside the container
	Driver      string // volume driver (local, ...)
	RW          bool
}

// PickEnv keeps the variables named in names of a container's environment
// (KEY=value entries); nil when it has none of them. The rest is never
// copied: containers keep secrets there.
func PickEnv(environ, names []string) map[string]string {
	var out map[string]string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(names, k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
