package config

import (
	"strings"
	"testing"
)

// A cdc key without database change capture is an error naming that key:
// the error named the section ("cdc: applies to …"), and cdc.ready_delay
// was not checked at all, accepted and ignored.
func TestCDCKeyWithoutChangeCaptureIsNamed(t *testing.T) {
	for y, want := range map[string]string{
		"cdc: {ready_delay: 5m}": "cdc.ready_delay: applies to kafka.format debezium, canal or maxwell, got kafka.format json",
		"cdc: {idle: 1m}":        "cdc.idle: applies to kafka.format debezium, canal or maxwell, got kafka.format json",
	} {
		_, err := loadChecked(t, "kafka: {topics: [t]}\n"+y)
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want only %q", y, err, want)
		}
	}
	_, err := loadChecked(t, "kafka: {topics: [t]}\ncdc: {idle: 1m, shards: [{table: 'a_.*', as_table: a}]}")
	if err == nil || !strings.Contains(err.Error(), "cdc.idle: applies") || !strings.Contains(err.Error(), "cdc.shards: applies") {
		t.Errorf("two keys: %v", err)
	}
}
