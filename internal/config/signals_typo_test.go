package config

import "testing"

// A misspelt signal in otlp.signals is one error: the list was also
// reported as lacking kafka.signal (traces, which "trace" meant), and a
// list of two misspelt ones was the same error twice.
func TestMisspeltOTLPSignalIsOneError(t *testing.T) {
	for y, want := range map[string]string{
		"otlp: {http: '127.0.0.1:4318', signals: [trace]}":      `otlp.signals: want traces, logs or metrics, each once, got ["trace"]`,
		"otlp: {http: '127.0.0.1:4318', signals: [trace, log]}": `otlp.signals: want traces, logs or metrics, each once, got ["trace" "log"]`,
		"otlp: {http: '127.0.0.1:4318', signals: [logs]}":       `otlp.signals: must hold kafka.signal (traces), whose rows go to sink.table, got ["logs"]`,
	} {
		_, err := loadChecked(t, y)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\nerror %v\nwant only %q", y, err, want)
		}
	}
}
