package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TLS and basic auth from --web.config.file (exporter-toolkit) cover every
// route: /metrics, the API, health. No engine is needed for that: the agent
// serves (and records failed cycles) while its engine is unreachable.
func TestAgentWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	must(t, os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600))
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	must(t, err)
	webCfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prom: %s\n",
		filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), hash)
	must(t, os.WriteFile(filepath.Join(dir, "web.yml"), []byte(webCfg), 0o600))

	s := newAgentSetup(t, "unix:///tmp/lp-no-engine-here.sock", agentConfig)
	port := s.port
	cmd := []string{"--web.config.file", filepath.Join(dir, "web.yml")}
	a := s.startWith(t, cmd, false)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/healthz", nil)
		req.SetBasicAuth("prom", "s3cret-pass")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not answer over TLS: %v\n%s", err, a.Log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, path := range []string{"/", "/metrics", "/api/v1/overhead", "/api/v1/engines", "/healthz", "/api/v1/openapi.yaml"} {
		for _, c := range []struct {
			user, pass string
			want       int
		}{{"", "", 401}, {"prom", "wrong", 401}, {"prom", "s3cret-pass", 200}} {
			req, _ := http.NewRequest("GET", base+path, nil)
			if c.user != "" {
				req.SetBasicAuth(c.user, c.pass)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s as %q: %d, want %d", path, c.user, resp.StatusCode, c.want)
			}
		}
	}
	// Plain HTTP is not served.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered 200 with TLS configured")
		}
	}
	if code, took := a.stop(); code != 0 || took > 10*time.Second {
		t.Errorf("SIGTERM: exit %d after %s", code, took)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "layerprobe-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}
