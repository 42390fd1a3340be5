package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// Scheduled maintenance in a load-mode run taking several signals
// (otlp.signals): every signal's tables are compacted and expired, not
// only kafka.signal's. Each OTLP request is a commit of its own, so a
// table left out gathers a small file and a snapshot per request, its
// metadata file (rewritten by every commit, parsed by every reader)
// growing without end.
func TestScheduledMaintenanceCoversEverySignalsTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	catalog, warehouse := filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("http: %q, signals: [traces, logs]", addr),
		fmt.Sprintf(`{type: iceberg, iceberg: {catalog: %q, warehouse: %q,
  maintenance: {every: 1s, small_files: 2, expire_after: 0s}}}`, catalog, warehouse))
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	defer run.stop(t)
	const requests = 3
	g := tracegen.New(3)
	post := func(path string, body []byte) { t.Helper(); run.postOTLP(t, addr, path, body) }
	for range requests {
		// Each a load of its own: a small file and a snapshot each.
		post("/v1/traces", marshalOTLP(t, "otlp_proto", g.OTLPTrace()))
		post("/v1/logs", marshalOTLPLogs(t))
	}
	tables := map[string]*iceberg.Sink{}
	for _, name := range []string{"otel_spans", "otel_logs"} {
		s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: catalog, Warehouse: warehouse, Namespace: "tracelake", Table: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		tables[name] = s
	}
	// state is a table's data files and snapshots.
	state := func(name string) (files, snapshots int) {
		s := tables[name]
		df, err := s.DataFiles(context.Background(), false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tbl, err := s.Catalog().LoadTable(context.Background(), []string{"tracelake", name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return len(df), len(tbl.Metadata().Snapshots())
	}
	// Rounds run every second: within a minute each table is down to one
	// file (its requests' files compacted) and one snapshot (the others
	// expired).
	deadline := time.Now().Add(time.Minute)
	for {
		var pending []string
		// The spans may fall in two day partitions (a file each), the
		// log records (no timestamp) all in one.
		if files, snaps := state("otel_spans"); snaps != 1 {
			pending = append(pending, fmt.Sprintf("otel_spans: %d data files, %d snapshots", files, snaps))
		}
		if files, snaps := state("otel_logs"); files != 1 || snaps != 1 {
			pending = append(pending, fmt.Sprintf("otel_logs: %d data files, %d snapshots", files, snaps))
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute of rounds every second, want each table expired to 1 snapshot, otel_logs compacted to 1 file:\n  %s\nrun log:\n%s",
				strings.Join(pending, "\n  "), run.log)
		}
		time.Sleep(200 * time.Millisecond) // polling the catalog for the rounds' commits
	}
	// The maintenance commands take every signal's tables too.
	out, err := exec.Command(bin, "expire", "--config", cfgPath, "--older-than", "0s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tracelake.otel_logs: expired") || !strings.Contains(string(out), "tracelake.otel_spans: expired") {
		t.Errorf("tracelake expire: %v, want both signals' tables expired:\n%s", err, out)
	}
}
