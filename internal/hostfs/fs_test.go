package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDeviceOfRoot(t *testing.T) {
	dev, err := DeviceOf("/")
	if err != nil {
		t.Fatalf("DeviceOf(/): %v", err)
	}
	// A whole disk: it has a queue directory, partitions do not.
	if _, err := os.Stat(filepath.Join("/sys/block", filepath.Base(dev))); err != nil {
		t.Errorf("DeviceOf(/) = %s, not a whole disk: %v", dev, err)
	}
	if _, err := DeviceOf("/proc/self"); err == nil {
		t.Errorf("DeviceOf(/proc/self) = nil error, want one (proc has no block device)")
	}
}

func TestFSName(t *testing.T) {
	for p, want := range map[string]string{"/proc": "unknown(0x9fa0)", "/dev/shm": "tmpfs"} {
		if got, err := FSName(p); err != nil || got != want {
			t.Errorf("FSName(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := FSName("/does/not/exist"); err == nil {
		t.Errorf("FSName of a missing path: nil error")
	}
}
