//go:build !js

package ws

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/transport"
)

func TestSelfSigned(t *testing.T) {
	srv, pool, err := SelfSigned("example.test", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	leaf := srv.Certificates[0].Leaf
	for _, host := range []string{"example.test", "192.0.2.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: pool}); err == nil {
		t.Error("the certificate verifies for a host it was not made for")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "example.test"}); err == nil {
		t.Error("the certificate verifies without its pool")
	}
}

// TestLoadCertificate serves /wss with a certificate read from PEM files.
func TestLoadCertificate(t *testing.T) {
	srv, pool, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, err := x509.MarshalPKCS8PrivateKey(srv.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificates[0].Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
	loaded, err := LoadCertificate(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	d, a := pair(t, New(&Config{ClientTLS: &tls.Config{RootCAs: pool}}), New(&Config{TLS: loaded}), "/ip4/127.0.0.1/tcp/0/wss")
	exchange(t, d, a, "loaded")
	if _, err := LoadCertificate(filepath.Join(dir, "missing.pem"), keyFile); err == nil {
		t.Error("LoadCertificate of a missing file succeeded")
	}
}

// TestUntrustedCertificate: a client without the self-signed certificate's pool refuses
// it.
func TestUntrustedCertificate(t *testing.T) {
	srv, _, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, New(&Config{TLS: srv}), "/ip4/127.0.0.1/tcp/0/wss", transport.ListenOptions{})
	serve(t, ln, 5*time.Second)
	if c, err := New(nil).Dial(t.Context(), ln.Multiaddr()); err == nil {
		c.Close()
		t.Error("dial of a server with a self-signed certificate succeeded without its pool")
	}
}
