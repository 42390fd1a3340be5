package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

// reconcile asked through a running run while commits go on beside it
// gives the verdict it gives on the stopped database: here every commit
// writes the same row to both tables (as one load writes several tables
// in one transaction), so no moment of the database has them differ, and
// reconcile must read one moment. Its queries (each side's count and
// hash sum, then the join by key) each read the commits made when they
// started: a commit between them counted a row on one side only, and
// reconcile said the tables differ (exit 1).
func TestReconcileThroughRunWhileItCommits(t *testing.T) {
	cfg, snk := servedEvents(t)
	db := snk.DB()
	for _, q := range []string{
		`CREATE TABLE copy_a AS SELECT range AS id, 'v' || range AS v FROM range(20000)`,
		`CREATE TABLE copy_b AS SELECT * FROM copy_a`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // commits beside the reads, as run's loads
		defer wg.Done()
		for id := 20000; ctx.Err() == nil; id++ {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return
			}
			for _, table := range []string{"copy_a", "copy_b"} {
				if _, err := tx.Exec("INSERT INTO "+table+" VALUES (?, ?)", id, "w"); err != nil {
					tx.Rollback() //nolint:errcheck // the test ends
					return
				}
			}
			if tx.Commit() != nil {
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		out, code := ask(t, cfg, "reconcile", "--left", "copy_a", "--right", "copy_b", "--key", "id")
		if code != exitOK {
			t.Fatalf("reconcile %d through run while it commits: exit %d (the tables are equal at every commit)\n%s", i, code, out)
		}
	}
}
