package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/docker/go-units"
	"go.yaml.in/yaml/v3"
)

// ByteSize is an amount of bytes. In YAML it is either an integer (bytes)
// or a string with a binary unit such as "512MiB", "2GiB" or "1.5G".
type ByteSize int64

// Binary byte units.
const (
	B   ByteSize = 1
	KiB          = 1 << 10 * B
	MiB          = 1 << 20 * B
	GiB          = 1 << 30 * B
	TiB          = 1 << 40 * B
	PiB          = 1 << 50 * B
	EiB          = 1 << 60 * B
)

// errByteSizeSyntax is wrapped by every ParseByteSize error, so a message
// always shows what a byte size looks like.
var errByteSizeSyntax = errors.New(`want bytes as an integer or a number with a binary unit (B, K, M, G, T, P; KiB or KB alike), like "512MiB", "2GiB" or "1.5G"`)

// ParseByteSize parses "1073741824", "512MiB", "2GiB", "1.5G" or "10 MB"
// as docker's --memory does (go-units' RAMInBytes): units are
// case-insensitive and binary (K = KB = KiB = 1024), up to P; a fraction
// of a byte is truncated. Negative sizes and sizes beyond int64 are errors.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "-"):
		return 0, fmt.Errorf("%q is negative: %w", s, errByteSizeSyntax)
	case len(t) > 64:
		return 0, fmt.Errorf("%q is not a byte size: %w", s, errByteSizeSyntax)
	}
	// A plain integer stays exact; RAMInBytes goes through float64.
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return ByteSize(n), nil
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is too large, the maximum is %s", s, ByteSize(math.MaxInt64))
	}
	n, err := units.RAMInBytes(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size (%v): %w", s, err, errByteSizeSyntax)
	}
	// Beyond int64 the conversion inside RAMInBytes wraps (amd64) or
	// saturates (arm64).
	if n < 0 || n == math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large, the maximum is %s", s, ByteSize(math.MaxInt64))
	}
	return ByteSize(n), nil
}

// String returns the size in the largest binary unit it reaches with four
// significant digits ("2GiB", "1.177MiB"), as docker prints sizes
// (go-units' BytesSize).
func (b ByteSize) String() string { return units.BytesSize(float64(b)) }

// MarshalYAML writes the human form when it reads back as the same size,
// and the exact byte count otherwise, so marshalling never loses bytes.
func (b ByteSize) MarshalYAML() (any, error) {
	s := b.String()
	if back, err := ParseByteSize(s); err == nil && back == b {
		return s, nil
	}
	return int64(b), nil
}

// UnmarshalYAML accepts an integer number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("got %s: %w", describe(n), errByteSizeSyntax)
	}
	if n.ShortTag() == "!!int" {
		// Decoding through yaml keeps its integer forms (0x10, 1_000).
		var v int64
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%q is not a byte size: %w", n.Value, errByteSizeSyntax)
		}
		if v < 0 {
			return fmt.Errorf("%d is negative: %w", v, errByteSizeSyntax)
		}
		*b = ByteSize(v)
		return nil
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}
