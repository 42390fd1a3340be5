package iceberg

import (
	"context"
	"testing"
)

// The row check's scratch database keeps to its own memory limit, not
// DuckDB's default of 80% of the machine's memory, beside the process's
// reading of the table.
func TestRowCheckKeepsToItsMemoryLimit(t *testing.T) {
	c, err := newRowCheck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var limit string
	if err := c.db.QueryRow(`SELECT current_setting('memory_limit')`).Scan(&limit); err != nil {
		t.Fatal(err)
	}
	if limit != "256.0 MiB" {
		t.Errorf("memory_limit %q, want 256.0 MiB", limit)
	}
}
