package connect

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine/containerd"
	"github.com/layerprobe/layerprobe/internal/engine/docker"
)

// The engine's type picks the client; connecting dials nothing, so no
// engine needs to run.
func TestEngineByType(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "engine.sock")
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		ec   config.Engine
		want string
	}{
		{config.Engine{Name: "d", Host: sock}, "docker"},
		{config.Engine{Name: "d", Type: config.EngineDocker, Host: sock}, "docker"},
		{config.Engine{Name: "c", Type: config.EngineContainerd, Host: sock, Namespace: "k8s.io", Snapshotter: "overlayfs"}, "containerd"},
	} {
		c, err := Engine(tc.ec, logger)
		if err != nil {
			t.Fatalf("%+v: %v", tc.ec, err)
		}
		var got string
		switch c.(type) {
		case *docker.Client:
			got = "docker"
		case *containerd.Client:
			got = "containerd"
		}
		if got != tc.want {
			t.Errorf("type %q: a %T, want the %s client", tc.ec.Type, c, tc.want)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}
