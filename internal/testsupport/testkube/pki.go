package testkube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and the files made from it:
// the API server's serving certificate, a client certificate in
// system:masters that every component and the test use, and the service
// account signing key.
type pki struct {
	CA, ServerCert, ServerKey, AdminCert, AdminKey, SAKey, SAPub string
}

// newPKI writes the files into dir. ECDSA P-256 keys: fast to make, and
// the API server signs service account tokens with ES256.
func newPKI(dir string, serverIPs []net.IP, serverNames []string) (*pki, error) {
	p := &pki{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "apiserver.crt"),
		ServerKey:  filepath.Join(dir, "apiserver.key"),
		AdminCert:  filepath.Join(dir, "admin.crt"),
		AdminKey:   filepath.Join(dir, "admin.key"),
		SAKey:      filepath.Join(dir, "sa.key"),
		SAPub:      filepath.Join(dir, "sa.pub"),
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "layerprobe-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, names []string, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      subject,
			NotBefore:    now,
			NotAfter:     now.Add(48 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     names,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", subject.CommonName, err)
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writeKey(keyFile, key)
	}
	if err := leaf(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, serverIPs, serverNames, p.ServerCert, p.ServerKey); err != nil {
		return nil, err
	}
	// system:masters: every component (kubelet, controller manager,
	// scheduler), the API server towards the kubelet, helm and kubectl.
	if err := leaf(3, pkix.Name{CommonName: "layerprobe-test-admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil, p.AdminCert, p.AdminKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.SAKey, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

func writeKey(file string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(file, "EC PRIVATE KEY", der)
}

func writePEM(file, typ string, der []byte) error {
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
