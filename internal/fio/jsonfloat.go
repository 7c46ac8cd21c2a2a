package fio

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// jsonFloat is a float64 whose JSON form is a number, or null for NaN and
// ±Inf, which encoding/json refuses to write. null reads back as NaN.
type jsonFloat float64

// MarshalJSON implements json.Marshaler.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*f = jsonFloat(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

// opJSON is the wire form of Op. The field names are Op's; keep them in
// sync with the tags in types.go.
type opJSON struct {
	IOs            int64     `json:"ios"`
	IOPS           jsonFloat `json:"iops"`
	BandwidthBytes jsonFloat `json:"bandwidth_bytes_per_second"`
	Bytes          int64     `json:"bytes"`
	LatencyMeanSec jsonFloat `json:"latency_mean_seconds"`
	LatencyP50Sec  jsonFloat `json:"latency_p50_seconds"`
	LatencyP99Sec  jsonFloat `json:"latency_p99_seconds"`
	LatencyP999Sec jsonFloat `json:"latency_p99_9_seconds"`
}

// MarshalJSON implements json.Marshaler: NaN and ±Inf figures (a latency
// fio did not report) are written as null.
func (o Op) MarshalJSON() ([]byte, error) {
	return json.Marshal(opJSON{
		IOs:            o.IOs,
		IOPS:           jsonFloat(o.IOPS),
		BandwidthBytes: jsonFloat(o.BandwidthBytes),
		Bytes:          o.Bytes,
		LatencyMeanSec: jsonFloat(o.LatencyMeanSec),
		LatencyP50Sec:  jsonFloat(o.LatencyP50Sec),
		LatencyP99Sec:  jsonFloat(o.LatencyP99Sec),
		LatencyP999Sec: jsonFloat(o.LatencyP999Sec),
	})
}

// UnmarshalJSON implements json.Unmarshaler: null figures read back as NaN,
// so a Result survives a JSON round trip. Absent fields keep their value.
func (o *Op) UnmarshalJSON(b []byte) error {
	w := opJSON{
		IOs:            o.IOs,
		IOPS:           jsonFloat(o.IOPS),
		BandwidthBytes: jsonFloat(o.BandwidthBytes),
		Bytes:          o.Bytes,
		LatencyMeanSec: jsonFloat(o.LatencyMeanSec),
		LatencyP50Sec:  jsonFloat(o.LatencyP50Sec),
		LatencyP99Sec:  jsonFloat(o.LatencyP99Sec),
		LatencyP999Sec: jsonFloat(o.LatencyP999Sec),
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = Op{
		IOs:            w.IOs,
		IOPS:           float64(w.IOPS),
		BandwidthBytes: float64(w.BandwidthBytes),
		Bytes:          w.Bytes,
		LatencyMeanSec: float64(w.LatencyMeanSec),
		LatencyP50Sec:  float64(w.LatencyP50Sec),
		LatencyP99Sec:  float64(w.LatencyP99Sec),
		LatencyP999Sec: float64(w.LatencyP999Sec),
	}
	return nil
}
