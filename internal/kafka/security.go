package kafka

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/tracelake/tracelake/internal/config"
)

// securityOptions turns kafka.tls and kafka.sasl into client options. The
// TLS files are read here (config.TLS.ClientTLS), as CheckFiles read them
// before anything started.
func securityOptions(k config.Kafka) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if k.TLS.Enabled {
		tc, err := k.TLS.ClientTLS()
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
