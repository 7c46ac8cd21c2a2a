package config

import (
	"math"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		err  string // substring; "" means success
	}{
		{"0", 0, ""},
		{"1073741824", GiB, ""},
		{"512MiB", 512 * MiB, ""},
		{"2GiB", 2 * GiB, ""},
		{"1.5G", GiB + 512*MiB, ""},
		{"1.5g", GiB + 512*MiB, ""},
		{"10 MB", 10 * MiB, ""},
		{"4k", 4 * KiB, ""},
		{"4KB", 4 * KiB, ""},
		{"100b", 100, ""},
		{".5KiB", 512, ""},
		{"0.1KiB", 102, ""}, // fractions of a byte are truncated
		{"1TiB", TiB, ""},
		{"7PiB", 7 * PiB, ""},
		{"1e3", 1000, ""}, // as docker --memory reads it
		{"  3M  ", 3 * MiB, ""},
		{"8192P", 0, "too large"},
		{"7EiB", 0, "invalid suffix"}, // go-units stops at P
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775808", 0, "too large"},
		{"-1", 0, "negative"},
		{"-1GiB", 0, "negative"},
		{"12XB", 0, `invalid suffix: 'xb'`},
		{"1GiBs", 0, "invalid suffix"},
		{"GiB", 0, "not a byte size"},
		{"", 0, "not a byte size"},
		{"1.2.3", 0, "not a byte size"},
		{"NaN", 0, "not a byte size"},
		{"Inf", 0, "not a byte size"},
		{"1/2", 0, "not a byte size"},
		{strings.Repeat("9", 100), 0, "not a byte size"},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if tt.err == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseByteSize(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseByteSize(%q) = %d, %v, want an error with %q", tt.in, got, err, tt.err)
		}
	}
}

func TestByteSizeString(t *testing.T) {
	tests := map[ByteSize]string{
		0:                   "0B",
		1023:                "1023B",
		KiB:                 "1KiB",
		512 * MiB:           "512MiB",
		2 * GiB:             "2GiB",
		GiB + 512*MiB:       "1.5GiB",
		1234567:             "1.177MiB",
		math.MaxInt64:       "8EiB",
		-5:                  "-5B",
		3 * TiB:             "3TiB",
		GiB + GiB/4:         "1.25GiB",
		10*GiB + 10*MiB:     "10.01GiB",
		ByteSize(1 << 20):   "1MiB",
		ByteSize(1<<20 + 1): "1MiB",
	}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

// TestByteSizeYAMLRoundTrip: marshalling then unmarshalling keeps every
// byte, even when the human form would round.
func TestByteSizeYAMLRoundTrip(t *testing.T) {
	for _, b := range []ByteSize{0, 1, 1023, KiB, 1234567, 512 * MiB, GiB + 512*MiB, math.MaxInt64, 7*EiB + 1} {
		out, err := yaml.Marshal(map[string]ByteSize{"v": b})
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]ByteSize
		if err := yaml.Unmarshal(out, &back); err != nil {
			t.Fatalf("%d: %v (yaml %q)", int64(b), err, out)
		}
		if back["v"] != b {
			t.Errorf("%d -> %q -> %d", int64(b), out, int64(back["v"]))
		}
	}
}

func TestByteSizeUnmarshalYAML(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"1024", KiB, true},
		{"0x400", KiB, true},
		{`"2GiB"`, 2 * GiB, true},
		{"2GiB", 2 * GiB, true},
		{"-1", 0, false},
		{"[1]", 0, false},
		{"{a: 1}", 0, false},
		{"1.5", 1, true}, // a float of bytes: the fraction is truncated
		{"true", 0, false},
		{"99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		var v struct {
			B ByteSize `yaml:"b"`
		}
		err := yaml.Unmarshal([]byte("b: "+tt.in), &v)
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if err == nil && v.B != tt.want {
			t.Errorf("%s = %d, want %d", tt.in, int64(v.B), int64(tt.want))
		}
	}
}
