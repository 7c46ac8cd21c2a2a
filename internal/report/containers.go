package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// WriteContainers writes the layer-write advisor's answer for a person:
// per engine the layer's measured cost, a table of the running containers
// ranked by what they wrote into their writable layer, the advice, and
// footnotes saying which figures are exact and which are estimates.
func WriteContainers(w io.Writer, r api.ContainersResponse) error {
	ew := &errWriter{w: w}
	conf := r.Confidence
	if !(conf > 0 && conf < 1) {
		conf = measure.DefaultConfidence
	}
	for i, e := range r.Engines {
		if i > 0 {
			ew.printf("\n")
		}
		writeEngineContainers(ew, e, conf)
	}
	if ew.err != nil {
		return fmt.Errorf("write containers table: %w", ew.err)
	}
	return nil
}

func writeEngineContainers(ew *errWriter, e api.EngineContainers, conf float64) {
	ew.printf("Engine %s (%s)", e.Engine, orDash(e.Driver))
	if e.ObservedAt != nil {
		ew.printf(": %s at %s", plural(len(e.Containers), "running container"), e.ObservedAt.Format(time.RFC3339))
	}
	ew.printf("\n")
	if e.Error != "" {
		ew.printf("  ERROR: the containers could not be listed: %s\n", oneLine(e.Error))
	}
	if p := e.Pass; p != nil {
		ew.printf("  pass:  %s, %s CPU, %s read from disk, %d files and directories walked",
			formatDuration(p.DurationSeconds), formatLatency(p.CPUSeconds), formatBytes(p.ReadBytes), p.Entries)
		if p.Capped > 0 {
			ew.printf(", %s at a walk cap", plural(p.Capped, "container"))
		}
		ew.printf("\n")
	}
	if e.Error != "" && len(e.Containers) == 0 {
		return
	}
	writeLayerVsVolume(ew, e.LayerVsVolume, conf)
	if len(e.Containers) == 0 {
		if e.ObservedAt != nil {
			ew.printf("  no running containers (layerprobe's own are not listed)\n")
		}
		return
	}

	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  #\tCONTAINER\tIMAGE\tLAYER\tBLOCK WRITES\tWRITES LAND\tDATABASE\tCOST OF THE LAYER [%s CI]\n", formatPercentPlain(100*conf))
	lower := false
	for _, c := range e.Containers {
		layer := formatBytes(c.Layer.Bytes)
		switch {
		case c.Layer.Source == "none":
			layer = "-"
		case !c.Layer.Exact:
			layer, lower = ">="+layer, true
		}
		if g := c.Layer.GrowthBytes; g != nil {
			layer += fmt.Sprintf(" (%s%s in %s)", sign(*g), formatBytes(abs(*g)), formatDuration(c.Layer.GrowthSeconds))
		}
		block := "-"
		if c.BlockIO != nil {
			block = "~" + formatBytes(c.BlockIO.Bytes)
		}
		db := "-"
		if d := c.Database; d != nil {
			db = d.Name
			if d.InLayer {
				db += ": DATA IN LAYER"
			} else {
				db += ": on a volume"
			}
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Rank, c.Name, c.Image, layer, block, landingText(c), db, costCell(c.Cost))
	}
	_ = tw.Flush()

	var advice []string
	for _, c := range e.Containers {
		for _, a := range c.Advice {
			advice = append(advice, fmt.Sprintf("    %s: %s", c.Name, a.Message))
		}
	}
	if len(advice) > 0 {
		ew.printf("\n  Advice:\n%s\n", strings.Join(advice, "\n"))
	}

	ew.printf("\n  LAYER: bytes in the container's writable layer, what it wrote there since it was created net of deletions;\n")
	ew.printf("    exact (a complete walk of the driver's upper directory, or the engine's own size)")
	if lower {
		ew.printf(", except \">=\": a lower bound\n    (the walk stopped at a cap or at a directory it may not read; --output json says why)")
	}
	ew.printf(".\n")
	ew.printf("  BLOCK WRITES: \"~\" an estimate: block-device writes charged to the container's cgroup since it started; rewrites\n")
	ew.printf("    count every time; on cgroup v1 what the kernel writes out for it (background flushing, btrfs) is not counted.\n")
	ew.printf("  WRITES LAND: the layer's bytes (with the directory that holds most), and \"~\" estimates for volumes and bind\n")
	ew.printf("    mounts: the sizes of their files modified since the container started. Places under 1 MiB are left out.\n")
	ew.printf("  COST OF THE LAYER: the extra time writing the layer's bytes took over writing them to a named volume on this\n")
	ew.printf("    host (negative: the layer was faster), for the job named; the interval is the layer-vs-volume one above.\n")
}

// writeLayerVsVolume writes the layer's measured slowdown per job, marking
// intervals whose coverage is below the confidence.
func writeLayerVsVolume(ew *errWriter, ls []api.LayerOverhead, conf float64) {
	if len(ls) == 0 {
		ew.printf("  layer vs volume: not measured yet (the agent's rounds give the layer's cost; layerprobe advise reads them from --state-dir)\n")
		return
	}
	parts := make([]string, 0, len(ls))
	low := false
	for _, l := range ls {
		if l.Coverage < conf {
			low = true
			parts = append(parts, fmt.Sprintf("%s %s [no interval]%s", l.Workload, formatSlowdown(l.Slowdown), ciMarker))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s [%s to %s]", l.Workload, formatSlowdown(l.Slowdown),
			formatSlowdown(l.SlowdownLow), formatSlowdown(l.SlowdownHigh)))
	}
	ew.printf("  layer vs volume (extra time per byte written into the writable layer, %s CI): %s\n",
		formatPercentPlain(100*conf), strings.Join(parts, ", "))
	if low {
		ew.printf("    %s fewer than %d paired rounds so far: no %s interval yet\n", ciMarker, stats.MinN(conf), formatPercentPlain(100*conf))
	}
}

func formatSlowdown(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "?"
	}
	return fmt.Sprintf("%+.0f%%", 100*s)
}

// landingText lists where a container's writes went.
func landingText(c api.Container) string {
	if len(c.WritesLand) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(c.WritesLand))
	for _, l := range c.WritesLand {
		mark := ""
		if !l.Exact {
			mark = "~"
		}
		switch l.Where {
		case "layer":
			if !l.Exact {
				mark = ">=" // a walk that stopped short: a lower bound
			}
			s := "layer " + mark + formatBytes(l.Bytes)
			if len(c.Layer.TopPaths) > 0 {
				s += " (" + c.Layer.TopPaths[0].Path + ")"
			}
			parts = append(parts, s)
		default:
			name := l.Name
			if name == "" {
				name = l.Source
			}
			parts = append(parts, fmt.Sprintf("%s %s at %s %s%s", l.Where, name, l.Destination, mark, formatBytes(l.Bytes)))
		}
	}
	return strings.Join(parts, ", ")
}

func costCell(c *api.LayerCost) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%s [%s, %s] as %s", FormatExtraSeconds(c.ExtraSeconds), FormatExtraSeconds(c.Low), FormatExtraSeconds(c.High), c.Workload)
}

// plural is "1 container", "2 containers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func sign(n int64) string {
	if n < 0 {
		return "-"
	}
	return "+"
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
