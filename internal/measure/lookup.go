package measure

import (
	"cmp"
	"math"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// Lookup operations of the cold probe (LookupSample.Op).
const (
	// LookupWalk is a stat walk of the cold image's tree of small files:
	// in a fresh container, every name looked up through the image's
	// layers for the first time.
	LookupWalk = "walk"
	// LookupDirCreate is the first file created in a directory of that
	// tree: in a fresh container on overlay2, the directory and its
	// ancestors are copied up first.
	LookupDirCreate = "dir_create"
)

// LookupOps lists the lookup operations in display order.
var LookupOps = []string{LookupWalk, LookupDirCreate}

// LookupSample is one timed lookup operation on Target (host or
// container) in a cold round. For a walk, Entries is how many entries it
// stat'ed; for a create, Depth is its directory's depth in the tree.
type LookupSample struct {
	Round   int     `json:"round"`
	Target  Target  `json:"target"`
	Op      string  `json:"op"`
	Entries int     `json:"entries,omitempty"`
	Depth   int     `json:"depth,omitempty"`
	Seconds float64 `json:"seconds"` // 0 when Error is set
	Error   string  `json:"error,omitempty"`
}

// OK reports whether the sample is a measurement.
func (s LookupSample) OK() bool { return s.Error == "" && s.Seconds > 0 }

// LookupSummary is one lookup operation over the cold rounds: the medians
// of host and container (for creates, of every create in the round
// first: one figure per round and target) and the median of the
// per-round differences container - host with its exact interval.
type LookupSummary struct {
	Op               string  `json:"op"`
	Rounds           int     `json:"rounds"`
	HostSeconds      float64 `json:"host_seconds"`
	ContainerSeconds float64 `json:"container_seconds"`
	ExtraSeconds     float64 `json:"extra_seconds"`
	ExtraCILow       float64 `json:"extra_ci_low"`
	ExtraCIHigh      float64 `json:"extra_ci_high"`
	Coverage         float64 `json:"coverage"`
	// Withheld: coverage below the confidence, bounds NaN (null), as
	// Overhead.Withheld.
	Withheld bool `json:"interval_withheld,omitempty"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (l LookupSummary) MarshalJSON() ([]byte, error) { return marshalFigures(l) }

// UnmarshalJSON implements json.Unmarshaler: null figures read as NaN.
func (l *LookupSummary) UnmarshalJSON(b []byte) error { return unmarshalFigures(b, l, false) }

// Lookup is the cold probe's lookups and first creates in the image's own
// directories, beside copy-up.
type Lookup struct {
	Summaries []LookupSummary `json:"summaries"`
	Samples   []LookupSample  `json:"samples"`
}

// NewLookup is the lookup record of samples: their summaries and the
// samples themselves, empty lists rather than null in JSON.
func NewLookup(samples []LookupSample, confidence float64) *Lookup {
	return LookupOf(SummarizeLookup(samples, confidence), samples)
}

// LookupOf is the lookup record of summaries made already (the agent's
// window) and samples, empty lists rather than null in JSON.
func LookupOf(summaries []LookupSummary, samples []LookupSample) *Lookup {
	return &Lookup{Summaries: NonNil(summaries), Samples: NonNil(samples)}
}

// SummarizeLookup pairs host and container by round and operation.
func SummarizeLookup(samples []LookupSample, confidence float64) []LookupSummary {
	type key struct {
		round  int
		target Target
		op     string
	}
	per := map[key][]float64{}
	for _, s := range samples {
		if s.OK() {
			k := key{s.Round, s.Target, s.Op}
			per[k] = append(per[k], s.Seconds)
		}
	}
	var out []LookupSummary
	for _, op := range LookupOps {
		var hs, cs, ds []float64
		for k, v := range per {
			if k.op != op || k.target != TargetContainer {
				continue
			}
			h, ok := per[key{k.round, TargetHost, op}]
			if !ok {
				continue
			}
			hm, cm := stats.Median(h), stats.Median(v)
			hs, cs, ds = append(hs, hm), append(cs, cm), append(ds, cm-hm)
		}
		if len(ds) == 0 {
			continue
		}
		ci := stats.MedianCI(ds, confidence)
		ls := LookupSummary{Op: op, Rounds: len(ds), HostSeconds: stats.Median(hs), ContainerSeconds: stats.Median(cs),
			ExtraSeconds: ci.Median, ExtraCILow: ci.Low, ExtraCIHigh: ci.High, Coverage: ci.Coverage}
		if ci.Coverage < confidence {
			ls.ExtraCILow, ls.ExtraCIHigh, ls.Withheld = math.NaN(), math.NaN(), true
		}
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b LookupSummary) int {
		return cmp.Compare(slices.Index(LookupOps, a.Op), slices.Index(LookupOps, b.Op))
	})
	return out
}
