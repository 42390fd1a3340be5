package config

import (
	"strings"
	"testing"
)

// A secret carried in a URL's query is masked like the URL's password: a
// Databend DSN with a user and password kept its query as given, and with
// it an access_token (databend-go reads one there) printed whole by
// `tracelake config`; a postgres catalog URL its sslpassword. Harmless
// parameters (sslmode) stay readable.
func TestSecretQueryParametersRedacted(t *testing.T) {
	cfg := Default()
	cfg.Sink.Databend.DSN = "databend://u:pw1@h:8000/db?sslmode=disable&access_token=tok123"
	cfg.Sink.Iceberg.Catalog = "postgres://cat:pw2@db:5432/iceberg?sslpassword=kp99&sslmode=require"
	r := cfg.Redacted()
	for key, got := range map[string]string{"sink.databend.dsn": r.Sink.Databend.DSN, "sink.iceberg.catalog": r.Sink.Iceberg.Catalog} {
		for _, secret := range []string{"pw1", "pw2", "tok123", "kp99"} {
			if strings.Contains(got, secret) {
				t.Errorf("%s printed as %q: shows %q", key, got, secret)
			}
		}
	}
	if !strings.Contains(r.Sink.Databend.DSN, "sslmode=disable") || !strings.Contains(r.Sink.Iceberg.Catalog, "sslmode=require") {
		t.Errorf("a parameter that is no secret was masked: %q, %q", r.Sink.Databend.DSN, r.Sink.Iceberg.Catalog)
	}
}
