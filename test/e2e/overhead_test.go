package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestOverheadReadsASecuredAgent: `layerprobe overhead` reads an agent
// that runs with --web.config.file requiring TLS, a client certificate and
// basic auth, with the flags a Prometheus user knows (and with a Prometheus
// HTTP client configuration file), and its table shows what the agent
// knows of the engine and its last cycle, never an empty run-document field.
func TestOverheadReadsASecuredAgent(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	dir := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, b, 0o600))
		return p
	}
	serverPEM, serverKey := selfSigned(t)
	clientPEM, clientKey := selfSignedClient(t)
	serverCert, clientCert := file("server.pem", serverPEM), file("client.pem", clientPEM)
	serverKeyFile, clientKeyFile := file("server-key.pem", serverKey), file("client-key.pem", clientKey)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	must(t, err)
	password := file("password", []byte("s3cret-pass\n"))
	web := file("web.yml", fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\n"+
		"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\nbasic_auth_users:\n  prom: %s\n",
		serverCert, serverKeyFile, clientCert, hash))

	// One target, one job: the table's row for it is all the test reads
	// of the measurements.
	s := newAgentSetup(t, d.Host, agentConfig+"\nworkloads: [fsync]\ntargets: [container]")
	a := s.startWith(t, []string{"--web.config.file", web}, false)
	base := fmt.Sprintf("https://127.0.0.1:%d", s.port)
	tlsFlags := []string{"overhead", "--url", base, "--tls.ca-file", serverCert, "--tls.cert-file", clientCert, "--tls.key-file", clientKeyFile}
	flags := append(append([]string{}, tlsFlags...), "--basic-auth.username", "prom", "--basic-auth.password-file", password)

	var out string
	testharness.Eventually(t, 4*time.Minute, time.Second, "a successful steady cycle in `layerprobe overhead`", func() (bool, string) {
		select {
		case <-a.Done():
			t.Fatalf("agent exited:\n%s", testharness.Tail(a.Log.String(), 40))
		default:
		}
		r := layerprobe(t, s.host, time.Minute, flags...)
		out = r.stdout
		return r.code == 0 && strings.Contains(out, ", ok at "), fmt.Sprintf("exit %d: %s%s", r.code, r.stderr, r.stdout)
	})
	for _, want := range []string{
		"Agent " + base + ": latest overheads at ",
		"Engine default (" + d.Host + ")",
		"data root " + d.DataRoot,
		"engine:       Docker ",
		"fio:          fio-",
		"last steady:  cycle ",
		", schedule, profile smoke, ",
		"Steady state (one long-lived probe container), estimated over the last ",
		"TARGET     WORKLOAD",
		"container  fsync",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("layerprobe overhead lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"layerprobe -", "profile -", "data root -", "version -", "fio:          -", "(-)", " JOB "} {
		if strings.Contains(out, bad) {
			t.Errorf("layerprobe overhead prints %q:\n%s", bad, out)
		}
	}

	// The same settings as a Prometheus HTTP client configuration file.
	cfg := file("client.yml", fmt.Appendf(nil, "tls_config:\n  ca_file: %s\n  cert_file: %s\n  key_file: %s\n"+
		"basic_auth:\n  username: prom\n  password_file: %s\n", serverCert, clientCert, clientKeyFile, password))
	if r := layerprobe(t, s.host, time.Minute, "overhead", "--url", base, "--http.config.file", cfg, "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"engines"`) {
		t.Errorf("--http.config.file: exit %d: %s%s", r.code, r.stderr, r.stdout)
	}
	// Each missing piece is refused, and the message says which.
	// (Without a client certificate, TLS 1.3 has the server refuse it after
	// the handshake: the client sees the alert or, writing its request
	// first, the closed connection.)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{tlsFlags, []string{"401 Unauthorized"}},
		{[]string{"overhead", "--url", base, "--tls.ca-file", serverCert, "--basic-auth.username", "prom", "--basic-auth.password-file", password},
			[]string{"certificate", "broken pipe", "connection reset"}},
		{[]string{"overhead", "--url", base, "--tls.cert-file", clientCert, "--tls.key-file", clientKeyFile, "--basic-auth.username", "prom", "--basic-auth.password-file", password},
			[]string{"certificate signed by unknown authority"}},
	} {
		r := layerprobe(t, s.host, time.Minute, c.args...)
		if r.code != 1 || !slices.ContainsFunc(c.want, func(w string) bool { return strings.Contains(r.stderr, w) }) {
			t.Errorf("layerprobe %v: exit %d, stderr %q; want exit 1 naming one of %q", c.args[3:], r.code, r.stderr, c.want)
		}
	}
	if code, took := a.stop(); code != 0 || took > 20*time.Second {
		t.Errorf("SIGTERM: exit %d after %s", code, took)
	}
}

// selfSignedClient is a self-signed client certificate, its own CA.
func selfSignedClient(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "layerprobe-test-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
