package otlp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

func (ca *testCA) issue(t *testing.T, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Both receivers over mutual TLS: a client with a certificate of the CA
// is served; one without a certificate never reaches the handler.
func TestMutualTLS(t *testing.T) {
	ca := newCA(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, x509.ExtKeyUsageServerAuth)},
		ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.TLS = serverTLS })
	pb, _ := traceRequest(t, 1)
	client := ca.issue(t, x509.ExtKeyUsageClientAuth)

	send := func(cert *tls.Certificate) (int, error) {
		cfg := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Post("https://"+r.Addr["http"]+"/v1/traces", contentProto, bytes.NewReader(pb))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := send(&client); err != nil || code != 200 {
		t.Fatalf("HTTPS with a client certificate: %d, %v", code, err)
	}
	if _, err := send(nil); err == nil {
		t.Error("HTTPS without a client certificate was served")
	}

	conn, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := exportRequest(t, pb)
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), req); err != nil {
		t.Errorf("gRPC over mutual TLS: %v", err)
	}
	noCert, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	if _, err := ptraceotlp.NewGRPCClient(noCert).Export(context.Background(), req); err == nil {
		t.Error("gRPC without a client certificate was served")
	}
	if n := len(fwd.stored()); n != 2 {
		t.Errorf("%d requests forwarded, want the 2 with certificates", n)
	}
}
