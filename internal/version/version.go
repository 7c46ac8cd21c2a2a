// Package version holds build information. `make build` and `make release`
// set it with -ldflags from the repository's VERSION file, the commit and
// the build date; a plain `go build` falls back to the module build info.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	promversion "github.com/prometheus/common/version"
)

// Version, Revision and BuildDate are set at build time:
//
//	go build -ldflags "-X github.com/layerprobe/layerprobe/internal/version.Version=$(cat VERSION) \
//	  -X github.com/layerprobe/layerprobe/internal/version.Revision=$(git rev-parse --short=12 HEAD) \
//	  -X github.com/layerprobe/layerprobe/internal/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
var (
	Version   = ""
	Revision  = ""
	BuildDate = ""
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

// buildTags are the build tags the binary was built with, "" if none.
func buildTags() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				return s.Value
			}
		}
	}
	return ""
}

// String is what `layerprobe --version` and `layerprobe version` print, in
// the Prometheus exporters' shape: the version and revision on the first
// line, then the build date, Go version, platform and build tags.
func String() string {
	v, r, g := Info()
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "layerprobe, version %s (revision: %s)\n", v, orUnknown(r))
	fmt.Fprintf(&b, "  build date:       %s\n", orUnknown(BuildDate))
	fmt.Fprintf(&b, "  go version:       %s\n", g)
	fmt.Fprintf(&b, "  platform:         %s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "  tags:             %s", orUnknown(buildTags()))
	return b.String()
}

// init hands the version to prometheus/common/version, which client_golang's
// version collector (layerprobe_build_info) reads, so that the metric and
// `layerprobe version` always agree.
func init() {
	promversion.Version, promversion.Revision, _ = Info()
	promversion.BuildDate = BuildDate
}
