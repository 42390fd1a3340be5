package config

import (
	"strings"
	"testing"
)

// A DSN without a user or password that does not parse is reported with
// the piece url.Parse stopped at: no secret can be in it, and the bad
// port is what there is to fix (before, `invalid port ":80x00" after
// host`; the password's redaction dropped it for every DSN).
func TestUnparsableDSNWithoutPasswordShowsThePiece(t *testing.T) {
	y := "kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: \"databend://dbhost:80x00/db?sslmode=disable\"}}"
	_, err := loadChecked(t, y)
	if err == nil || !strings.Contains(err.Error(), `invalid port ":80x00" after host`) {
		t.Errorf("error %v, want the bad port shown", err)
	}
}
