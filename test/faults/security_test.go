package faults

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/httpapi"
	"github.com/layerprobe/layerprobe/internal/probe"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// fioWatch records the command line of every fio job that runs on a daemon
// (host fio under its data root, fio in its containers), polling /proc every
// millisecond: a smoke job lives for tens of milliseconds at least.
type fioWatch struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	seen map[string][]string
}

func watchFio(dataRoot string) *fioWatch {
	w := &fioWatch{stop: make(chan struct{}), done: make(chan struct{}), seen: map[string][]string{}}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			for _, p := range fioJobsRunning(dataRoot) {
				w.mu.Lock()
				w.seen[strings.Join(p.args, "\x00")] = p.args
				w.mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return w
}

func (w *fioWatch) end() [][]string {
	close(w.stop)
	<-w.done
	var out [][]string
	for _, a := range w.seen {
		out = append(out, a)
	}
	return out
}

// No API input reaches fio's options, file paths or the container's
// configuration. A canary string is sent everywhere a client can put
// something: query parameters, path, body fields, headers, cookies, of
// refused requests and of the accepted trigger. Then, for the cycle that
// trigger started: every fio command line that ran (host and container)
// is one the built-in profile and the agent's own directories define; the
// probe container's configuration and its volume are the fixed, locked
// down ones and carry no canary; no file named after the canary exists.
// Statically: the HTTP layer does not import the Docker client, the probe
// or the fio packages, and Source.TriggerCycle takes nothing but a context.
func TestNoAPIInputReachesTheEngine(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)
	s := newAgentSetup(t, d.Host, baseConfig)
	a := s.start(t)

	b := make([]byte, 6)
	_, _ = rand.Read(b)
	canary := "lpcanary" + hex.EncodeToString(b)
	evilPath := filepath.Join(os.TempDir(), canary)
	tok := bearer(testToken)
	hostile := map[string]string{
		"Authorization":   "Bearer " + testToken,
		"User-Agent":      canary,
		"X-Forwarded-For": canary,
		"X-Profile":       "seed",
		"X-Fio-Options":   "--exec_prerun=touch " + evilPath,
		"Cookie":          "profile=" + canary + "; image=" + canary,
		"Content-Type":    "application/json",
		"Accept-Language": canary,
	}
	for _, r := range []badRequest{
		{method: "POST", path: "/api/v1/cycles?profile=seed&fio=--exec_prerun%3Dtouch+" + evilPath + "&image=" + canary +
			"&scratch_dir=" + evilPath + "&engine=" + canary, header: tok, status: 400},
		{method: "POST", path: "/api/v1/cycles", header: hostile, status: 400,
			body: `{"profile":"seed","fio_options":["--exec_prerun=touch ` + evilPath + `"],"targets":["/etc"],"image":"` + canary +
				`","engine":"` + canary + `","env":{"X":"` + canary + `"},"binds":["/:/host"],"privileged":true}`},
		{method: "POST", path: "/api/v1/cycles/" + canary, header: hostile, status: 405},
		{method: "PUT", path: "/api/v1/engines", header: hostile, body: `{"name":"` + canary + `"}`, status: 405},
		{method: "GET", path: "/api/v1/cycles/1?profile=" + canary, status: 400},
		{method: "GET", path: "/api/v1/overhead?engine=" + canary, status: 400},
		{method: "GET", path: "/api/v1/cycles?engine=" + canary, status: 200}, // a read filter, valid syntax
	} {
		if code, _, body := r.send(t, a.base); code != r.status {
			t.Errorf("%s %s: %d %s; want %d", r.method, truncate(r.path, 60), code, truncate(string(body), 200), r.status)
		}
	}

	// The accepted trigger, with the canary in every header.
	w := watchFio(d.DataRoot)
	if code, _, body := (badRequest{method: "POST", path: "/api/v1/cycles", header: hostile, body: "{}"}).send(t, a.base); code != http.StatusAccepted {
		w.end()
		t.Fatalf("trigger with hostile headers: %d %s", code, body)
	}
	c := a.newCycle(t, 0, 2*time.Minute)
	argvs := w.end()
	if c.Result != "ok" {
		t.Fatalf("triggered cycle: %+v", c)
	}

	// Every fio that ran is one the profile and the agent's directories
	// define: compute them all and compare whole command lines.
	l := docker.labelled(t)
	if len(l.Containers) != 1 {
		t.Fatalf("want one probe container, got %s", l)
	}
	owner := l.Containers[0].Labels["io.layerprobe.owner"]
	hostFio, err := exec.LookPath("fio")
	must(t, err)
	prof, err := fio.LookupProfile("smoke")
	must(t, err)
	allowed := map[string]bool{}
	for _, job := range prof.Jobs {
		// A file per round (at most this many rounds), or files in turn.
		files := job.LayoutFiles(probe.DefaultMaxRounds)
		for k := range files {
			for _, how := range []fio.Execution{fio.Steady, fio.Layout} {
				// host and bind each have a directory of their own under
				// the agent's in the scratch root (bind's through the mount).
				allowed[strings.Join(fio.Command(hostFio, job, filepath.Join(d.DataRoot, "layerprobe-scratch", owner, "host"), how, k), "\x00")] = true
				for _, dir := range []string{"/lp/layer", "/lp/bind/" + owner + "/bind", "/lp/volume"} {
					allowed[strings.Join(fio.Command("/lp/bin/fio", job, dir, how, k), "\x00")] = true
				}
			}
		}
	}
	for _, argv := range argvs {
		line := strings.Join(argv, " ")
		if !allowed[strings.Join(argv, "\x00")] || strings.Contains(line, canary) {
			t.Errorf("fio ran with a command line the profile does not define: %s", line)
		}
	}
	t.Logf("%d of the cycle's fio command lines observed (12 executions and their layouts), each one of the %d the smoke profile defines", len(argvs), len(allowed))
	if len(argvs) < 6 {
		t.Errorf("observed only %d fio command lines; the check needs most of the 12", len(argvs))
	}

	// The probe container and its volume: fixed configuration, no canary.
	var insp struct {
		Config struct {
			Image      string
			Entrypoint []string
			Cmd        []string
			Env        []string
			Labels     map[string]string
			User       string
		}
		HostConfig struct {
			Privileged  bool
			NetworkMode string
			CapAdd      []string
			CapDrop     []string
			SecurityOpt []string
			Binds       []string
			PidMode     string
			IpcMode     string
			Devices     []any
		}
		Mounts []struct {
			Type, Source, Destination, Name string
			RW                              bool
		}
	}
	var raw json.RawMessage
	docker.do(t, "GET", "/containers/"+l.Containers[0].ID+"/json", &raw)
	if strings.Contains(string(raw), canary) {
		t.Errorf("the canary is in the probe container's configuration:\n%s", raw)
	}
	must(t, json.Unmarshal(raw, &insp))
	cfg, hc := insp.Config, insp.HostConfig
	if !strings.HasPrefix(cfg.Image, "layerprobe-probe:") || !slices.Equal(cfg.Entrypoint, []string{"/lp/bin/layerprobe", "probe-helper", "idle"}) ||
		len(cfg.Cmd) != 0 || cfg.User != "" {
		t.Errorf("probe container config: image %q entrypoint %q cmd %q user %q", cfg.Image, cfg.Entrypoint, cfg.Cmd, cfg.User)
	}
	for _, e := range cfg.Env {
		if !strings.HasPrefix(e, "PATH=") {
			t.Errorf("probe container environment: %q", e)
		}
	}
	for k := range cfg.Labels {
		if !strings.HasPrefix(k, "io.layerprobe.") {
			t.Errorf("probe container label %q", k)
		}
	}
	if hc.Privileged || hc.NetworkMode != "none" || len(hc.CapAdd) != 0 || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
		!slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}) || len(hc.Binds) != 0 || hc.PidMode != "" ||
		hc.IpcMode == "host" || len(hc.Devices) != 0 {
		t.Errorf("probe container host config: %+v", hc)
	}
	scratch := filepath.Join(d.DataRoot, "layerprobe-scratch")
	var mounts []string
	for _, m := range insp.Mounts {
		src := m.Source
		if m.Type == "volume" {
			src = m.Name
		}
		mounts = append(mounts, m.Type+":"+src+":"+m.Destination)
	}
	slices.Sort(mounts)
	want := []string{"bind:" + scratch + ":/lp/bind", "volume:" + l.Volumes[0] + ":/lp/volume"}
	if !slices.Equal(mounts, want) {
		t.Errorf("probe container mounts %v, want %v", mounts, want)
	}
	var vol json.RawMessage
	docker.do(t, "GET", "/volumes/"+l.Volumes[0], &vol)
	if strings.Contains(string(vol), canary) {
		t.Errorf("the canary is in the probe volume: %s", vol)
	}

	// No file anywhere the agent writes is named after the input.
	if _, err := os.Stat(evilPath); !os.IsNotExist(err) {
		t.Errorf("%s exists (err %v)", evilPath, err)
	}
	for _, root := range []string{d.DataRoot, s.StateDir} {
		_ = filepath.WalkDir(root, func(p string, _ os.DirEntry, _ error) error {
			if strings.Contains(p, canary) {
				t.Errorf("a path carries the canary: %s", p)
			}
			return nil
		})
	}
	for _, e := range scratchOwners(d.DataRoot) {
		if e != owner {
			t.Errorf("scratch holds %q; only the agent's owner directory %s belongs there", e, owner)
		}
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}

	// Statically: the HTTP layer cannot reach the Docker client, the probe
	// session or the configuration, does not itself build fio command
	// lines or run programs (it links internal/fio only for the result
	// types of its answers), and the trigger takes nothing but a context.
	const httpapiPkg = "github.com/layerprobe/layerprobe/internal/httpapi"
	out, err := exec.Command("go", "list", "-deps", httpapiPkg).Output()
	must(t, err)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/moby/", "github.com/docker/", "/internal/engine", "/internal/probe",
			"/internal/config", "/internal/agent", "/internal/store"} {
			if strings.Contains(dep, banned) {
				t.Errorf("internal/httpapi depends on %s", dep)
			}
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{join .Imports " "}}`, httpapiPkg).Output()
	must(t, err)
	for _, imp := range strings.Fields(string(out)) {
		if imp == "os/exec" || strings.HasSuffix(imp, "/internal/fio") || imp == "os" || imp == "syscall" {
			t.Errorf("internal/httpapi imports %s", imp)
		}
	}
	ctxType := reflect.TypeFor[context.Context]()
	for _, name := range []string{"TriggerCycle", "TriggerColdCycle"} {
		m, ok := reflect.TypeFor[httpapi.Source]().MethodByName(name)
		if !ok || m.Type.NumIn() != 1 || m.Type.In(0) != ctxType {
			t.Errorf("httpapi.Source.%s is %v; it must take nothing but a context", name, m.Type)
		}
	}
}

// POST /api/v1/cycles is rate limited across all clients: three triggers in
// a row, then one per 10 s; beyond that 429 rate_limited with Retry-After.
// Refused triggers (401, 409) do not use up the budget. The engine here is
// unreachable, so each triggered cycle fails at once and the next trigger
// is not refused with 409 instead.
func TestTriggerRateLimited(t *testing.T) {
	s := newAgentSetup(t, "unix:///tmp/lp-faults-no-engine.sock", baseConfig)
	a := s.start(t)
	for range 5 {
		if code, _, _ := a.request(t, "POST", "/api/v1/cycles", bearer("wrong-token-0123456789abcdef"), ""); code != 401 {
			t.Fatalf("wrong token: %d", code)
		}
	}
	accepted := 0
	var last apiCycle
	for accepted < 3 {
		code, _, body := a.request(t, "POST", "/api/v1/cycles", bearer(testToken), "")
		switch code {
		case http.StatusAccepted:
			accepted++
			last = a.newCycle(t, last.ID, 30*time.Second)
			if last.Reason != "unreachable" {
				t.Errorf("cycle %+v, want failed as unreachable", last)
			}
		case http.StatusConflict:
			time.Sleep(20 * time.Millisecond)
		default:
			t.Fatalf("trigger %d: %d %s", accepted+1, code, body)
		}
	}
	code, h, body := a.request(t, "POST", "/api/v1/cycles", bearer(testToken), "")
	retry, _ := strconv.Atoi(h.Get("Retry-After"))
	if code != http.StatusTooManyRequests || checkErrorShape(h, body, "rate_limited") != nil || retry < 1 || retry > 10 {
		t.Errorf("fourth trigger: %d Retry-After %q %s; want 429 rate_limited, Retry-After 1 to 10", code, h.Get("Retry-After"), body)
	}
	t.Logf("fourth trigger in a row: %d, Retry-After %d s: %s", code, retry, strings.TrimSpace(string(body)))
	if n := len(a.cycles(t)); n != 3 {
		t.Errorf("%d cycles recorded, want the 3 accepted", n)
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// Basic auth from --web.config.file and the trigger's bearer token both
// need the Authorization header, so no request can pass both: the agent
// warns at startup that the trigger is unusable with basic auth (TLS client
// certificates are the way to combine them), and no combination of headers
// gets a trigger through.
func TestBasicAuthConflictsWithTheToken(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	must(t, err)
	s := newAgentSetup(t, "unix:///tmp/lp-faults-no-engine.sock", baseConfig)
	web := filepath.Join(s.Dir, "web.yml")
	must(t, os.WriteFile(web, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600))
	s.flags = []string{"--web.config.file", web}
	a := s.spawn(t, s.port)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("prom:s3cret-pass"))
	testharness.WaitFor(t, 30*time.Second, "the agent answers with basic auth", func() bool {
		req, _ := http.NewRequest("GET", a.base+"/healthz", nil)
		req.Header.Set("Authorization", basic)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if !strings.Contains(a.Log.String(), "triggering cycles over the API is impossible") {
		t.Errorf("no startup warning about basic auth and the token:\n%s", a.Log.String())
	}
	for _, h := range [][]string{{basic}, {"Bearer " + testToken}, {basic, "Bearer " + testToken}, {"Bearer " + testToken, basic}} {
		req, _ := http.NewRequest("POST", a.base+"/api/v1/cycles", nil)
		for _, v := range h {
			req.Header.Add("Authorization", v)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("POST /api/v1/cycles with Authorization %q: %d, want 401", h, resp.StatusCode)
		}
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// nonRootID is the uid and gid the non-root test runs layerprobe as (no
// passwd entry is needed: setpriv sets the ids directly).
const nonRootID = 23456

// layerprobe run as an unprivileged user whose only privilege is the
// group of the Docker socket (the docker group's role), with a scratch
// directory of its own on the data root's file system: host, container and
// volume targets are measured; the bind target fails with EACCES, because
// the probe container's root has no capability (no CAP_DAC_OVERRIDE) and
// cannot write into the user's 0700 directory. Nothing is left behind.
// docs/security.md describes this mode.
func TestRunWithoutRoot(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	docker := newDockerAPI(d.Host)
	sock := strings.TrimPrefix(d.Host, "unix://")
	// The socket's group is the user's only privilege; its directory
	// and the binary's must be traversable.
	must(t, os.Chown(sock, 0, nonRootID))
	must(t, os.Chmod(sock, 0o660))
	must(t, os.Chmod(d.Dir, 0o711))
	must(t, os.Chmod(workDir, 0o711))
	home, err := os.MkdirTemp("/tmp", "lpnonroot") // on the data root's file system, like the daemon's dir
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	scratch := filepath.Join(home, "scratch")
	must(t, os.Mkdir(scratch, 0o700))
	for _, p := range []string{home, scratch} {
		must(t, os.Chown(p, nonRootID, nonRootID))
	}
	cfg := filepath.Join(home, "config.yml")
	must(t, os.WriteFile(cfg, []byte("profile: smoke\nfree_space:\n  min_free_bytes: 0\n  min_free_ratio: 0\n"+
		"engines:\n  - name: default\n    host: "+d.Host+"\n    scratch_dir: "+scratch+"\n"), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := strconv.Itoa(nonRootID)
	cmd := exec.CommandContext(ctx, setpriv, "--reuid="+id, "--regid="+id, "--groups="+id, "--",
		binary, "run", "--config", cfg, "--rounds", "2", "--output", "json", "--log.level", "warn")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LAYERPROBE_LOCK_FILE=" + filepath.Join(home, "lock")}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		t.Fatalf("layerprobe run as uid %d: %v\n%s", nonRootID, err, stderr.String())
	}
	var run struct {
		Engines []struct {
			Error   any `json:"error"`
			Results []struct {
				Target       string `json:"target"`
				Workload     string `json:"workload"`
				RoundsOK     int    `json:"rounds_ok"`
				RoundsFailed int    `json:"rounds_failed"`
			} `json:"results"`
			Samples []apiSample `json:"samples"`
		} `json:"engines"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &run); err != nil || len(run.Engines) != 1 || run.Engines[0].Error != nil {
		t.Fatalf("run output: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, r := range run.Engines[0].Results {
		want := r.RoundsOK == 2 && r.RoundsFailed == 0
		if r.Target == "bind" {
			want = r.RoundsOK == 0 && r.RoundsFailed == 2
		}
		if !want {
			t.Errorf("%s/%s: %d rounds ok, %d failed", r.Target, r.Workload, r.RoundsOK, r.RoundsFailed)
		}
	}
	for _, s := range run.Engines[0].Samples {
		// fio reports the missing search permission on the directory as
		// "is not a directory", on a file in it as "Permission denied".
		// The smallfiles helper says "permission denied" as Go does.
		if s.Target == "bind" && (s.Error == nil || !strings.Contains(strings.ToLower(s.Error.Message), "permission denied") && !strings.Contains(s.Error.Message, "is not a directory")) {
			t.Errorf("bind/%s: %+v; want a permission error", s.Workload, s.Error)
		}
	}
	t.Logf("as uid %d with the socket's group only: host, container and volume measured; bind: %s",
		nonRootID, firstBindError(run.Engines[0].Samples))
	if l := docker.labelled(t); len(l.Containers)+len(l.Volumes) > 0 {
		t.Errorf("left on the engine: %s", l)
	}
	if f := jobFiles(home); len(f) > 0 {
		t.Errorf("job files left in the scratch directory: %v", f)
	}
}

func firstBindError(ss []apiSample) string {
	for _, s := range ss {
		if s.Target == "bind" && s.Error != nil {
			return s.Error.Reason + ": " + strings.SplitN(s.Error.Message, "\n", 2)[0]
		}
	}
	return "no error"
}
