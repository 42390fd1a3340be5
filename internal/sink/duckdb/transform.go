package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

func (s *Sink) insertTransformed(ctx context.Context, tx *sql.Tx, p loadPlan, now time.Time) error {
	return errors.New("transform mode: not built yet")
}
