package obs

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	m := New()
	m.Loads.Inc()
	var ready Readiness
	srv, err := Listen("127.0.0.1:0", m, NewStatus(), ready.Why, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	base := "http://" + srv.Addr()

	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "sink not prepared") {
		t.Errorf("/readyz before ready = %d %q", code, body)
	}
	ready.SinkReady()
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "consumer group") {
		t.Errorf("/readyz before joining = %d %q", code, body)
	}
	ready.Join()
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz when ready = %d", code)
	}
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, "tracelake_loads_total 1") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, missing tracelake_loads_total 1:\n%.500s", code, body)
	}
}

// A taken port is an error at start, naming the key.
func TestListenTakenPort(t *testing.T) {
	m := New()
	srv, err := Listen("127.0.0.1:0", m, NewStatus(), func() string { return "" }, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if _, err := Listen(srv.Addr(), m, NewStatus(), func() string { return "" }, slog.Default()); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Errorf("second bind: %v", err)
	}
}
