// Package version holds build information, set with -ldflags at release
// time and read from the module build info otherwise.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	promversion "github.com/prometheus/common/version"
)

// Version and Revision are set at build time:
//
//	go build -ldflags "-X github.com/layerprobe/layerprobe/internal/version.Version=v0.1.0"
var (
	Version  = ""
	Revision = ""
)

// Info returns the version, the VCS revision and the Go version.
func Info() (version, revision, goVersion string) {
	version, revision = Version, Revision
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && revision == "" {
				revision = s.Value
				if len(revision) > 12 {
					revision = revision[:12]
				}
			}
		}
	}
	if version == "" {
		version = "devel"
	}
	return version, revision, runtime.Version()
}

// String is the one-line version.
func String() string {
	v, r, g := Info()
	if r == "" {
		return fmt.Sprintf("layerprobe %s (%s)", v, g)
	}
	return fmt.Sprintf("layerprobe %s (revision %s, %s)", v, r, g)
}

// init hands the version to prometheus/common/version, which client_golang's
// version collector (layerprobe_build_info) reads, so that the metric and
// `layerprobe version` always agree.
func init() {
	promversion.Version, promversion.Revision, _ = Info()
}
