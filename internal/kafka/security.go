package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tracelake/tracelake/internal/config"
)

// securityOptions turns kafka.tls and kafka.sasl into client options. Files
// are read here, so a missing or bad certificate is reported at start with
// its key.
func securityOptions(k config.Kafka) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if k.TLS.Enabled {
		tc, err := tlsConfig(k.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: tc}).DialContext))
	}
	if k.SASL.Mechanism != "" {
		m, err := saslMechanism(k.SASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func tlsConfig(t config.TLS) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the operator asked for it, by name
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: no PEM certificate in %s", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func saslMechanism(s config.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "PLAIN":
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got %q", s.Mechanism)
}
