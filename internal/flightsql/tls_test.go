package flightsql

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	adbcfs "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
)

// pki is a test CA and what it issued, in PEM as clients are given them.
type pki struct {
	caPEM     string
	server    tls.Certificate
	clientPEM string // certificate chain
	keyPEM    string
	pool      *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tracelake test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		k, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
	}
	serverCert, serverKey := leaf(2, x509.ExtKeyUsageServerAuth)
	server, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := leaf(3, x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pki{
		caPEM:     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		server:    server,
		clientPEM: string(clientCert),
		keyPEM:    string(clientKey),
		pool:      pool,
	}
}

// Over TLS: a client that trusts the CA reads; one that does not, and a
// plaintext one, do not.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	_, s, _ := setup(t, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
	})
	uri := "grpc+tls://" + s.Addr
	trusted := map[string]string{adbcfs.OptionSSLRootCerts: p.caPEM}

	got := runQuery(t, adbcConn(t, uri, "a", "tok-a", trusted), allSpans)
	if len(got.names) != spanRows {
		t.Errorf("over TLS: %d rows, want %d", len(got.names), spanRows)
	}
	if _, err := tryQuery(t, uri, "a", "tok-a", nil); err == nil {
		t.Error("a client that does not trust the CA read over TLS")
	} else {
		t.Logf("refused: %v", err)
	}
	if _, err := tryQuery(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil); err == nil {
		t.Error("a plaintext client read from the TLS server")
	} else {
		t.Logf("refused: %v", err)
	}
}

// Over mutual TLS: a client with a certificate of the CA reads; one
// without a certificate does not, nor one with a certificate of another
// CA.
func TestMutualTLS(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	_, s, _ := setup(t, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12,
			ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	})
	uri := "grpc+tls://" + s.Addr
	withCert := func(c pki) map[string]string {
		return map[string]string{adbcfs.OptionSSLRootCerts: p.caPEM,
			adbcfs.OptionMTLSCertChain: c.clientPEM, adbcfs.OptionMTLSPrivateKey: c.keyPEM}
	}

	got := runQuery(t, adbcConn(t, uri, "a", "tok-a", withCert(p)), allSpans)
	if len(got.names) != spanRows {
		t.Errorf("over mutual TLS: %d rows, want %d", len(got.names), spanRows)
	}
	if _, err := tryQuery(t, uri, "a", "tok-a", map[string]string{adbcfs.OptionSSLRootCerts: p.caPEM}); err == nil {
		t.Error("a client without a certificate read over mutual TLS")
	} else {
		t.Logf("refused: %v", err)
	}
	if _, err := tryQuery(t, uri, "a", "tok-a", withCert(other)); err == nil {
		t.Error("a client with another CA's certificate read over mutual TLS")
	} else {
		t.Logf("refused: %v", err)
	}
}
