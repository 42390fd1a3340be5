package loki

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// logsOverADay loads n log records of two tenants and seven services
// over one day in time order, as loads append them: an hour holds n/24,
// one tenant's service in it n/24/14. One line in a thousand holds
// "timeout".
func logsOverADay(b *testing.B, n int) *query.DuckDB {
	b.Helper()
	l := newLake(b)
	ctx := context.Background()
	day := int64(24 * time.Hour / time.Microsecond)
	insert := fmt.Sprintf(`INSERT INTO otel_logs (tenant_id, service_name, "time", observed_time, severity_text, severity_number, body,
			resource_attributes, log_attributes, time_unix_nano)
		SELECT CASE WHEN i %% 2 = 0 THEN 'a' ELSE 'b' END, 'svc-' || (i %% 7), t, t, 'INFO', 9,
			to_json(CASE WHEN i %% 1000 = 0 THEN 'upstream timeout after 30s id=' || i ELSE 'GET /api/item/' || i || ' status=' || (200 + i %% 5) || ' took=' || (i %% 97) || 'ms' END),
			('{"service.name":"svc-' || (i %% 7) || '","k8s.namespace.name":"ns-' || (i %% 3) || '"}')::JSON,
			('{"http.route":"/api/item","attempt":' || (i %% 3) || '}')::JSON, epoch_us(t) * 1000
		FROM (SELECT i, TIMESTAMP '2026-11-05 00:00:00' + INTERVAL (i * (%d // %d)) MICROSECONDS AS t FROM range(%d) r(i))`, day, n, n)
	for _, q := range []string{insert, `CHECKPOINT`} {
		if _, err := l.sink.DB().ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return l.reader
}

// BenchmarkLineFilterHour answers Grafana's queries over one hour of one
// tenant's service through the HTTP API: a line filter (the
// specification: at most 300 ms over 10 million records of two
// tenants), the stream without a filter, and Explore's log volume query
// of the line filter and of the whole stream.
func BenchmarkLineFilterHour(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	r := logsOverADay(b, n)
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: r, Tenants: tenancy.Resolver{Required: true}, Log: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, q string }{
		{"line_filter", `{service_name="svc-3"} |= "timeout"`},
		{"no_filter", `{service_name="svc-3"}`},
		{"log_volume", `sum by (level, detected_level) (count_over_time({service_name="svc-3"} |= "timeout" | drop __error__[1m]))`},
		{"log_volume_all", `sum by (level, detected_level) (count_over_time({service_name="svc-3"} | drop __error__[1m]))`},
	} {
		b.Run(c.name, func(b *testing.B) {
			v := url.Values{"query": {c.q}, "start": {fmt.Sprint(start.UnixNano())}, "end": {fmt.Sprint(start.Add(time.Hour).UnixNano())},
				"limit": {"1000"}, "step": {"60000ms"}}
			req := httptest.NewRequest("GET", "/loki/api/v1/query_range?"+v.Encode(), nil)
			req.Header.Set("X-Scope-OrgID", "a")
			var bytes int
			for b.Loop() {
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
				bytes = w.Body.Len()
			}
			b.ReportMetric(float64(n), "records_in_table")
			b.ReportMetric(float64(bytes), "answer_bytes")
		})
	}
}
