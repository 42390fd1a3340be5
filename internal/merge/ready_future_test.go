package merge

import (
	"testing"
	"time"
)

// A source time far past the clock is no time its partition reached. A
// Maxwell DDL message's ts is in milliseconds and was read as seconds
// before 2026-12-07: the truncation of a table-drop, or the schema change
// of a table-alter, loaded then stored a source time in the year 50000 as
// its partition's last (<table>_routes_reached keeps the greatest), and
// the decoder's fix left it there. Every round took the partition as
// having reached now, and marked each hour up to now done while its
// changes were still to load (here users' changes of h+20m and h+1h10m).
// Now a time more than a day past the load's clock is not the
// partition's progress: the partition's progress is unknown, holding its
// tables back, until the next load's changes replace it.
func TestMarkReadySourceTimeFarPastTheClockIsNoProgress(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "users", "c", 100, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	// What the decoder stored before 2026-12-07 for a Maxwell table-drop
	// of "ts":1589373562000 on the partition.
	if _, err := l.s.DB().Exec(`UPDATE cdc_routes_reached SET last_source_time = make_timestamp(1589373562000 * 1000000)`); err != nil {
		t.Fatal(err)
	}
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_users")
	l.at = h.Add(20 * time.Minute)
	l.change(0, "users", "u", 101, row(1, "u2"), "id")
	l.at = h.Add(time.Hour + 10*time.Minute)
	l.change(0, "users", "u", 102, row(1, "u3"), "id")
	l.flush()
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_users", "cdc_db_users|"+h.Format("2006-01-02 15"))
}
