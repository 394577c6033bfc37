package kubecluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is the cluster's certificate authority: the local cloud makes one per
// cluster, as EKS does, and every component's certificate comes from it.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
	now  time.Time
}

// Identity is one client's certificate and key in PEM.
type Identity struct {
	Cert, Key []byte
}

// NewCA makes a CA valid for a week from now.
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "vpcnet-local-cloud-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der), now: now}, nil
}

// PEM is the CA certificate.
func (ca *CA) PEM() []byte { return ca.pem }

// Client issues a client certificate for user in groups: the API server
// authenticates it as that user, as it does a kubelet's certificate.
func (ca *CA) Client(user string, groups ...string) (Identity, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Serving issues a server certificate for the names and addresses.
func (ca *CA) Serving(name string, dns []string, ips []net.IP) (Identity, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dns,
		IPAddresses: ips,
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (Identity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Identity{}, fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.NotBefore = ca.now.Add(-time.Hour)
	tmpl.NotAfter = ca.now.Add(7 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := sign(tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Identity{}, fmt.Errorf("sign certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := privatePEM(key)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Cert: pemBlock("CERTIFICATE", der), Key: keyPEM}, nil
}

// serviceAccountKey makes the key pair that signs service account tokens.
func serviceAccountKey() (public, private []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate service account key: %w", err)
	}
	if private, err = privatePEM(key); err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("service account public key: %w", err)
	}
	return pemBlock("PUBLIC KEY", der), private, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func privatePEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeKubeconfig writes a kubeconfig for id against server, trusting the
// CA, with the certificate inline so the file is all a component needs.
func writeKubeconfig(path, server string, ca []byte, id Identity) error {
	b64 := func(b []byte) string { return base64Std(b) }
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local-cloud
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local-cloud
  context: {cluster: local-cloud, user: user}
current-context: local-cloud
`, server, b64(ca), b64(id.Cert), b64(id.Key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
