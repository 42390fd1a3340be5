package config

import (
	"fmt"
	"strings"
	"testing"
)

// A Databend DSN that does not parse is reported without any part of its
// password: url.Parse's reason quotes the piece it stopped at, and with
// a '#', '/' or '?' in the password (which ends the authority) that piece
// is the password's start (`invalid port ":s3c" after host`), with a '%'
// its escape (`invalid URL escape "%PW"`).
func TestUnparsableDSNErrorHoldsNoPassword(t *testing.T) {
	for _, pw := range []string{"s3c#retPW", "s3c/retPW", "s3c?retPW", "s3cret%PW"} {
		y := fmt.Sprintf("kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: \"databend://u:%s@host:8000/db\"}}", pw)
		_, err := loadChecked(t, y)
		if err == nil || !strings.Contains(err.Error(), "sink.databend.dsn: want databend://") {
			t.Errorf("password %q: error %v, want sink.databend.dsn named", pw, err)
			continue
		}
		for _, piece := range []string{"s3c", "PW"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("password %q: error shows %q of it: %v", pw, piece, err)
			}
		}
	}
}
