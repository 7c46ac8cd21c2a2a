package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// nullableFloat is a float64 written as null when it is NaN or ±Inf (which
// encoding/json refuses to write) and read back from null as NaN.
type nullableFloat float64

// MarshalJSON implements json.Marshaler.
func (f nullableFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *nullableFloat) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*f = nullableFloat(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = nullableFloat(v)
	return nil
}

// rawJSON is the wire form of Raw; its tags must equal Raw's (a test checks).
type rawJSON struct {
	IOPS           nullableFloat `json:"iops"`
	BandwidthBytes nullableFloat `json:"bandwidth_bytes_per_second"`
	LatencyP50     nullableFloat `json:"latency_p50_seconds"`
	LatencyP99     nullableFloat `json:"latency_p99_seconds"`
	FsyncP99       nullableFloat `json:"fsync_p99_seconds"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (r Raw) MarshalJSON() ([]byte, error) {
	return json.Marshal(rawJSON{
		IOPS:           nullableFloat(r.IOPS),
		BandwidthBytes: nullableFloat(r.BandwidthBytes),
		LatencyP50:     nullableFloat(r.LatencyP50),
		LatencyP99:     nullableFloat(r.LatencyP99),
		FsyncP99:       nullableFloat(r.FsyncP99),
	})
}

// UnmarshalJSON implements json.Unmarshaler: null and absent figures read
// as NaN, so that a missing figure can never pass for a measured zero.
func (r *Raw) UnmarshalJSON(b []byte) error {
	nan := nullableFloat(math.NaN())
	w := rawJSON{IOPS: nan, BandwidthBytes: nan, LatencyP50: nan, LatencyP99: nan, FsyncP99: nan}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Raw{
		IOPS:           float64(w.IOPS),
		BandwidthBytes: float64(w.BandwidthBytes),
		LatencyP50:     float64(w.LatencyP50),
		LatencyP99:     float64(w.LatencyP99),
		FsyncP99:       float64(w.FsyncP99),
	}
	return nil
}

// overheadJSON is the wire form of Overhead; its tags must equal Overhead's.
type overheadJSON struct {
	Ratio         nullableFloat `json:"ratio"`
	CILow         nullableFloat `json:"ci_low"`
	CIHigh        nullableFloat `json:"ci_high"`
	PercentOfHost nullableFloat `json:"percent_of_host"`
	PercentLow    nullableFloat `json:"percent_of_host_low"`
	PercentHigh   nullableFloat `json:"percent_of_host_high"`
	N             int           `json:"rounds"`
	Coverage      nullableFloat `json:"coverage"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf become null.
func (o Overhead) MarshalJSON() ([]byte, error) {
	return json.Marshal(overheadJSON{
		Ratio:         nullableFloat(o.Ratio),
		CILow:         nullableFloat(o.CILow),
		CIHigh:        nullableFloat(o.CIHigh),
		PercentOfHost: nullableFloat(o.PercentOfHost),
		PercentLow:    nullableFloat(o.PercentLow),
		PercentHigh:   nullableFloat(o.PercentHigh),
		N:             o.N,
		Coverage:      nullableFloat(o.Coverage),
	})
}

// UnmarshalJSON implements json.Unmarshaler: null and absent figures read
// as NaN.
func (o *Overhead) UnmarshalJSON(b []byte) error {
	nan := nullableFloat(math.NaN())
	w := overheadJSON{Ratio: nan, CILow: nan, CIHigh: nan, PercentOfHost: nan, PercentLow: nan, PercentHigh: nan, Coverage: nan}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = Overhead{
		Ratio:         float64(w.Ratio),
		CILow:         float64(w.CILow),
		CIHigh:        float64(w.CIHigh),
		PercentOfHost: float64(w.PercentOfHost),
		PercentLow:    float64(w.PercentLow),
		PercentHigh:   float64(w.PercentHigh),
		N:             w.N,
		Coverage:      float64(w.Coverage),
	}
	return nil
}
