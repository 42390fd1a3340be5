package iceberg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// TestS3RequestCosts counts the S3 requests (through a counting proxy in
// front of versitygw) of loads, of a maintenance round and of a query of
// one hour, and reports them per GB loaded (docs/OPERATIONS.md). Loads
// list nothing: a LIST on the hot path would cost per commit what orphan
// cleanup costs per week.
func TestS3RequestCosts(t *testing.T) {
	ctx := context.Background()
	s3, reqs := icebergtest.CountRequests(t, icebergtest.StartS3(t, "lake"))
	s := openS3Sink(t, s3)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	reqs.Take()
	counted := iceberg.S3RequestCounts()
	const loads, perLoad = 20, 1000
	var loaded int64
	hour := time.Now().UTC().Truncate(time.Hour)
	for l := range int64(loads) {
		b := batch(0, l*perLoad, l*perLoad+perLoad-1)
		for i := range b.Records {
			b.Records[i].Record.Timestamp = hour.Add(time.Duration(i) * time.Millisecond)
			loaded += int64(len(b.Records[i].Record.Value))
		}
		load(t, s, b)
	}
	loadReqs := reqs.Take()
	// The process's own count (the metrics') agrees with the proxy's.
	if c := since(counted); c.Put != int64(loadReqs["PUT"]) || c.Get != int64(loadReqs["GET"]) || c.List != int64(loadReqs["LIST"]) {
		t.Errorf("the sink counted %+v for the loads, the proxy %v", c, loadReqs)
	}
	if loadReqs["LIST"] != 0 {
		t.Errorf("loads listed the bucket %d times; want none on the hot path", loadReqs["LIST"])
	}
	if _, err := s.NewMaintainer(roundOptions).Round(ctx); err != nil {
		t.Fatal(err)
	}
	roundReqs := reqs.Take()
	files, _, err := s.PlanRawHour(ctx, hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, false); len(got[0]) != loads*perLoad {
		t.Fatalf("%d rows read back, want %d", len(got[0]), loads*perLoad)
	}
	queryReqs := reqs.Take()
	perGB := func(m map[string]int) string {
		var parts []string
		for _, k := range []string{"PUT", "GET", "HEAD", "LIST", "DELETE"} {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, float64(m[k])*float64(1<<30)/float64(loaded)))
		}
		return strings.Join(parts, ", ")
	}
	t.Logf("%d loads of %d records (%d bytes of values): %v per load set; per GB loaded at this load size: %s", loads, perLoad, loaded, loadReqs, perGB(loadReqs))
	t.Logf("a maintenance round (compaction, manifests, expiry): %v", roundReqs)
	t.Logf("a query of one hour (planning, %d files, reading every row): %v", files, queryReqs)
	if queryReqs["LIST"] != 0 {
		t.Errorf("a query listed the bucket %d times; want none", queryReqs["LIST"])
	}
}

// since returns the requests S3RequestCounts counted after before.
func since(before iceberg.S3Requests) iceberg.S3Requests {
	now := iceberg.S3RequestCounts()
	return iceberg.S3Requests{Put: now.Put - before.Put, Get: now.Get - before.Get, Head: now.Head - before.Head,
		List: now.List - before.List, Delete: now.Delete - before.Delete}
}
