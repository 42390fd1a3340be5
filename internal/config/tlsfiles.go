package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ServerTLS is the server TLS of t (otlp.tls or query.tls, named by key),
// its files read now; nil without a certificate. An error names the key
// of the file at fault (otlp.tls.cert_file: …). Validate reads the files
// the same way, so a missing or malformed one is a bad config, reported
// before anything is opened; reading them again when the server starts
// takes a file replaced in between.
func (t ReceiverTLS) ServerTLS(key string) (*tls.Config, error) {
	c, file, err := t.serverTLS()
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", key, file, err)
	}
	return c, nil
}

// serverTLS is ServerTLS with the file at fault (cert_file, key_file or
// client_ca_file) apart from its error, for Validate's one line per key.
func (t ReceiverTLS) serverTLS() (c *tls.Config, file string, err error) {
	if t.CertFile == "" {
		return nil, "", nil
	}
	certPEM, err := os.ReadFile(t.CertFile)
	if err != nil {
		return nil, "cert_file", err
	}
	// Checked alone first: tls.X509KeyPair does not say which of the two
	// files it could not read.
	if err := parseCertificates(certPEM); err != nil {
		return nil, "cert_file", fmt.Errorf("%s: %w", t.CertFile, err)
	}
	keyPEM, err := os.ReadFile(t.KeyFile)
	if err != nil {
		return nil, "key_file", err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, "key_file", fmt.Errorf("%s (the key of cert_file %s): %w", t.KeyFile, t.CertFile, err)
	}
	c = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		caPEM, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, "client_ca_file", err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, "client_ca_file", fmt.Errorf("%s: no PEM certificate in it", t.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, "", nil
}

// parseCertificates checks that data holds at least one PEM certificate
// and that each one parses.
func parseCertificates(data []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate in it")
	}
	return nil
}
