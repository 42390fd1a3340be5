package pipeline_test

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// testCA writes a CA certificate to dir and returns it with a TLS server
// config whose certificate it signed for "localhost".
func testCA(t *testing.T, dir string) (caFile string, server *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tracelake test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	must(t, err)
	caFile = filepath.Join(dir, "ca.pem")
	must(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}}
}

// Ingest through TLS (verified against a CA file) with each SASL mechanism.
func TestTLSAndSASL(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			caFile, srvTLS := testCA(t, t.TempDir())
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic), kfake.TLS(srvTLS),
				kfake.EnableSASL(), kfake.Superuser(mech, "ingest", "s3cret"))
			must(t, err)
			defer c.Close()

			cfg := testConfig(t, c)
			cfg.Kafka.TLS.Enabled = true
			cfg.Kafka.TLS.CAFile = caFile
			cfg.Kafka.TLS.ServerName = "localhost"
			cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.User, cfg.Kafka.SASL.Password = mech, "ingest", "s3cret"
			must(t, cfg.Validate())

			opts, err := kafka.ClientOptions(cfg.Kafka)
			must(t, err)
			cl, err := kgo.NewClient(opts...)
			must(t, err)
			defer cl.Close()
			for i := range 100 {
				produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			}
			s := openSink(t, cfg)
			runUntilIdle(t, cfg, s, &pipeline.Stats{})
			if rows, _ := verifyOK(t, cfg, s).Totals(); rows != 100 {
				t.Fatalf("rows = %d, want 100", rows)
			}
		})
	}
}

// A CA file that does not exist is reported with its key at start.
func TestTLSBadCAFile(t *testing.T) {
	c := newCluster(t, 1)
	cfg := testConfig(t, c)
	cfg.Kafka.TLS.Enabled = true
	cfg.Kafka.TLS.CAFile = "/nonexistent/ca.pem"
	_, err := kafka.ClientOptions(cfg.Kafka)
	if err == nil || !strings.Contains(err.Error(), "kafka.tls.ca_file") {
		t.Fatalf("err = %v", err)
	}
}
