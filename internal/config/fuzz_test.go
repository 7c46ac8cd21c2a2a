package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: Load never panics; on a readable file every error is
// ErrInvalid; a nil error means the config validates.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.yml")
	seeds = append(seeds, examplePath)
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("engines: &e [{<<: *e}]"))
	f.Add([]byte("agent: {interval: !!binary aGVsbG8=}"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error on a readable file is not ErrInvalid: %v", err)
			}
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that does not validate: %v\n%s", err, data)
		}
	})
}
