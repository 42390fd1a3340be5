package prom

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
)

// TestFailHidesTheServersFilePaths: a failure of the read path (here a
// lookup's, answered as Prometheus's execution error) is answered without
// the file paths it names, as Flight SQL and the other APIs answer it; a
// request's own mistake (bad_data) is answered whole.
func TestFailHidesTheServersFilePaths(t *testing.T) {
	for _, c := range []struct {
		e    *apiError
		want string
	}{
		{execError(fmt.Errorf("expanding series: %w", &readError{errors.New("the query's scan failed: read otel_metrics: open /srv/lake/warehouse/m/data/x.parquet: no such file or directory")})),
			"expanding series: the query's scan failed: read otel_metrics: open <path>: no such file or directory"},
		{&apiError{errInternal, errors.New("encode /srv/lake/x: failed")}, "encode <path>: failed"},
		{execError(errors.New(`invalid regular expression in label_replace(): /api/v1/users/(`)), `invalid regular expression in label_replace(): /api/v1/users/(`},
		{badData(errors.New(`invalid parameter "match[]": /a/b`)), `invalid parameter "match[]": /a/b`},
	} {
		rec := httptest.NewRecorder()
		writer{log: slog.Default()}.fail(rec, c.e)
		var got response
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Error != c.want || rec.Code != c.e.typ.status {
			t.Errorf("answered %d %q, want %d %q", rec.Code, got.Error, c.e.typ.status, c.want)
		}
	}
}
