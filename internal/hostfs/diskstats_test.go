package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrittenBytes: the root file system's device counts what a synced
// file wrote (at least its size: other writers add, never take away).
func TestWrittenBytes(t *testing.T) {
	dev, err := DeviceOf("/var/tmp")
	if err != nil {
		t.Skipf("no block device under /var/tmp: %v", err)
	}
	before, err := WrittenBytes(dev)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "lp-written")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	after, err := WrittenBytes(dev)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 4<<20 {
		t.Errorf("%s wrote %d bytes over a synced 4 MiB file, want at least 4 MiB", dev, after-before)
	}
	if _, err := WrittenBytes("/dev/no-such-disk"); err == nil {
		t.Error("a missing device: want an error")
	}
}
