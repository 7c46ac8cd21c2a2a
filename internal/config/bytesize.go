package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

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

// byteUnits maps every accepted unit spelling (lower case) to its size.
// Every unit is binary, "GB" and "G" included, as in docker's --memory:
// the sizes configured here are disk and budget sizes that operators
// compare with `df -h` and `du -h`, which are binary too.
var byteUnits = map[string]ByteSize{
	"": B, "b": B,
	"k": KiB, "kb": KiB, "kib": KiB,
	"m": MiB, "mb": MiB, "mib": MiB,
	"g": GiB, "gb": GiB, "gib": GiB,
	"t": TiB, "tb": TiB, "tib": TiB,
	"p": PiB, "pb": PiB, "pib": PiB,
	"e": EiB, "eb": EiB, "eib": EiB,
}

// displayUnits are the units String uses, largest first.
var displayUnits = []struct {
	size ByteSize
	name string
}{
	{EiB, "EiB"}, {PiB, "PiB"}, {TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"},
}

var byteSizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)$`)

// errByteSizeSyntax is wrapped by every ParseByteSize error, so a message
// always shows what a byte size looks like.
var errByteSizeSyntax = errors.New(`want bytes as an integer or a number with a binary unit, like "512MiB", "2GiB" or "1.5G"`)

// ParseByteSize parses "1073741824", "512MiB", "2GiB", "1.5G" or "10 MB".
// Units are case-insensitive and binary (K = KiB = 1024); a fraction of a
// byte is truncated. Negative sizes and sizes beyond int64 are errors.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q is negative: %w", s, errByteSizeSyntax)
	}
	// The length cap keeps big.Rat from chewing on a megabyte of digits.
	m := byteSizeRE.FindStringSubmatch(t)
	if len(t) > 64 || m == nil {
		return 0, fmt.Errorf("%q is not a byte size: %w", s, errByteSizeSyntax)
	}
	unit, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit %q: %w", s, m[2], errByteSizeSyntax)
	}
	r, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("%q is not a byte size: %w", s, errByteSizeSyntax)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(unit)))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("%q is too large, the maximum is %s", s, ByteSize(math.MaxInt64))
	}
	return ByteSize(n.Int64()), nil
}

// String returns the size in the largest binary unit it reaches, exact
// when the size is a whole number of that unit ("2GiB") and rounded to two
// decimals otherwise ("1.18MiB").
func (b ByteSize) String() string {
	if b < 0 {
		return strconv.FormatInt(int64(b), 10) + "B"
	}
	for _, u := range displayUnits {
		if b < u.size {
			continue
		}
		if b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
		s := strconv.FormatFloat(float64(b)/float64(u.size), 'f', 2, 64)
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		return s + u.name
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

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
