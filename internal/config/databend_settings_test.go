package config

import (
	"strings"
	"testing"
)

// A DSN's query parameters that databend-go does not read itself become
// session settings. Some of them break the sink's contracts, and were
// passed to the server: idle_transaction_timeout_secs=0 has databend-query
// drop a load's transaction as soon as its first statement returns
// (HttpQueryManager::add_txn sleeps that long, then removes it), so every
// load failed and the process retried for ever; sql_dialect, timezone and
// the others the sink pins were overridden without a word. Such a DSN is
// refused at startup, naming the setting and what is accepted.
func TestDatabendDSNSettingsChecked(t *testing.T) {
	f := func(params string, want ...string) {
		t.Helper()
		yaml := `kafka: {topics: [t]}
sink: {type: databend, databend: {dsn: "databend://u:p@127.0.0.1:8000/db?sslmode=disable&` + params + `"}}`
		_, err := loadChecked(t, yaml)
		if len(want) == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", params, err)
			}
			return
		}
		if err == nil {
			t.Errorf("%s: accepted", params)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not contain %q:\n%v", params, w, err)
			}
		}
		if strings.Contains(err.Error(), ":p@") {
			t.Errorf("%s: the error shows the DSN's password: %v", params, err)
		}
	}
	f("idle_transaction_timeout_secs=0",
		`sink.databend.dsn: session setting idle_transaction_timeout_secs: tracelake sets it to 14400 itself; leave it out of the DSN, got "0"`)
	f("idle_transaction_timeout_secs=86400",
		`sink.databend.dsn: session setting idle_transaction_timeout_secs: tracelake sets it to 14400 itself; leave it out of the DSN, got "86400"`)
	f("idle_transaction_timeout_secs=1",
		`sink.databend.dsn: session setting idle_transaction_timeout_secs: tracelake sets it to 14400 itself; leave it out of the DSN, got "1"`)
	f("load_file_metadata_expire_hours=1",
		`sink.databend.dsn: session setting load_file_metadata_expire_hours: want at least 24, got "1"`)
	f("sql_dialect=MySQL&http_json_result_mode=driver&format_null_as_str=1",
		`sink.databend.dsn: session setting sql_dialect: tracelake sets it to PostgreSQL itself; leave it out of the DSN, got "MySQL"`,
		`sink.databend.dsn: session setting http_json_result_mode: tracelake sets it to display itself`,
		`sink.databend.dsn: session setting format_null_as_str: tracelake sets it to 0 itself`)
	f("timezone=Asia/Shanghai", "session setting timezone: tracelake sets it to UTC itself")
	f("max_result_rows=100", "session setting max_result_rows: tracelake sets it to 0 itself")
	f("enable_query_result_cache=1", "session setting enable_query_result_cache: tracelake sets it to 0 itself")
	// What the sink would set anyway, other settings and databend-go's
	// own parameters are accepted.
	f("idle_transaction_timeout_secs=14400&load_file_metadata_expire_hours=48&sql_dialect=PostgreSQL&max_threads=4&wait_time_secs=5&role=loader")
}
