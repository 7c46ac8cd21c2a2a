package measure_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestFiguresJSONKeys checks that the NaN-safe JSON forms of the figure
// types write exactly the names their tags declare, in field order.
func TestFiguresJSONKeys(t *testing.T) {
	for _, v := range []any{measure.Op{}, measure.Raw{}, measure.Overhead{}} {
		typ := reflect.TypeOf(v)
		var want []string
		for f := range typ.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if opts == "omitempty" {
				continue // absent from the zero value's JSON
			}
			want = append(want, `"`+name+`":`)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(b)
		for _, k := range want {
			i := strings.Index(rest, k)
			if i < 0 {
				t.Errorf("%T: %s missing or out of order in %s", v, k, b)
				break
			}
			rest = rest[i+len(k):]
		}
	}
}

func TestFiguresNullRoundTrip(t *testing.T) {
	nan := math.NaN()
	o := measure.Overhead{Ratio: 0.25, CILow: nan, CIHigh: math.Inf(1), PercentOfHost: 80, PercentLow: nan, PercentHigh: nan, N: 7, Coverage: 0.96}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ratio":0.25,"ci_low":null,"ci_high":null,"percent_of_host":80,"percent_of_host_low":null,"percent_of_host_high":null,"rounds":7,"coverage":0.96}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	var back measure.Overhead
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Ratio != 0.25 || back.N != 7 || !math.IsNaN(back.CILow) || !math.IsNaN(back.CIHigh) || back.Coverage != 0.96 {
		t.Errorf("round trip = %+v", back)
	}
}

// TestAbsentFigures checks what a figure missing from the JSON reads as:
// NaN in a summary (never a zero that would pass for a measurement), the
// value already there in an Op.
func TestAbsentFigures(t *testing.T) {
	var r measure.Raw
	if err := json.Unmarshal([]byte(`{"iops": 5}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.IOPS != 5 || !math.IsNaN(r.BandwidthBytes) || !math.IsNaN(r.FsyncP99) {
		t.Errorf("Raw from partial JSON = %+v", r)
	}
	var o measure.Overhead
	if err := json.Unmarshal([]byte(`{"ratio": 0.1, "rounds": 7}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.Ratio != 0.1 || o.N != 7 || !math.IsNaN(o.CILow) || !math.IsNaN(o.Coverage) {
		t.Errorf("Overhead from partial JSON = %+v", o)
	}
	op := measure.Op{IOs: 3, LatencyP99Sec: 0.5}
	if err := json.Unmarshal([]byte(`{"iops": 2, "latency_p50_seconds": null}`), &op); err != nil {
		t.Fatal(err)
	}
	if op.IOs != 3 || op.IOPS != 2 || op.LatencyP99Sec != 0.5 || !math.IsNaN(op.LatencyP50Sec) {
		t.Errorf("Op from partial JSON = %+v", op)
	}
	before := r
	if err := json.Unmarshal([]byte(`{"iops": "fast"}`), &r); err == nil {
		t.Errorf("a string iops decoded without error")
	}
	if r.IOPS != before.IOPS {
		t.Errorf("a failed decode changed the value: %+v", r)
	}
}
