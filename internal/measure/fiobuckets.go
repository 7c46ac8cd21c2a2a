package measure

import "math/bits"

// fio's latency histogram layout (stat.h): 64 buckets per power of two
// (FIO_IO_U_PLAT_BITS = 6) in 29 groups.
const (
	platBits = 6
	platVal  = 1 << platBits
	platNR   = 29 * platVal
)

// FioBucket returns the latency, in nanoseconds, that fio's json+ output
// names the histogram bucket of a latency of ns nanoseconds by
// (plat_val_to_idx, then plat_idx_to_val, fio 3): latencies that layerprobe
// measures itself (the smallfiles workload) go into the same buckets as
// fio's, so that their histograms pool with the same rules. ns <= 0 is
// bucket 0.
func FioBucket(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	v := uint64(ns)
	msb := 63 - bits.LeadingZeros64(v)
	var idx uint64
	if msb <= platBits {
		idx = v
	} else {
		errBits := uint64(msb - platBits)
		base := (errBits + 1) << platBits
		idx = base + ((platVal - 1) & (v >> errBits))
	}
	idx = min(idx, platNR-1)
	if idx < platVal<<1 {
		return int64(idx)
	}
	errBits := (idx >> platBits) - 1
	base := uint64(1) << (errBits + platBits)
	k := idx % platVal
	return int64(base + uint64((float64(k)+0.5)*float64(uint64(1)<<errBits)))
}
