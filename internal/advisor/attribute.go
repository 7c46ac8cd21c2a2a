package advisor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
)

// minLanding is the least a place must have been written to be named as
// where a container's writes land: below it, log lines and pid files.
const minLanding = 1 << 20

// Advice kinds.
const (
	AdviceDatabaseInLayer = "database_in_layer"
	AdviceLayerWrites     = "layer_writes"
	// AdviceSmallFiles: the layer holds many files, and the smallfiles
	// workload says what file operations in the layer cost here.
	AdviceSmallFiles = "layer_small_files"
)

// landings says where a container's writes went, largest first: its layer
// (what it holds), and every mount with at least minLanding in files
// modified since the container started. unattributed is what the block
// writes hold beyond those: rewrites, files written and deleted, metadata,
// unmeasured mounts; nil without block writes.
func landings(layer api.LayerWrites, block *api.BlockWrites, mounts []api.MountWrites) (out []api.Landing, unattributed *int64) {
	if layer.Bytes >= minLanding {
		out = append(out, api.Landing{Where: "layer", Bytes: layer.Bytes, Exact: layer.Exact})
	}
	var elsewhere int64
	for _, m := range mounts {
		if m.ModifiedBytes == nil {
			continue
		}
		elsewhere += *m.ModifiedBytes
		if *m.ModifiedBytes >= minLanding {
			out = append(out, api.Landing{Where: m.Type, Name: m.Name, Source: m.Source, Destination: m.Destination,
				Bytes: *m.ModifiedBytes})
		}
	}
	slices.SortStableFunc(out, func(a, b api.Landing) int { return cmp.Compare(b.Bytes, a.Bytes) })
	if block != nil {
		u := max(block.Bytes-layer.Bytes-elsewhere, 0)
		unattributed = &u
	}
	return out, unattributed
}

// adviceFor is the advice for one container: a database whose data
// directory is in the layer, and layer writes of at least minBytes, with
// their cost when one is known.
func adviceFor(c *api.Container, minBytes int64) []api.Advice {
	var out []api.Advice
	var dataDirs []string
	if db := c.Database; db != nil && db.InLayer && len(db.DataDirs) > 0 {
		dir := db.DataDirs[0]
		dataDirs = db.DataDirs
		msg := fmt.Sprintf("%s keeps its data in %s, which is on no volume: it lands in the writable layer. Mount a volume at %s (docker run -v NAME:%s ...)",
			db.Name, dir, dir, dir)
		if c.Layer.Bytes >= minBytes {
			msg += fmt.Sprintf("; it has written %s there", report.FormatBytes(c.Layer.Bytes)) + costText(c.Cost)
		}
		out = append(out, api.Advice{Kind: AdviceDatabaseInLayer, Path: dir, Message: msg + "."})
	}
	if c.Layer.Bytes < minBytes {
		return out
	}
	if len(c.Layer.TopPaths) == 0 {
		if len(out) == 0 {
			out = append(out, api.Advice{Kind: AdviceLayerWrites, Message: fmt.Sprintf(
				"%s written into the writable layer; `docker diff %s` lists the files: mount a volume where they are%s.",
				report.FormatBytes(c.Layer.Bytes), c.Name, costText(c.Cost))})
		}
		return out
	}
	for _, p := range c.Layer.TopPaths {
		if p.Bytes < minBytes/2 || covered(p.Path, dataDirs) {
			continue
		}
		out = append(out, api.Advice{Kind: AdviceLayerWrites, Path: p.Path, Message: fmt.Sprintf(
			"%s of the writable layer is under %s: mount a volume at %s%s.",
			report.FormatBytes(p.Bytes), p.Path, p.Path, costText(c.Cost))})
		break // one place at a time: the largest
	}
	return out
}

// ManyFiles is how many files and directories in a writable layer make
// the small-file advice worth giving: a package tree's worth.
const ManyFiles = 1000

// smallFilesAdvice says what a layer of many files cost on this host from
// the smallfiles workload's layer-versus-volume overhead: its slowdown
// of file operations, and in seconds for creating the layer's entries at
// the volume's measured rate (one operation each). None for a layer of
// fewer than ManyFiles entries, or without the workload's figures.
func smallFilesAdvice(c *api.Container, overheads []api.LayerOverhead) (api.Advice, bool) {
	if c.Layer.Entries < ManyFiles {
		return api.Advice{}, false
	}
	for _, o := range overheads {
		if o.Workload != measure.SmallFiles || !(o.VolumeOpsPerSecond > 0) {
			continue
		}
		base := float64(c.Layer.Entries) / o.VolumeOpsPerSecond
		where, path := "", ""
		if len(c.Layer.TopPaths) > 0 {
			path = c.Layer.TopPaths[0].Path
			where = " (mount one at " + path + ")"
		}
		msg := fmt.Sprintf("its writable layer holds %d files and directories; on this host small-file operations "+
			"(create and write, stat, delete: the smallfiles workload) took %+.0f%% [%+.0f%% to %+.0f%%] longer in the layer than in a volume, "+
			"about %s [%s to %s] more to create that many at the volume's %.0f operations per second (negative: the layer was faster): "+
			"a package tree, a checkout or build output belongs on a volume%s.",
			c.Layer.Entries, 100*o.Slowdown, 100*o.SlowdownLow, 100*o.SlowdownHigh,
			report.FormatExtraSeconds(base*o.Slowdown), report.FormatExtraSeconds(base*o.SlowdownLow), report.FormatExtraSeconds(base*o.SlowdownHigh),
			o.VolumeOpsPerSecond, where)
		return api.Advice{Kind: AdviceSmallFiles, Path: path, Message: strings.ToUpper(msg[:1]) + msg[1:]}, true
	}
	return api.Advice{}, false
}

// costText describes a cost for an advice message; "" without one.
func costText(cost *api.LayerCost) string {
	if cost == nil {
		return ""
	}
	return fmt.Sprintf("; on this host the layer added %s [%s to %s] to writing its %s, over a volume (as the %s job; negative: the layer was faster)",
		report.FormatExtraSeconds(cost.ExtraSeconds), report.FormatExtraSeconds(cost.Low), report.FormatExtraSeconds(cost.High),
		report.FormatBytes(cost.Bytes), cost.Workload)
}

// jobFor is the measured job whose pattern a container's writes are
// assumed to follow: databases and queues fsync, everything else streams.
func jobFor(c *api.Container) measure.Workload {
	if c.Database != nil {
		return measure.Fsync
	}
	return measure.SeqWrite
}

// rank orders containers by bytes in their layer, then block writes, then
// name, and numbers them from 1.
func rank(cs []api.Container) {
	block := func(c api.Container) int64 {
		if c.BlockIO == nil {
			return -1
		}
		return c.BlockIO.Bytes
	}
	slices.SortStableFunc(cs, func(a, b api.Container) int {
		return cmp.Or(cmp.Compare(b.Layer.Bytes, a.Layer.Bytes), cmp.Compare(block(b), block(a)), cmp.Compare(a.Name, b.Name))
	})
	for i := range cs {
		cs[i].Rank = i + 1
	}
}

// Rest sums the containers that carry no series of their own. Their block
// I/O has no sum: a sum over a changing set of containers can fall without
// a reset, so no counter could carry it.
type Rest struct {
	Containers int
	LayerBytes int64
}

// TopN splits ranked containers into the first n, which carry
// per-container metric series, and the sum of the others, so that the
// number of series stays bounded whatever runs on the host.
func TopN(cs []api.Container, n int) (top []api.Container, rest Rest) {
	n = max(n, 0)
	if len(cs) <= n {
		return cs, Rest{}
	}
	for _, c := range cs[n:] {
		rest.Containers++
		rest.LayerBytes += c.Layer.Bytes
	}
	return cs[:n], rest
}
