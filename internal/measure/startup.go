package measure

import (
	"cmp"
	"slices"

	"github.com/layerprobe/layerprobe/internal/stats"
)

// Startup is what starting a container costs on an engine: create, start,
// a first exec and remove, from images that differ only in how many bytes
// of files they carry, with the bytes each start wrote to the data root's
// device. A driver that copies the image for every container (vfs) pays
// in proportion to the image; one that stacks or shares layers (overlay2,
// btrfs) does not.
type Startup struct {
	// Device is the block device the bytes were counted on: the data
	// root's.
	Device string        `json:"device"`
	Sizes  []StartupSize `json:"sizes"`
	// SecondsPerMiB is the Theil-Sen slope of a start's time over the
	// image's added MiB; BytesPerImageByte that of the bytes a start wrote
	// over the image's added bytes (about 1 per copy of the image a start
	// makes: vfs makes two, the init layer and the container's; about 0
	// where layers are shared, or where a copy clones extents, as vfs's
	// does on xfs). Null with fewer than two sizes
	// measured.
	SecondsPerMiB     *float64        `json:"seconds_per_mib"`
	BytesPerImageByte *float64        `json:"bytes_per_image_byte"`
	Samples           []StartupSample `json:"samples"`
}

// StartupSize summarises the starts from one image over its rounds.
type StartupSize struct {
	ImageBytes int64 `json:"image_bytes"` // the files added to the probe image
	Rounds     int   `json:"rounds"`
	// Medians over the successful starts.
	Seconds     float64 `json:"seconds"`
	DeviceBytes float64 `json:"device_bytes"`
}

// StartupSample is one container started from an image carrying
// ImageBytes of files beyond the probe image's own.
type StartupSample struct {
	Round      int   `json:"round"`
	ImageBytes int64 `json:"image_bytes"`
	// Seconds is create + start + first exec + remove.
	Seconds float64 `json:"seconds"`
	// DeviceBytes is what the data root's device wrote from just before
	// the create to just after the remove, with the file system synced
	// before the remove and after it, so that what the start wrote is
	// counted even where the remove would have freed it unwritten.
	DeviceBytes int64  `json:"device_bytes"`
	Error       string `json:"error,omitempty"`
}

// OK reports whether the sample is a measurement.
func (s StartupSample) OK() bool { return s.Error == "" && s.Seconds > 0 }

// SummarizeStartup summarises start-up samples per image size, with the
// slopes over the sizes.
func SummarizeStartup(samples []StartupSample) (sizes []StartupSize, secondsPerMiB, bytesPerByte *float64) {
	secs, devb := map[int64][]float64{}, map[int64][]float64{}
	var xs, ys, bs []float64
	for _, s := range samples {
		if !s.OK() {
			continue
		}
		secs[s.ImageBytes] = append(secs[s.ImageBytes], s.Seconds)
		devb[s.ImageBytes] = append(devb[s.ImageBytes], float64(s.DeviceBytes))
		xs = append(xs, float64(s.ImageBytes))
		ys = append(ys, s.Seconds)
		bs = append(bs, float64(s.DeviceBytes))
	}
	for size, ss := range secs {
		sizes = append(sizes, StartupSize{ImageBytes: size, Rounds: len(ss), Seconds: stats.Median(ss), DeviceBytes: stats.Median(devb[size])})
	}
	slices.SortFunc(sizes, func(a, b StartupSize) int { return cmp.Compare(a.ImageBytes, b.ImageBytes) })
	if len(sizes) < 2 {
		return sizes, nil, nil
	}
	mib := make([]float64, len(xs))
	for i, x := range xs {
		mib[i] = x / (1 << 20)
	}
	if v, ok := stats.TheilSen(mib, ys); ok {
		secondsPerMiB = &v
	}
	if v, ok := stats.TheilSen(xs, bs); ok {
		bytesPerByte = &v
	}
	return sizes, secondsPerMiB, bytesPerByte
}
