package measure

import (
	"cmp"
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// CopyUp is the cost of the first small write to a file that lives in a
// lower image layer, which overlay2 copies up whole before it changes.
type CopyUp struct {
	// Reflink tells whether the data root's file system shares extents;
	// null when the check failed.
	Reflink *bool `json:"reflink"`
	// CostSecondsPerMiB is the implied copy-up cost: the Theil-Sen slope of
	// the extra latency (container - host) over the file size. Null with
	// fewer than two sizes measured.
	CostSecondsPerMiB *float64       `json:"cost_seconds_per_mib"`
	Sizes             []CopyUpSize   `json:"sizes"`
	Samples           []CopyUpSample `json:"samples"`
}

// NewCopyUp is the copy-up record of a cold measurement's samples: their
// summary (SummarizeCopyUp) and the samples themselves, as `layerprobe
// run` and the API's detail of a cold cycle report them.
func NewCopyUp(samples []CopyUpSample, reflink *bool, confidence float64) *CopyUp {
	sizes, cost := SummarizeCopyUp(samples, confidence)
	return CopyUpOf(reflink, cost, sizes, samples)
}

// CopyUpOf is the copy-up record of a summary made already (the agent's
// window), empty lists rather than null in JSON.
func CopyUpOf(reflink *bool, costPerMiB *float64, sizes []CopyUpSize, samples []CopyUpSample) *CopyUp {
	return &CopyUp{Reflink: reflink, CostSecondsPerMiB: costPerMiB, Sizes: NonNil(sizes), Samples: NonNil(samples)}
}

// CopyUpSize summarises one file size over the rounds in which both arms
// succeeded.
type CopyUpSize struct {
	SizeBytes int64 `json:"size_bytes"`
	Rounds    int   `json:"rounds"`
	// Medians of the first write+fsync latency.
	HostSeconds      float64 `json:"host_latency_seconds"`
	ContainerSeconds float64 `json:"container_latency_seconds"`
	// Extra is the median of the per-round differences container - host,
	// with its exact confidence interval.
	ExtraSeconds float64 `json:"extra_seconds"`
	ExtraCILow   float64 `json:"extra_ci_low"`
	ExtraCIHigh  float64 `json:"extra_ci_high"`
	Coverage     float64 `json:"coverage"`
	// Withheld: the interval's coverage is below the confidence (fewer
	// than 6 rounds for 95%), so its bounds are NaN (null in JSON), as
	// Overhead.Withheld.
	Withheld bool `json:"interval_withheld,omitempty"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (c CopyUpSize) MarshalJSON() ([]byte, error) { return marshalFigures(c) }

// UnmarshalJSON implements json.Unmarshaler: null figures read as NaN.
func (c *CopyUpSize) UnmarshalJSON(b []byte) error { return unmarshalFigures(b, c, false) }

// CopyUpSample is one timed first write: a file of SizeBytes on Target
// (host or container) in one round.
type CopyUpSample struct {
	Round     int     `json:"round"`
	Target    Target  `json:"target"`
	SizeBytes int64   `json:"size_bytes"`
	Seconds   float64 `json:"seconds"` // 0 when Error is set
	Error     string  `json:"error,omitempty"`
}

// OK reports whether the sample is a measurement.
func (s CopyUpSample) OK() bool { return s.Error == "" && s.Seconds > 0 }

// SummarizeCopyUp pairs host and container samples by round and size.
func SummarizeCopyUp(samples []CopyUpSample, confidence float64) (sizes []CopyUpSize, costPerMiB *float64) {
	type key struct {
		round int
		size  int64
	}
	host := map[key]float64{}
	for _, s := range samples {
		if s.Target == TargetHost && s.OK() {
			host[key{s.Round, s.SizeBytes}] = s.Seconds
		}
	}
	type pair struct{ h, c float64 }
	bySize := map[int64][]pair{}
	var xs, ys []float64
	for _, s := range samples {
		if s.Target != TargetContainer || !s.OK() {
			continue
		}
		h, ok := host[key{s.Round, s.SizeBytes}]
		if !ok {
			continue
		}
		bySize[s.SizeBytes] = append(bySize[s.SizeBytes], pair{h, s.Seconds})
		xs = append(xs, float64(s.SizeBytes)/(1<<20))
		ys = append(ys, s.Seconds-h)
	}
	for size, ps := range bySize {
		hs, cs, ds := make([]float64, len(ps)), make([]float64, len(ps)), make([]float64, len(ps))
		for i, p := range ps {
			hs[i], cs[i], ds[i] = p.h, p.c, p.c-p.h
		}
		ci := stats.MedianCI(ds, confidence)
		sz := CopyUpSize{SizeBytes: size, Rounds: len(ps),
			HostSeconds: stats.Median(hs), ContainerSeconds: stats.Median(cs),
			ExtraSeconds: ci.Median, ExtraCILow: ci.Low, ExtraCIHigh: ci.High, Coverage: ci.Coverage}
		if ci.Coverage < confidence {
			// As withhold does for an overhead: no interval that covers less.
			sz.ExtraCILow, sz.ExtraCIHigh, sz.Withheld = math.NaN(), math.NaN(), true
		}
		sizes = append(sizes, sz)
	}
	slices.SortFunc(sizes, func(a, b CopyUpSize) int { return cmp.Compare(a.SizeBytes, b.SizeBytes) })
	if len(sizes) >= 2 {
		if slope, ok := stats.TheilSen(xs, ys); ok {
			costPerMiB = &slope
		}
	}
	return sizes, costPerMiB
}
