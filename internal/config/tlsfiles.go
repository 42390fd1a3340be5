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
// of the file at fault (otlp.tls.cert_file: …). CheckFiles reads the files
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
	cert, file, err := keyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, file, err
	}
	c = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		if c.ClientCAs, err = certPool(t.ClientCAFile); err != nil {
			return nil, "client_ca_file", err
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, "", nil
}

// ClientTLS is the TLS the Kafka clients dial the brokers with (with
// kafka.tls.enabled), its files read now. An error names the key of the
// file at fault (kafka.tls.ca_file: …); CheckFiles reads them the same way.
func (t TLS) ClientTLS() (*tls.Config, error) {
	c, file, err := t.clientTLS()
	if err != nil {
		return nil, fmt.Errorf("kafka.tls.%s: %w", file, err)
	}
	return c, nil
}

// clientTLS is ClientTLS with the file at fault (ca_file, cert_file or
// key_file) apart from its error.
func (t TLS) clientTLS() (c *tls.Config, file string, err error) {
	c = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the operator asked for it, by name
	}
	if t.CAFile != "" {
		if c.RootCAs, err = certPool(t.CAFile); err != nil {
			return nil, "ca_file", err
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, file, err := keyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, file, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, "", nil
}

// keyPair reads a certificate and its key, and names the file at fault
// (cert_file or key_file) with an error.
func keyPair(certFile, keyFile string) (cert tls.Certificate, file string, err error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return cert, "cert_file", err
	}
	// Checked alone first: tls.X509KeyPair does not say which of the two
	// files it could not read.
	if err := parseCertificates(certPEM); err != nil {
		return cert, "cert_file", fmt.Errorf("%s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return cert, "key_file", err
	}
	if cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return cert, "key_file", fmt.Errorf("%s (the key of cert_file %s): %w", keyFile, certFile, err)
	}
	return cert, "", nil
}

// certPool reads the CA certificates of file.
func certPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return pool, nil
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
