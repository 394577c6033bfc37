package kubetest

import (
	"crypto"
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

// pki is the key material one test cluster needs, all made fresh per
// cluster: a CA that signs the serving certificate and the admin client
// certificate, and the key pair that signs service account tokens.
type pki struct {
	caPEM        []byte
	servingPEM   []byte
	servingKey   []byte
	adminPEM     []byte
	adminKey     []byte
	saPublicKey  []byte
	saPrivateKey []byte
}

// adminUser is the admin client certificate's subject. The group
// system:masters is bound to cluster-admin by the apiserver's bootstrap
// policy and bypasses authorization, so admin calls never depend on RBAC
// objects a test applies.
var adminUser = pkix.Name{CommonName: "kubetest-admin", Organization: []string{"system:masters"}}

func newPKI(now time.Time) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}

	p := &pki{caPEM: pemBlock("CERTIFICATE", caDER)}
	p.servingPEM, p.servingKey, err = leaf(ca, caKey, now, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	p.adminPEM, p.adminKey, err = leaf(ca, caKey, now, &x509.Certificate{
		Subject:     adminUser,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account signing key: %w", err)
	}
	if p.saPrivateKey, err = privatePEM(saKey); err != nil {
		return nil, fmt.Errorf("service account signing key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service account public key: %w", err)
	}
	p.saPublicKey = pemBlock("PUBLIC KEY", saPub)
	return p, nil
}

// leaf issues a certificate from tmpl, signed by the CA, with a new key.
func leaf(ca *x509.Certificate, caKey crypto.Signer, now time.Time, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = privatePEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), keyPEM, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func privatePEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// files are the paths kube-apiserver reads the key material from.
type files struct {
	ca, servingCert, servingKey, saPublic, saPrivate string
}

// write puts the material kube-apiserver needs into dir, private keys
// readable by the owner only.
func (p *pki) write(dir string) (files, error) {
	f := files{
		ca:          filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
	}
	for _, w := range []struct {
		path string
		data []byte
	}{
		{f.ca, p.caPEM},
		{f.servingCert, p.servingPEM},
		{f.servingKey, p.servingKey},
		{f.saPublic, p.saPublicKey},
		{f.saPrivate, p.saPrivateKey},
	} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return files{}, fmt.Errorf("write %s: %w", w.path, err)
		}
	}
	return f, nil
}
