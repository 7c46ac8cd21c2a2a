package report

import "github.com/layerprobe/layerprobe/internal/measure"

// Cold is one engine's cold-path measurement: in every round a fresh probe
// container is started and its first seconds are measured.
type Cold struct {
	// Results hold the fsync job on host and container (the fresh
	// container's writable layer), summarised as steady results are.
	Results []measure.Result `json:"results"`
	Samples []measure.Sample `json:"samples"`
	CopyUp  measure.CopyUp   `json:"copy_up"`
	// Lookup is the stat walk of the cold image's tree of small files and
	// the first creates in its directories (directory copy-up), beside the
	// file copy-up; nil for an agent's answer without it.
	Lookup *measure.Lookup `json:"lookup,omitempty"`
	// Startup is what starting a container costs per image size, when it
	// was measured (`run --startup-images`).
	Startup *measure.Startup `json:"startup,omitempty"`
	// noCopyUp: there is no copy-up record to show (an agent's answer
	// without one), rather than a record without results.
	noCopyUp bool
}

// NewCold summarises a cold measurement: its fsync samples as steady
// results are, its copy-up and lookups as the API's detail of a cold
// cycle has them (measure.NewCopyUp, measure.NewLookup); lists are never
// nil.
func NewCold(samples []measure.Sample, copyUp []measure.CopyUpSample, reflink *bool, lookup []measure.LookupSample, confidence float64) *Cold {
	return &Cold{Results: measure.NonNil(measure.Summarize(samples, confidence)), Samples: measure.NonNil(samples),
		CopyUp: *measure.NewCopyUp(copyUp, reflink, confidence), Lookup: measure.NewLookup(lookup, confidence)}
}
