package testharness

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
)

// WorkloadEntrypoint is where ImportWorkload puts the lpworkload binary in
// its image.
const WorkloadEntrypoint = "/lpworkload"

// ImportWorkload builds internal/testsupport/testharness/lpworkload (a static binary:
// the image needs nothing else), wraps it in an image with an empty /tmp
// and imports that into the daemon under every ref. Nothing is pulled: the
// daemons under test have no registry. Containers of it run
// WorkloadEntrypoint with lpworkload's verbs as their command.
func (d *Docker) ImportWorkload(t testing.TB, refs ...string) {
	t.Helper()
	if len(refs) == 0 {
		t.Fatal("ImportWorkload: no image reference")
	}
	img := WorkloadImage(t)
	for i, ref := range refs {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			t.Fatalf("ImportWorkload: %q: %v", ref, err)
		}
		tag := "latest"
		if tagged, ok := named.(reference.Tagged); ok {
			tag = tagged.Tag()
		}
		q := url.Values{"repo": {reference.FamiliarName(named)}, "tag": {tag}}
		if i == 0 {
			q.Set("fromSrc", "-")
			d.expectStream(t, d.Raw(t, http.MethodPost, "/images/create?"+q.Encode(), "application/x-tar", img))
			continue
		}
		d.Raw(t, http.MethodPost, "/images/"+url.PathEscape(refs[0])+"/tag?"+q.Encode(), "", nil)
	}
}

// WorkloadImage builds internal/testsupport/testharness/lpworkload and returns the root
// file system of its image as a tar stream for `docker import` (an empty
// /tmp and the binary at WorkloadEntrypoint).
func WorkloadImage(t testing.TB) []byte {
	t.Helper()
	content, err := os.ReadFile(WorkloadBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	var img bytes.Buffer
	tw := tar.NewWriter(&img)
	mtime := time.Unix(946684800, 0)
	for _, h := range []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime},
		{Name: strings.TrimPrefix(WorkloadEntrypoint, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content)), ModTime: mtime},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return img.Bytes()
}

// WorkloadBinary builds internal/testsupport/testharness/lpworkload, a
// static binary that runs on any Linux host of this architecture, and
// returns its path.
func WorkloadBinary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "lpworkload")
	if err := buildPackage(ctx, bin, "./internal/testsupport/testharness/lpworkload", ""); err != nil {
		t.Fatal(err)
	}
	return bin
}

// expectStream fails t when a streamed answer (image import) reports an
// error inside its 200.
func (d *Docker) expectStream(t testing.TB, b []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("docker answer: %v: %s", err, b)
		}
		if m.Error != "" {
			t.Fatalf("docker: %s", m.Error)
		}
	}
}

// Raw sends a request with an optional body and returns the answer's
// body; an answer of 300 or above fails t.
func (d *Docker) Raw(t testing.TB, method, path, contentType string, body []byte) []byte {
	t.Helper()
	req, err := http.NewRequest(method, "http://docker"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := d.c.Do(req)
	if err != nil {
		t.Fatalf("docker %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("docker %s %s: %s: %s", method, path, resp.Status, b)
	}
	return b
}

// Post sends v as JSON and decodes the answer into out (nil: ignore it).
func (d *Docker) Post(t testing.TB, path string, v, out any) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b := d.Raw(t, http.MethodPost, path, "application/json", body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("docker POST %s: decode: %v", path, err)
		}
	}
}

// RunContainer creates and starts a container named name from image with
// the workload's command and the given mounts (HostConfig.Mounts entries),
// without network, and returns its ID.
func (d *Docker) RunContainer(t testing.TB, name, image string, cmd []string, mounts ...map[string]any) string {
	t.Helper()
	var created struct {
		ID string `json:"Id"`
	}
	hc := map[string]any{"NetworkMode": "none"}
	if len(mounts) > 0 {
		hc["Mounts"] = mounts
	}
	d.Post(t, "/containers/create?name="+url.QueryEscape(name), map[string]any{
		"Image": image, "Entrypoint": []string{WorkloadEntrypoint}, "Cmd": cmd, "HostConfig": hc,
	}, &created)
	d.Raw(t, http.MethodPost, "/containers/"+created.ID+"/start", "", nil)
	return created.ID
}

// Logs returns what a container printed on stdout and stderr, still in
// the engine's multiplexed framing (good enough to search).
func (d *Docker) Logs(t testing.TB, id string) string {
	t.Helper()
	return string(d.Raw(t, http.MethodGet, "/containers/"+id+"/logs?stdout=1&stderr=1", "", nil))
}

// Events returns the engine's events between since and until, filtered by
// filters (as the API's filters parameter, e.g. {"type":["container"]}).
func (d *Docker) Events(t testing.TB, since, until time.Time, filters map[string][]string) []map[string]any {
	t.Helper()
	f, _ := json.Marshal(filters)
	q := url.Values{"since": {unixNano(since)}, "until": {unixNano(until)}, "filters": {string(f)}}
	b := d.Raw(t, http.MethodGet, "/events?"+q.Encode(), "", nil)
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var ev map[string]any
		if err := dec.Decode(&ev); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("docker events: %v: %s", err, b)
		}
		out = append(out, ev)
	}
}

func unixNano(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
