package main

import (
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A bad certificate is reported under the key that names it: query.tls
// for the read side, where it read "query.tls: otlp.tls: …"; the file at
// fault is named too (query.tls.cert_file).
func TestReceiverTLSErrorsNameTheirKey(t *testing.T) {
	for _, key := range []string{"otlp.tls", "query.tls"} {
		_, err := receiverTLS(key, config.ReceiverTLS{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"})
		if err == nil || !strings.HasPrefix(err.Error(), key+".cert_file: ") || strings.Count(err.Error(), ".tls") != 1 {
			t.Errorf("%s: %v, want one error naming %s", key, err, key)
		}
	}
}
