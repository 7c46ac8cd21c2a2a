package measure

import "encoding/json"

// Results and samples written before run JSON schema_version 2 (stored
// cycles and samples of an older agent, saved `layerprobe run --output
// json` files) name the workload `job`. They must read back unchanged after
// an upgrade: the agent's detector and overhead window read that history
// from the store. The decoders below fall back to `job` when `workload` is
// absent; they never write it.

// legacyWorkload is the field of the old name.
type legacyWorkload struct {
	Job Workload `json:"job"`
}

// UnmarshalJSON implements json.Unmarshaler: it reads `workload`, or the
// `job` of older output.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result // without this method, so no recursion
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return fillLegacyWorkload(b, &r.Workload)
}

// UnmarshalJSON implements json.Unmarshaler: it reads `workload`, or the
// `job` of older output. (Sample rather than the embedded JobResult
// carries the method: on JobResult it would be promoted to Sample and
// shadow Sample's own fields.)
func (s *Sample) UnmarshalJSON(b []byte) error {
	type plain Sample
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	return fillLegacyWorkload(b, &s.Workload)
}

func fillLegacyWorkload(b []byte, w *Workload) error {
	if *w != "" {
		return nil
	}
	var old legacyWorkload
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	*w = old.Job
	return nil
}
