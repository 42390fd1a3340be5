package merge

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A model's DOUBLE or FLOAT column given a number past its range (1e400,
// 1e39 into a FLOAT) stored infinity: DuckDB's cast overflows without an
// error, so the row held another value than the raw message, with no
// reject. Such a row is rejected with the reason, as a fraction into an
// integer column is; "inf", DuckDB's own spelling, is infinity.
func TestModelRejectsANumberPastItsFloatingColumn(t *testing.T) {
	l := newRawLoader(t)
	m := config.Model{
		Name: "readings", Key: []string{"id"},
		Action: config.Action{Path: "$.action"},
		Columns: config.Columns{
			{Name: "id", Path: "$.id", Type: "BIGINT"},
			{Name: "d", Path: "$.d", Type: "DOUBLE"},
			{Name: "f", Path: "$.f", Type: "FLOAT"},
		},
	}.WithDefaults("trace_raw")
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	for _, line := range []string{
		`{"id":1,"d":1e308,"f":3e38}`,
		`{"id":2,"d":1e400}`,
		`{"id":3,"d":-1e400}`,
		`{"id":4,"f":1e39}`,
		`{"id":5,"d":"inf"}`,
	} {
		l.add(0, []byte(line))
	}
	l.flush()
	mustMerge(t, mg, m)
	want := []string{"1|1e+308|3e+38", "5|+Inf|<nil>"}
	if got := dump(t, l.db(), `SELECT id, d, f FROM readings ORDER BY id`); !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the numbers past their column's range rejected)", got, want)
	}
	if got := dump(t, l.db(), `SELECT count(*) FROM readings_rejects`); !slices.Equal(got, []string{"3"}) {
		t.Errorf("rejects: %v, want 3", got)
	}
}
