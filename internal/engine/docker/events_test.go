package docker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestPodmanChurn: against Podman (the recorded 4.3 answers), container
// churn is asked with Podman's own event names and stream=false, which
// ends the answer after the past events, and layerprobe's own containers
// are not counted. The events are in the shape Podman 4.3's compatible
// API sends them (captured from it: Docker's action names, the container's
// labels among the attributes).
func TestPodmanChurn(t *testing.T) {
	since := time.Now().Add(-time.Minute).Truncate(time.Second)
	var query map[string][]string
	re := serveRecorded(t, filepath.Join("testdata", "podman-4.3-overlay"), map[string]http.HandlerFunc{
		"GET /events": func(w http.ResponseWriter, r *http.Request) {
			query = r.URL.Query()
			w.Header().Set("Content-Type", "application/json")
			for _, e := range []string{
				`{"status":"start","id":"73de","Type":"container","Action":"start","Actor":{"ID":"73de","Attributes":{"io.layerprobe.managed":"true","name":"layerprobe-probe-c9a8dce0"}},"scope":"local","time":1795430313}`,
				`{"status":"start","id":"aa01","Type":"container","Action":"start","Actor":{"ID":"aa01","Attributes":{"name":"web"}},"scope":"local","time":1795430314}`,
				`{"status":"die","id":"aa01","Type":"container","Action":"die","Actor":{"ID":"aa01","Attributes":{"containerExitCode":"0","name":"web"}},"scope":"local","time":1795430315}`,
			} {
				io.WriteString(w, e+"\n")
			}
		},
	})
	c, err := New("rec", re.host(), testharness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := c.ContainerChurn(context.Background(), since)
	if err != nil || n != 2 {
		t.Fatalf("ContainerChurn = %d, %v; want the 2 events of the container that is not layerprobe's", n, err)
	}
	var filters map[string][]string
	if err := json.Unmarshal([]byte(first(query["filters"])), &filters); err != nil {
		t.Fatalf("filters %q: %v", query["filters"], err)
	}
	if first(query["stream"]) != "false" || len(query["until"]) != 0 || first(query["since"]) == "" ||
		!slices.Equal(filters["event"], []string{"start", "died", "remove"}) || !slices.Equal(filters["type"], []string{"container"}) {
		t.Errorf("events query %v; want since, stream=false, no until, Podman's event names", query)
	}
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
