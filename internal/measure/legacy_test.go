package measure_test

import (
	"encoding/json"
	"testing"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Output and stored history from before schema_version 2 call the workload
// `job`; it must read back as the workload.
func TestLegacyJobFieldReadsAsWorkload(t *testing.T) {
	var r measure.Result
	if err := json.Unmarshal([]byte(`{"target":"container","job":"fsync","rounds_ok":7,"raw":{"iops":5}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Workload != measure.Fsync || r.Target != measure.TargetContainer || r.RoundsOK != 7 || r.Raw.IOPS != 5 {
		t.Errorf("old result read as %+v", r)
	}
	var s measure.Sample
	if err := json.Unmarshal([]byte(`{"round":3,"order":2,"target":"bind","job":"randwrite","write":{"iops":9},"bytes_written":4096}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Workload != measure.RandWrite || s.Round != 3 || s.Order != 2 || s.Target != measure.TargetBind || s.Write.IOPS != 9 || s.BytesWritten != 4096 {
		t.Errorf("old sample read as %+v", s)
	}

	// The current name wins, and is the only one written.
	if err := json.Unmarshal([]byte(`{"workload":"seqwrite","job":"fsync"}`), &s); err != nil || s.Workload != measure.SeqWrite {
		t.Errorf("workload and job: %q, %v; want seqwrite", s.Workload, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["job"]; ok || string(keys["workload"]) != `"seqwrite"` {
		t.Errorf("sample written as %s; want workload and no job", b)
	}
}
