package config

import (
	"strings"
	"testing"
)

// Two listeners on one address is an error naming the second at startup,
// before any connection: it was accepted, and the process then failed
// to bind ("address already in use"). Port 0 (any free port) is no
// conflict, and different ports or hosts are none.
func TestListenersOnOneAddressAreAnError(t *testing.T) {
	for y, want := range map[string]string{
		"otlp: {grpc: '127.0.0.1:4317', http: '127.0.0.1:4317'}":              "otlp.grpc: 127.0.0.1:4317 is otlp.http's address too",
		"metrics: {listen: '127.0.0.1:4318'}\notlp: {http: '127.0.0.1:4318'}": "otlp.http: 127.0.0.1:4318 is metrics.listen's address too",
		"otlp: {http: ':4318'}\nquery: {http: '127.0.0.1:4318'}":              "query.http: 127.0.0.1:4318 is otlp.http's address too",
		"query: {flight_sql: '0.0.0.0:8815', http: '127.0.0.1:8815'}":         "query.http: 127.0.0.1:8815 is query.flight_sql's address too",
	} {
		_, err := loadChecked(t, "kafka: {topics: [t]}\n"+y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", y, err, want)
		}
	}
	for _, y := range []string{
		"metrics: {listen: '127.0.0.1:0'}\notlp: {http: '127.0.0.1:0', grpc: '127.0.0.1:0'}",
		"otlp: {http: '127.0.0.1:4318', grpc: '127.0.0.1:4317'}",
		"otlp: {http: '127.0.0.1:4318'}\nquery: {http: '127.0.0.2:4318'}",
	} {
		if _, err := loadChecked(t, "kafka: {topics: [t]}\n"+y); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
}
