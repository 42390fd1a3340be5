package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tracegen"
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

// BenchmarkS3Requests counts the S3 requests of loading 200,000 synthetic
// spans (20 batches of 10,000, ~180 MB of values) in one commit, each batch
// in files of its own (files=batch) or a worker's batches in shared,
// load-sized files (files=stream), and reports them per GB of values.
func BenchmarkS3Requests(b *testing.B) {
	const batches, per = 20, 10_000
	g := tracegen.New(1)
	var valueBytes int64
	var staged []*sink.Batch
	for i := range int64(batches) {
		bt := &sink.Batch{}
		for o := i * per; o < (i+1)*per; o++ {
			v := g.Append(nil)
			valueBytes += int64(len(v))
			bt.Records = append(bt.Records, sink.Record{Record: &kgo.Record{Topic: "t", Offset: o, Value: v, Timestamp: time.Now()},
				ID: [16]byte{byte(o), byte(o >> 8), byte(o >> 16)}})
		}
		bt.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: i * per, Last: (i+1)*per - 1, Records: per}}
		staged = append(staged, bt)
	}
	for _, stream := range []string{"", "worker"} {
		b.Run("files="+map[string]string{"": "batch", "worker": "stream"}[stream], func(b *testing.B) {
			ctx := context.Background()
			s3, reqs := icebergtest.CountRequests(b, icebergtest.StartS3(b, "lake"))
			for range b.N {
				s, err := iceberg.Open(ctx, iceberg.Options{
					Catalog: filepath.Join(b.TempDir(), "catalog.db"), Warehouse: "s3://lake/warehouse" + strconv.Itoa(rand.Int()), Namespace: "tracelake", Table: "trace_raw",
					S3: iceberg.S3{Endpoint: s3.Endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
				})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Prepare(ctx); err != nil {
					b.Fatal(err)
				}
				reqs.Take()
				var files []sink.File
				for _, bt := range staged {
					bt.Stream = stream
					f, err := s.Stage(ctx, bt)
					if err != nil {
						b.Fatal(err)
					}
					files = append(files, f)
				}
				if _, err := s.Load(ctx, files); err != nil {
					b.Fatal(err)
				}
				n := reqs.Take()
				written, err := s.DataFiles(ctx, false)
				if err != nil {
					b.Fatal(err)
				}
				gb := float64(valueBytes) / (1 << 30)
				b.ReportMetric(float64(n["PUT"])/gb, "PUT/GB")
				b.ReportMetric(float64(n["GET"]+n["HEAD"])/gb, "GET+HEAD/GB")
				b.ReportMetric(float64(n["LIST"]), "LISTs")
				b.ReportMetric(float64(len(written)), "files")
				s.Close()
			}
		})
	}
}
