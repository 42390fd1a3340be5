package tempo

import (
	"encoding/json"
	"net/http"
	"runtime"
)

// echo answers "echo" as Tempo's /api/echo does, through http.Error
// with status 200 (Grafana's datasource test calls it;
// cmd/tempo/app/modules.go echoHandler).
func (s *server) echo(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "echo", http.StatusOK)
}

// buildInfo answers Prometheus's build information shape, which Tempo's
// /api/status/buildinfo answers (cmd/tempo/app/app.go buildinfoHandler,
// prometheus/common/version).
func (s *server) buildInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]string{
		"version": s.Version, "revision": "", "branch": "", "buildUser": "", "buildDate": "",
		"goVersion": runtime.Version(),
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
