package iceberg_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	_ "github.com/duckdb/duckdb-go/v2" // the independent reader
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

func openSink(t *testing.T, dir string, adopt bool) *iceberg.Sink {
	t.Helper()
	s, err := iceberg.Open(context.Background(), iceberg.Options{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw", Adopt: adopt,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

const bigNumber = "123456789012345678901234567890.123456789012"

// batch encodes offsets first..last of partition p; offsets in bad are
// dead letters.
func batch(p int32, first, last int64, bad ...int64) *sink.Batch {
	return batchOf("traces", p, first, last, bad...)
}

// batchOf is batch of topic.
func batchOf(topic string, p int32, first, last int64, bad ...int64) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: topic, Partition: p}, First: first, Last: last}
	for o := first; o <= last; o++ {
		rec := &kgo.Record{Topic: topic, Partition: p, Offset: o, Key: []byte{0xff, byte(o)}, Timestamp: time.Now(),
			Value: fmt.Appendf(nil, `{"o":%d,"big":%s}`, o, bigNumber)}
		if slices.Contains(bad, o) {
			rec.Value = []byte{0xfe, 'x'}
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not UTF-8", envelope.StageDecode)
			r.DLQ++
			continue
		}
		b.Records = append(b.Records, sink.Record{Record: rec, ID: [16]byte{byte(p), byte(o >> 8), byte(o)}})
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	return b
}

func load(t *testing.T, s *iceberg.Sink, batches ...*sink.Batch) sink.Loaded {
	t.Helper()
	l, _, err := tryLoad(t, s, batches...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// tryLoad stages batches (failing the test if one cannot be) and loads
// them, returning the files and the load's error.
func tryLoad(t *testing.T, s *iceberg.Sink, batches ...*sink.Batch) (sink.Loaded, []sink.File, error) {
	t.Helper()
	var files []sink.File
	for _, b := range batches {
		f, err := s.Stage(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	l, err := s.Load(context.Background(), files)
	return l, files, err
}

// prepared opens n sinks on the warehouse in dir, each prepared: the
// processes of one table.
func prepared(t *testing.T, dir string, n int) []*iceberg.Sink {
	t.Helper()
	out := make([]*iceberg.Sink, n)
	for i := range out {
		out[i] = openSink(t, dir, false)
		if err := out[i].Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// stored reads a table back with a scan (Sink.Stored) and returns the
// sorted offsets per partition of topic "traces", failing on any offset
// stored twice.
func stored(t *testing.T, s *iceberg.Sink, dlq bool) map[int32][]int64 {
	t.Helper()
	m, err := s.Stored(context.Background(), dlq)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]int64{}
	for tp, offs := range m {
		union, dups := sink.Coverage(offs)
		if dups != 0 {
			t.Errorf("%v: %d rows stored twice", tp, dups)
		}
		for _, r := range union {
			for o := r.First; o <= r.Last; o++ {
				out[tp.Partition] = append(out[tp.Partition], o)
			}
		}
	}
	return out
}

// rawData returns the raw_data of every raw row.
func rawData(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	var out []string
	scanRaw(t, s, func(rec arrow.RecordBatch) {
		col := rec.Column(0).(*array.String)
		for i := range col.Len() {
			out = append(out, col.Value(i))
		}
	}, "raw_data")
	return out
}

// scanRaw scans columns of the raw table's current snapshot with
// iceberg-go and hands each record batch to fn, columns in that order.
func scanRaw(t *testing.T, s *iceberg.Sink, fn func(arrow.RecordBatch), columns ...string) {
	t.Helper()
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields(columns...)).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		fn(rec)
		rec.Release()
	}
}

// wantAllReferenced checks that the warehouse under dir holds no Parquet
// file the tables do not reference; after says when, for the message.
func wantAllReferenced(t *testing.T, s *iceberg.Sink, dir, after string) {
	t.Helper()
	if left := unreferenced(t, s, filepath.Join(dir, "warehouse")); len(left) != 0 {
		t.Errorf("files left %s: %v", after, left)
	}
}

// unreferenced lists the Parquet files under root (the warehouse's
// directory on disk) that the current snapshot of neither table
// references. Files are matched by name: their names are unique.
func unreferenced(t *testing.T, s *iceberg.Sink, root string) []string {
	t.Helper()
	referenced := map[string]bool{}
	for _, dlq := range []bool{false, true} {
		files, err := s.DataFiles(context.Background(), dlq)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			referenced[pathpkg.Base(f.FilePath())] = true
		}
	}
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") && !referenced[filepath.Base(path)] {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func seq(first, last int64, except ...int64) []int64 {
	var out []int64
	for o := first; o <= last; o++ {
		if !slices.Contains(except, o) {
			out = append(out, o)
		}
	}
	return out
}

func TestLoadPositionsAndReadBack(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := load(t, s, batch(0, 0, 99, 7, 50), batch(1, 0, 49), batch(0, 100, 149))
	if len(l.Ranges) != 2 || l.Ranges[0].Records != 148 || l.Ranges[0].DLQ != 2 || l.Ranges[1].Records != 50 {
		t.Errorf("loaded %+v", l.Ranges)
	}
	got := stored(t, s, false)
	if !slices.Equal(got[0], seq(0, 149, 7, 50)) || !slices.Equal(got[1], seq(0, 49)) {
		t.Errorf("raw offsets %v", got)
	}
	if data := rawData(t, s); !strings.Contains(data[0], `"big":`+bigNumber) {
		t.Errorf("raw_data changed: %s", data[0])
	}
	if d := stored(t, s, true); !slices.Equal(d[0], []int64{7, 50}) {
		t.Errorf("dead-letter offsets %v", d)
	}
	next, err := s.Positions(context.Background(), []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}, {Topic: "traces", Partition: 2}})
	if err != nil || next[sink.TopicPartition{Topic: "traces", Partition: 0}] != 150 || next[sink.TopicPartition{Topic: "traces", Partition: 1}] != 50 || len(next) != 2 {
		t.Errorf("positions %v %v", next, err)
	}

	// A load repeated (a lost reply, a former owner) adds nothing, not
	// even a commit; an overlapping one adds only what is past the
	// positions.
	metadataLocation := func() string {
		raw, _ := s.Identifiers()
		tbl, err := s.Catalog().LoadTable(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		return tbl.MetadataLocation()
	}
	before := metadataLocation()
	load(t, s, batch(0, 100, 149))
	if after := metadataLocation(); after != before {
		t.Errorf("a repeated load committed: metadata %s, was %s", after, before)
	}
	load(t, s, batch(0, 140, 159, 155))
	got = stored(t, s, false)
	if !slices.Equal(got[0], seq(0, 159, 7, 50, 155)) {
		t.Errorf("raw offsets after replays %v", got[0])
	}
	if d := stored(t, s, true); !slices.Equal(d[0], []int64{7, 50, 155}) {
		t.Errorf("dead-letter offsets after replays %v", d)
	}
}

// One load of files that cover the same offsets (a partition back on the
// same worker, read again while its first file was pending) adds each
// offset once, row or dead letter: each file is fenced by the positions
// advanced past the files before it.
func TestFenceIsCumulativeWithinALoad(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9, 2), batch(0, 5, 14, 7, 12), batch(0, 15, 19))
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 19, 2, 12)) {
		t.Errorf("raw offsets %v, want 0..19 but 2 and 12", got[0])
	}
	if d := stored(t, s, true); !slices.Equal(d[0], []int64{2, 12}) {
		t.Errorf("dead-letter offsets %v, want [2 12]", d[0])
	}
}

// Two processes' sinks on one catalog: loads of the same partition never
// double a row, whoever commits first.
func TestTwoWritersOnOneCatalog(t *testing.T) {
	dir := t.TempDir()
	a, b := openSink(t, dir, false), openSink(t, dir, false)
	if err := a.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, a, batch(0, 0, 99))
	// b read nothing before; it loads an overlapping batch, as a new owner
	// of the partition whose position was read before a's commit would.
	load(t, b, batch(0, 50, 199))
	if got := stored(t, a, false); !slices.Equal(got[0], seq(0, 199)) {
		t.Errorf("offsets %v", got[0])
	}
}

// A table with data but no positions is refused unless adopted.
func TestForeignTableIsRefusedUnlessAdopted(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9))
	if err := s.RemovePositions(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := openSink(t, dir, false).Prepare(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has data but no tracelake positions") || !strings.Contains(err.Error(), "sink.iceberg.adopt: true") {
		t.Fatalf("got %v", err)
	}
	if err := openSink(t, dir, true).Prepare(context.Background()); err != nil {
		t.Fatalf("adopt: %v", err)
	}
}

// DuckDB's read_parquet over the data files of the current snapshot, a
// reader that knows nothing of iceberg-go, sees the same rows with the
// value text byte for byte.
func TestDuckDBReadsTheDataFiles(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 99, 3))
	load(t, s, batch(0, 100, 199), batch(2, 0, 9))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, task := range tasks {
		paths = append(paths, "'"+strings.TrimPrefix(task.File.FilePath(), "file://")+"'")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, distinct, exact int64
	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (kpartition, koffset)), count(*) FILTER (WHERE raw_data = '{"o":' || koffset || ',"big":%s}')
		FROM read_parquet([%s])`, bigNumber, strings.Join(paths, ", "))
	if err := db.QueryRow(q).Scan(&n, &distinct, &exact); err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || n != 209 || distinct != 209 || exact != 209 {
		t.Errorf("%d data files; DuckDB reads %d rows, %d distinct, %d with the exact value text; want 3 files (one per batch), 209", len(paths), n, distinct, exact)
	}
}

// What a reader other than iceberg-go relies on agrees with the data: each
// Parquet file, read by DuckDB, has the record count and the koffset and
// kpartition bounds its manifest entry claims and carries the Iceberg
// field ids (engines map columns by id, not name); the metadata file has
// the fields the spec requires of a format-v2 table and snapshot.
func TestOtherReadersAgreeWithTheMetadata(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 99, 3), batch(1, 40, 59))
	load(t, s, batch(0, 100, 199), batch(2, 7, 9))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const offsetID, partitionID = 2, 3 // rawSchema's field ids
	for _, task := range tasks {
		f := task.File
		path := strings.TrimPrefix(f.FilePath(), "file://")
		var n, minOff, maxOff int64
		var minPart, maxPart int32
		if err := db.QueryRow(`SELECT count(*), min(koffset), max(koffset), min(kpartition), max(kpartition) FROM read_parquet(?)`, path).
			Scan(&n, &minOff, &maxOff, &minPart, &maxPart); err != nil {
			t.Fatal(err)
		}
		lo, hi := f.LowerBoundValues(), f.UpperBoundValues()
		if n != f.Count() || len(lo[offsetID]) != 8 || len(hi[partitionID]) != 4 ||
			int64(binary.LittleEndian.Uint64(lo[offsetID])) != minOff || int64(binary.LittleEndian.Uint64(hi[offsetID])) != maxOff ||
			int32(binary.LittleEndian.Uint32(lo[partitionID])) != minPart || int32(binary.LittleEndian.Uint32(hi[partitionID])) != maxPart {
			t.Errorf("%s: DuckDB reads %d rows, koffset %d-%d, kpartition %d-%d; the manifest says %d rows, bounds %v / %v",
				path, n, minOff, maxOff, minPart, maxPart, f.Count(), lo, hi)
		}
		rows, err := db.Query(`SELECT name, field_id FROM parquet_schema(?) WHERE field_id IS NOT NULL`, path)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for rows.Next() {
			var name string
			var id int
			if err := rows.Scan(&name, &id); err != nil {
				t.Fatal(err)
			}
			ids[name] = id
		}
		rows.Close()
		for _, field := range tbl.Schema().Fields() {
			if ids[field.Name] != field.ID {
				t.Errorf("%s: column %s has Parquet field id %d, the table's schema %d", path, field.Name, ids[field.Name], field.ID)
			}
		}
	}
	if len(tasks) != 4 {
		t.Errorf("%d data files, want 4 (one per batch)", len(tasks))
	}

	// The metadata file, read as plain JSON.
	fsys, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file, err := fsys.Open(tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var meta map[string]any
	if err := json.NewDecoder(file).Decode(&meta); err != nil {
		t.Fatal(err)
	}
	if meta["format-version"] != 2.0 {
		t.Errorf("format-version %v, want 2", meta["format-version"])
	}
	// Iceberg spec, "Table Metadata Fields": required in v2.
	for _, key := range []string{"format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id",
		"schemas", "current-schema-id", "partition-specs", "default-spec-id", "last-partition-id", "sort-orders", "default-sort-order-id"} {
		if _, ok := meta[key]; !ok {
			t.Errorf("metadata lacks %s", key)
		}
	}
	snaps, _ := meta["snapshots"].([]any)
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots in the metadata, want 2", len(snaps))
	}
	for _, sn := range snaps {
		sn := sn.(map[string]any)
		for _, key := range []string{"snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary", "schema-id"} {
			if _, ok := sn[key]; !ok {
				t.Errorf("snapshot lacks %s: %v", key, sn)
			}
		}
		if op := sn["summary"].(map[string]any)["operation"]; op != "append" {
			t.Errorf("snapshot operation %v, want append", op)
		}
	}
}

// A lost commit race, on the catalog of many instances (a real
// PostgreSQL): two writers load concurrently; whoever loses retries as the
// pipeline would, and every row lands once.
func TestLostCommitRaceOnPostgres(t *testing.T) {
	url := icebergtest.StartPostgres(t)
	dir := t.TempDir()
	open := func() *iceberg.Sink {
		s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: url, Warehouse: filepath.Join(dir, "warehouse"),
			Namespace: "tracelake", Table: "trace_raw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	raceTwoWriters(t, open(), open(), filepath.Join(dir, "warehouse"))
}

// raceTwoWriters has two sinks on one catalog load a partition each, at
// the same time, retrying lost commits as the pipeline does, and checks
// that commits were lost and retried, every row is there once, and no data
// file of a lost commit is left behind.
func raceTwoWriters(t *testing.T, a, b *iceberg.Sink, warehouse string) {
	var lost atomic.Int64
	loadRetrying := func(s *iceberg.Sink, bt *sink.Batch) error {
		f, err := s.Stage(context.Background(), bt)
		if err != nil {
			return err
		}
		for attempt := 0; attempt < 50; attempt++ {
			if _, err = s.Load(context.Background(), []sink.File{f}); err == nil {
				return nil
			}
			lost.Add(1)
		}
		return err
	}
	// Each writer loads its partition in order, as a partition's owner
	// does; the two commit to the same tables at the same time.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w, s := range []*iceberg.Sink{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range int64(20) {
				bt := batch(0, i*10, i*10+9)
				if w == 1 {
					bt = batch(1, i*10, i*10+9, i*10)
				}
				if err := loadRetrying(s, bt); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := stored(t, a, false)
	var want1 []int64
	for o := int64(0); o < 200; o++ {
		if o%10 != 0 {
			want1 = append(want1, o)
		}
	}
	if !slices.Equal(got[0], seq(0, 199)) || !slices.Equal(got[1], want1) {
		t.Errorf("offsets %v", got)
	}
	if d := stored(t, a, true); len(d[1]) != 20 {
		t.Errorf("dead letters %v", d)
	}
	if files := unreferenced(t, a, warehouse); len(files) > 0 {
		t.Errorf("%d data files of lost commits were left behind: %v", len(files), files)
	}
	t.Logf("%d commits lost a race and were retried", lost.Load())
	if lost.Load() == 0 {
		t.Error("no commit lost a race: the test did not exercise the conflict")
	}
}

// openS3Sink opens a sink with a SQLite catalog and the warehouse
// s3://lake/warehouse on s3.
func openS3Sink(t *testing.T, s3 icebergtest.S3) *iceberg.Sink {
	t.Helper()
	s, err := iceberg.Open(context.Background(), iceberg.Options{
		Catalog: filepath.Join(t.TempDir(), "catalog.db"), Warehouse: "s3://lake/warehouse", Namespace: "tracelake", Table: "trace_raw",
		S3: iceberg.S3{Endpoint: s3.Endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// An s3:// warehouse on a real S3 server (versitygw): data and metadata go
// to the bucket, and the table reads back.
func TestS3Warehouse(t *testing.T) {
	s3 := icebergtest.StartS3(t, "lake")
	s := openS3Sink(t, s3)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 99, 5))
	load(t, s, batch(0, 50, 149))
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 149, 5)) {
		t.Errorf("offsets %v", got[0])
	}
	var parquet int
	_ = filepath.Walk(filepath.Join(s3.Root, "lake", "warehouse"), func(path string, _ os.FileInfo, _ error) error {
		if strings.HasSuffix(path, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet < 3 { // two raw loads and one dead-letter load
		t.Errorf("%d Parquet files in the bucket, want at least 3", parquet)
	}
}

// A table loaded every few seconds must not grow its metadata without
// bound: old metadata files are deleted, small manifests merged.
func TestMetadataStaysBounded(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	const loads = 130
	for i := range int64(loads) {
		load(t, s, batch(0, i, i))
	}
	metadataDir := filepath.Join(dir, "warehouse", "tracelake.db", "trace_raw", "metadata")
	jsons, err := filepath.Glob(filepath.Join(metadataDir, "*.metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jsons) > 101 { // the current one and the 100 before it
		t.Errorf("%d metadata files after %d commits", len(jsons), loads+1)
	}
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(manifests) >= loads {
		t.Errorf("%d manifests after %d appends: none merged", len(manifests), loads)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, loads-1)) {
		t.Errorf("offsets %v", got[0])
	}
}

// Another writer (a former owner of the partition) commits rows of a
// load's partition after the load wrote its data files and before it
// commits them: the load sees the positions moved, writes its files again
// without those rows, and no row is stored twice.
func TestPositionsMoveWhileWriting(t *testing.T) {
	dir := t.TempDir()
	a, b := openSink(t, dir, false), openSink(t, dir, false)
	if err := a.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The hook runs before a's dead-letter commit, then before its raw one.
	calls := 0
	a.SetBeforeLoadCommit(func() {
		calls++
		switch calls {
		case 1:
			load(t, b, batch(0, 0, 29, 10))
		case 2:
			load(t, b, batch(0, 30, 49))
		}
	})
	load(t, a, batch(0, 0, 99, 10, 60))
	if got := stored(t, a, false); !slices.Equal(got[0], seq(0, 99, 10, 60)) {
		t.Errorf("raw offsets %v", got[0])
	}
	if got := stored(t, a, true); !slices.Equal(got[0], []int64{10, 60}) {
		t.Errorf("dead-letter offsets %v", got[0])
	}
	if files := unreferenced(t, a, filepath.Join(dir, "warehouse")); len(files) > 0 {
		t.Errorf("files written by stale positions left behind: %v", files)
	}
}

// Two workers of one process load different partitions at once: the load
// arriving while the other commits waits, commits right after it, and
// keeps the positions the first committed.
func TestConcurrentLoadsKeepEachOthersPositions(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := make(chan sink.Loaded, 1)
	calls := 0
	s.SetBeforeLoadCommit(func() {
		if calls++; calls == 2 { // before the raw commit of the first load
			f, err := s.Stage(context.Background(), batch(1, 0, 9))
			if err != nil {
				t.Error(err)
				return
			}
			go func() {
				l, err := s.Load(context.Background(), []sink.File{f})
				if err != nil {
					t.Error(err)
				}
				second <- l
			}()
		}
	})
	first := load(t, s, batch(0, 0, 9))
	l := <-second
	if len(first.Ranges) != 1 || first.Ranges[0].Records != 10 || len(l.Ranges) != 1 || l.Ranges[0].Records != 10 || l.LoadID == first.LoadID {
		t.Errorf("loads %+v and %+v: want 10 rows each, in two commits", first, l)
	}
	pos, err := s.AllPositions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := sink.TopicPartition{Topic: "traces", Partition: 0}, sink.TopicPartition{Topic: "traces", Partition: 1}
	if pos[p0] != 10 || pos[p1] != 10 {
		t.Errorf("positions %v, want 10 for both partitions", pos)
	}
}

// Loads of several workers that arrive within GroupWait are one commit,
// one snapshot, each told its own rows.
func TestConcurrentLoadsShareACommit(t *testing.T) {
	ctx := context.Background()
	s := openGrouping(t)
	var wg sync.WaitGroup
	loaded := make([]sink.Loaded, 3)
	for p := range int32(3) {
		f, err := s.Stage(ctx, batch(p, 0, 9+int64(p), 5))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			l, err := s.Load(ctx, []sink.File{f})
			if err != nil {
				t.Error(err)
			}
			loaded[p] = l
		})
	}
	wg.Wait()
	for p, l := range loaded {
		if len(l.Ranges) != 1 || l.Ranges[0].Partition != int32(p) || l.Ranges[0].Records != 9+int64(p) || l.Ranges[0].DLQ != 1 {
			t.Errorf("load of partition %d: %+v, want %d rows and 1 dead letter", p, l, 9+p)
		}
	}
	if ops, err := s.Operations(ctx); err != nil || len(ops) != 1 {
		t.Errorf("raw snapshots %v (%v), want one commit for the three loads", ops, err)
	}
	for p := range int32(3) {
		if got := stored(t, s, false)[p]; len(got) != 9+int(p) {
			t.Errorf("partition %d: raw offsets %v", p, got)
		}
	}
}

// openGrouping opens a prepared sink whose loads wait 300 ms for others
// to share their commit.
func openGrouping(t *testing.T) *iceberg.Sink {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw", GroupWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// A load in a shared commit that names a batch this process never staged
// (a bug, or a file of a process that died) fails alone: the other loads
// of its group commit their rows.
func TestGroupCommitWithAnUnstagedLoad(t *testing.T) {
	ctx := context.Background()
	s := openGrouping(t)
	files := make([]sink.File, 3)
	for p := range int32(2) {
		f, err := s.Stage(ctx, batch(p, 0, 9))
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
	}
	files[2] = sink.File{Name: "never-staged", Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: 2}, First: 0, Last: 9, Records: 10}}}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for p := range files {
		wg.Go(func() { _, errs[p] = s.Load(ctx, files[p:p+1]) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the staged loads failed with the unstaged one: %v, %v", errs[0], errs[1])
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "was not staged in this process") {
		t.Errorf("the unstaged load: %v, want 'was not staged in this process'", errs[2])
	}
	rows := stored(t, s, false)
	if len(rows[0]) != 10 || len(rows[1]) != 10 || len(rows[2]) != 0 {
		t.Errorf("raw offsets per partition %v, want 0-9, 0-9 and none", rows)
	}
	if ops, err := s.Operations(ctx); err != nil || len(ops) != 1 {
		t.Errorf("raw snapshots %v (%v), want one commit for the two staged loads", ops, err)
	}
}

// The data files are Parquet compressed with zstd, with statistics per
// column chunk (which readers prune with, and which iceberg-go also puts
// in the manifests as bounds).
func TestParquetFilesAreZstdWithStatistics(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 100, 199))
	files, err := s.DataFiles(context.Background(), false)
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %v %v", files, err)
	}
	if lo, hi := files[0].LowerBoundValues()[2], files[0].UpperBoundValues()[2]; len(lo) != 8 || len(hi) != 8 ||
		binary.LittleEndian.Uint64(lo) != 100 || binary.LittleEndian.Uint64(hi) != 199 {
		t.Errorf("koffset bounds in the manifest: %v..%v, want 100..199", lo, hi)
	}
	rdr, err := file.OpenParquetFile(strings.TrimPrefix(files[0].FilePath(), "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	rg := rdr.MetaData().RowGroup(0)
	for c := range rg.NumColumns() {
		chunk, err := rg.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		set, err := chunk.StatsSet()
		if chunk.Compression() != compress.Codecs.Zstd || !set || err != nil {
			t.Errorf("column %s: %s, statistics %v %v", chunk.PathInSchema(), chunk.Compression(), set, err)
		}
	}
}

// A table whose commits the library would replay (commit.retry.num-retries
// other than 0) is refused, naming the property.
func TestReplayingTableIsRefused(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Prepare(context.Background()))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	must(err)
	txn := tbl.NewTransaction()
	must(txn.SetProperties(map[string]string{table.CommitNumRetriesKey: "4"}))
	_, err = txn.Commit(context.Background())
	must(err)
	err = s.Prepare(context.Background())
	if err == nil || !strings.Contains(err.Error(), "commit.retry.num-retries=4") {
		t.Errorf("Prepare: %v", err)
	}
}

// What the pipeline never does still gets a clear error, not a crash: NDJSON
// raw rows, and a load of a batch this process did not stage.
func TestStageAndLoadMisuse(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stage(context.Background(), &sink.Batch{Rows: []byte("{}\n")}); err == nil || !strings.Contains(err.Error(), "as records") {
		t.Errorf("NDJSON rows staged: %v", err)
	}
	f := sink.File{Name: batch(0, 0, 9).Name(), Ranges: batch(0, 0, 9).Ranges}
	if _, err := s.Load(context.Background(), []sink.File{f}); err == nil || !strings.Contains(err.Error(), "not staged in this process") {
		t.Errorf("unstaged batch loaded: %v", err)
	}
}

// A load's commit is pinned to the snapshot its positions were read from:
// when another instance commits in between, the commit fails and the
// retry reads the positions again — even on a table someone set
// commit.retry.num-retries on after tracelake started, where iceberg-go
// would otherwise replay the stale positions over the other instance's.
func TestLoadCommitIsPinnedToItsSnapshot(t *testing.T) {
	ctx := context.Background()
	// Through the REST catalog: its 409 is the conflict iceberg-go replays.
	rest := icebergtest.StartREST(t, openSink(t, t.TempDir(), false).Catalog(), "token")
	a, b := openREST(t, rest.URL, "tracelake", "token"), openREST(t, rest.URL, "tracelake", "token")
	for _, s := range []*iceberg.Sink{a, b} {
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.SetTableProperty(ctx, "commit.retry.num-retries", "3"); err != nil {
		t.Fatal(err)
	}
	if err := raceAndRetry(t, a, b); err == nil || !iceberg.LostRace(err) {
		t.Fatalf("a commit over another instance's: %v; want a lost race", err)
	}
	pos, err := a.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[sink.TopicPartition]int64{{Topic: "traces", Partition: 0}: 10, {Topic: "traces", Partition: 1}: 10}; !maps.Equal(pos, want) {
		t.Errorf("positions %v, want %v", pos, want)
	}
	if got := stored(t, a, false); !slices.Equal(got[0], seq(0, 9)) || !slices.Equal(got[1], seq(0, 9)) {
		t.Errorf("raw offsets %v: want 0-9 of both partitions once", got)
	}
}

// A table rolled back past tracelake's last load (an engine's
// rollback_to_snapshot) has positions ahead of its data: the start stops
// and says which positions would load the rolled-back records again.
func TestRollbackIsReportedAtStart(t *testing.T) {
	dir := t.TempDir()
	rolledBackTable(t, dir)
	wantRolledBack(t, "start after a rollback", openSink(t, dir, false).Prepare(context.Background()))
}

// A user's ALTER TABLE … ADD COLUMN (an optional column) does not stop
// tracelake: it starts, loads, and leaves the column null.
func TestAddedOptionalColumnIsAllowed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9))
	if err := s.AddRawColumn(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	s = openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("start after ADD COLUMN: %v", err)
	}
	load(t, s, batch(0, 10, 19))
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19)) {
		t.Errorf("raw offsets %v, want 0-19", got)
	}
}

// A load's commit does not read the table's manifests (its files' names
// are unique, so iceberg-go's duplicate check, a read of every manifest,
// would only cost time that grows with the table): a load commits even
// with an older manifest out of reach.
func TestLoadDoesNotReadOldManifests(t *testing.T) {
	ctx := context.Background()
	s := withLoads(t, 3, false)
	path, err := s.OldestManifest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path = strings.TrimPrefix(path, "file://")
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	f, err := s.Stage(ctx, batch(0, 30, 39))
	if err != nil {
		t.Fatal(err)
	}
	_, loadErr := s.Load(ctx, []sink.File{f})
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	if loadErr != nil {
		t.Fatalf("load read an old manifest: %v", loadErr)
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 39)) {
		t.Errorf("raw offsets %v, want 0-39", got)
	}
}

// withLoads opens a sink in a new directory and commits n loads of ten
// offsets of partition 0 each (with dlq, offset 3 of each a dead letter).
func withLoads(t *testing.T, n int64, dlq bool) *iceberg.Sink {
	t.Helper()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b := batch(0, i*10, i*10+9)
		if dlq {
			b = batch(0, i*10, i*10+9, i*10+3)
		}
		load(t, s, b)
	}
	return s
}

// Each load's catalog commit is reported (tracelake run puts it on
// /metrics): its duration, whether it lost to another writer, and the
// table's snapshot count and metadata size after it.
func TestCommitsAreReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var stats []iceberg.CommitStats
	a, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw", OnCommit: func(st iceberg.CommitStats) { stats = append(stats, st) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := openSink(t, dir, false)
	for _, s := range []*iceberg.Sink{a, b} {
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := raceAndRetry(t, a, b); err == nil {
		t.Fatal("the raced commit landed")
	}
	if len(stats) != 2 || stats[0].Table != "tracelake.trace_raw" || !stats[0].Conflict || stats[1].Conflict {
		t.Fatalf("commits reported %+v: want a conflict, then a commit of tracelake.trace_raw", stats)
	}
	if stats[1].Snapshots != 2 || stats[1].MetadataBytes < 1000 || stats[1].Took <= 0 {
		t.Errorf("after the second load's commit: %+v, want 2 snapshots and the metadata file's size", stats[1])
	}
	// The size is read at most once a minute, not on every load.
	load(t, a, batch(0, 10, 19))
	if last := stats[len(stats)-1]; last.Snapshots != 3 || last.MetadataBytes != 0 {
		t.Errorf("the next commit within the minute: %+v, want 3 snapshots and no size read", last)
	}
}

// raceAndRetry loads offsets 0-9 of partition 0 into a while b commits
// offsets 0-9 of partition 1 between a's read of the positions and its
// commit, then loads the same file into a again; it returns the first
// load's error.
func raceAndRetry(t *testing.T, a, b *iceberg.Sink) error {
	t.Helper()
	ctx := context.Background()
	raced := false
	a.SetBeforeCatalogCommit(func() {
		if !raced {
			raced = true
			load(t, b, batch(1, 0, 9))
		}
	})
	f, err := a.Stage(ctx, batch(0, 0, 9))
	if err != nil {
		t.Fatal(err)
	}
	_, first := a.Load(ctx, []sink.File{f})
	if _, err := a.Load(ctx, []sink.File{f}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	return first
}

// Positions are kept per partition: two writers whose commits touch
// different partitions cannot reset each other's, even when neither adds a
// raw data file (a load of dead letters only commits an empty snapshot
// with its positions).
func TestConcurrentCommitsKeepEachOthersPositions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openSink(t, dir, false), openSink(t, dir, false)
	if err := a.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	commits := 0
	a.SetBeforeCatalogCommit(func() {
		// The second commit of a's load is the raw table's: b loads its
		// partition right before it lands.
		if commits++; commits == 2 {
			load(t, b, batch(1, 0, 9, seq(0, 9)...))
		}
	})
	// b's load made a snapshot, so a's commit, read before it, loses the
	// race; a's dead-letter commit landed, so a commits again at once,
	// reading the positions again.
	load(t, a, batch(0, 0, 9, seq(0, 9)...))
	pos, err := a.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[sink.TopicPartition]int64{{Topic: "traces", Partition: 0}: 10, {Topic: "traces", Partition: 1}: 10}; !maps.Equal(pos, want) {
		t.Errorf("positions %v, want %v", pos, want)
	}
	// Each position is a property of its own, and no snapshot summary
	// carries them all.
	props, err := a.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"tracelake.position.traces.0", "tracelake.position.traces.1"} {
		if props[key] != "10" {
			t.Errorf("property %s = %q, want 10", key, props[key])
		}
	}
}

// Two owners of a partition (during a rebalance) each loading dead letters
// only: the stale owner's commit, its positions read before the other's
// commit, loses the race instead of setting the position back. It did
// not when such loads committed properties alone: no snapshot, so the
// snapshot assertion held and the catalog applied the stale positions
// (records read again, not lost, but the fence lowered).
func TestStaleDeadLetterOnlyLoadDoesNotLowerThePosition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openSink(t, dir, false), openSink(t, dir, false)
	if err := a.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, a, batch(0, 0, 4)) // the table has a snapshot, as it usually does
	commits := 0
	a.SetBeforeCatalogCommit(func() {
		// a's second commit is the raw table's: the new owner b loads
		// the partition further right before it lands.
		if commits++; commits == 2 {
			load(t, b, batch(0, 5, 19, seq(5, 19)...))
		}
	})
	f, err := a.Stage(ctx, batch(0, 5, 9, seq(5, 9)...))
	if err != nil {
		t.Fatal(err)
	}
	// Its raw commit loses the race and, its dead-letter commit landed,
	// is made again: the positions then cover the batch.
	if _, err := a.Load(ctx, []sink.File{f}); err != nil {
		t.Errorf("the stale owner's load: %v", err)
	}
	pos, err := a.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := pos[sink.TopicPartition{Topic: "traces"}]; got != 20 {
		t.Errorf("position %d, want 20 (the new owner's)", got)
	}
	if got := stored(t, a, true)[0]; !slices.Equal(got, seq(5, 19)) {
		t.Errorf("dead letters %v, want 5-19 once", got)
	}
}

// A member of a group commit that fails alone (it names a batch not
// staged here) keeps its staged batches: its Discard deletes their files.
// The group's commit forgot them, and they waited for orphan cleanup.
func TestFailedGroupMemberCanDiscard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	stage := func(p int32) sink.File {
		f, err := s.Stage(ctx, batch(p, 0, 9))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first, good, failing := stage(0), stage(1), stage(2)
	unstaged := sink.File{Name: "never-staged", Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: 3}, First: 0, Last: 9, Records: 10}}}
	// The first load holds the commit while the two others queue up:
	// they make the next group, together.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.SetBeforeLoadCommit(func() { once.Do(func() { close(entered); <-release }) })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() { _, errs[0] = s.Load(ctx, []sink.File{first}) })
	<-entered
	wg.Go(func() { _, errs[1] = s.Load(ctx, []sink.File{good}) })
	wg.Go(func() { _, errs[2] = s.Load(ctx, []sink.File{failing, unstaged}) })
	waitUntil(t, func() bool { return s.Queued() == 2 })
	close(release)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Fatalf("loads: %v", errs)
	}
	before := unreferenced(t, s, filepath.Join(dir, "warehouse"))
	if len(before) == 0 {
		t.Fatal("the failed load's staged files are gone before its Discard")
	}
	s.Discard([]sink.File{failing})
	wantAllReferenced(t, s, dir, "after the failed load's Discard")
}

// waitUntil waits (up to 10 s) for cond.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A table written before positions were kept per partition (one JSON
// property) goes on from its positions, and its first load moves them all
// to properties of their own.
func TestLegacyPositionsAreMigrated(t *testing.T) {
	ctx := context.Background()
	s := withLoads(t, 1, false)
	legacy := `[{"topic":"traces","partition":0,"next":10},{"topic":"traces","partition":5,"next":70}]`
	if err := s.RemovePositions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTableProperty(ctx, "tracelake.positions", legacy); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 5, 19))
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19)) {
		t.Errorf("raw offsets %v, want 0-19 once", got)
	}
	props, err := s.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := props["tracelake.positions"]; ok || props["tracelake.position.traces.0"] != "20" || props["tracelake.position.traces.5"] != "70" {
		t.Errorf("properties after the first load: %v", props)
	}
}

// A day of commits at the default commit interval (1,440 loads, one a
// minute) leaves a metadata file every commit rewrites and every reader
// parses of a bounded size: the snapshot summaries keep a load id and
// the load's own positions, never all of them, and the metadata log is
// capped.
func TestLongMetadataOfADayOfCommitsStaysSmall(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("1,440 commits, ~3 minutes without the race detector: go test -run '^TestLong' ./...")
	}
	ctx := context.Background()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	const commits, partitions = 1440, 16
	for i := range int64(commits) {
		// Each commit loads a few of 16 partitions, as a busy topic's would.
		p := int32(i % partitions)
		load(t, s, batch(p, i*2, i*2+1), batch((p+1)%partitions, i*2, i*2+1))
	}
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	size := fileSizeOf(t, tbl.MetadataLocation())
	snaps := len(tbl.Metadata().Snapshots())
	t.Logf("%d snapshots, metadata file %d KiB (%d bytes a snapshot)", snaps, size>>10, size/int64(snaps))
	if snaps != commits || size > 1500<<10 {
		t.Errorf("%d snapshots, metadata file %d KiB; want %d snapshots in at most 1500 KiB", snaps, size>>10, commits)
	}
}

func fileSizeOf(t *testing.T, location string) int64 {
	t.Helper()
	info, err := os.Stat(strings.TrimPrefix(location, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// Staging writes data files; a batch the pipeline drops (Discard: its
// records will be read again) leaves none behind, and one staged again
// under its name is the same file, not a second one.
func TestDiscardedBatchLeavesNoFiles(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := batch(0, 0, 9, 4) // raw rows and a dead letter: a file in each table
	f, err := s.Stage(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.Stage(context.Background(), b); err != nil || again.Bytes != f.Bytes {
		t.Fatalf("staged again: %+v (%v), want %+v", again, err, f)
	}
	if staged := unreferenced(t, s, filepath.Join(dir, "warehouse")); len(staged) != 2 {
		t.Fatalf("%d staged files, want 2 (raw and dead letters): %v", len(staged), staged)
	}
	s.Discard([]sink.File{f})
	wantAllReferenced(t, s, dir, "behind by a discarded batch")
	if _, err := s.Load(context.Background(), []sink.File{f}); err == nil || !strings.Contains(err.Error(), "not staged in this process") {
		t.Errorf("load of a discarded batch: %v", err)
	}
}

// A position property that is not tracelake's (edited by hand) stops the
// load with its name and what is accepted, rather than loading from a
// guess.
func TestMalformedPositionIsRefused(t *testing.T) {
	s := withLoads(t, 1, false)
	if err := s.SetTableProperty(context.Background(), "tracelake.position.traces.0", "ten"); err != nil {
		t.Fatal(err)
	}
	f, err := s.Stage(context.Background(), batch(0, 10, 19))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(context.Background(), []sink.File{f})
	if err == nil || !strings.Contains(err.Error(), `tracelake.position.traces.0="ten"`) || !strings.Contains(err.Error(), "the next offset to load") {
		t.Fatalf("load over a malformed position: %v", err)
	}
	if _, err := s.AllPositions(context.Background()); err == nil {
		t.Error("positions read over a malformed property")
	}
}

// headeredDLQBatch is offsets 0-1 of partition 0, offset 1 a dead letter;
// each record has a tenant header, a header whose value is not UTF-8 and
// a timestamp.
func headeredDLQBatch() (*sink.Batch, time.Time) {
	at := time.Date(2026, 3, 1, 12, 34, 56, 789_000_000, time.UTC)
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: 0, Last: 1, Records: 1, DLQ: 1}}}
	for o := int64(0); o <= 1; o++ {
		rec := &kgo.Record{Topic: "traces", Offset: o, Timestamp: at, Value: []byte(`{"o":1}`),
			Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("team-a")}, {Key: "bin", Value: []byte{0xff}}}}
		if o == 1 {
			rec.Value = []byte{0xfe}
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not UTF-8", envelope.StageDecode)
			continue
		}
		b.Records = append(b.Records, sink.Record{Record: rec, ID: [16]byte{byte(o)}})
	}
	return b, at
}

// dlqHeaders reads the dead-letter table's offset, headers and create_time
// as "offset headers create_time" lines ("null" for a null).
func dlqHeaders(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	ctx := context.Background()
	_, dlq := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("offset", "headers", "create_time")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		offs, headers, created := rec.Column(idx("offset")).(*array.Int64), rec.Column(idx("headers")).(*array.String), rec.Column(idx("create_time")).(*array.Timestamp)
		for i := range int(rec.NumRows()) {
			h, c := "null", "null"
			if headers.IsValid(i) {
				h = headers.Value(i)
			}
			if created.IsValid(i) {
				c = time.UnixMicro(int64(created.Value(i))).UTC().Format(time.RFC3339Nano)
			}
			out = append(out, fmt.Sprintf("%d %s %s", offs.Value(i), h, c))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

const headeredJSON = `[{"key":"X-Scope-OrgID","value":"team-a"},{"key":"bin","value":"/w==","value_encoding":"base64"}]`

// A dead letter keeps its record's headers (as record_metadata holds them:
// a tenant sent as a Kafka header) and timestamp in the dead-letter
// table's headers and create_time. Before, the table held key and value
// only.
func TestDeadLettersKeepTheRecordsHeaders(t *testing.T) {
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
	b, at := headeredDLQBatch()
	load(t, s, b)
	want := []string{"1 " + headeredJSON + " " + at.Format(time.RFC3339Nano)}
	if got := dlqHeaders(t, s); !slices.Equal(got, want) {
		t.Errorf("dead letters:\n%v\nwant\n%v", got, want)
	}
}

// A dead-letter table made before headers and create_time existed gets
// them by schema evolution at start: its old files read null there, new
// dead letters keep theirs.
func TestOldDeadLetterTableGainsHeaders(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	_, dlq := first.Identifiers()
	cat := first.Catalog()
	if err := cat.DropTable(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	old := iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "topic", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "partition", Type: iceberggo.PrimitiveTypes.Int32},
		iceberggo.NestedField{ID: 3, Name: "offset", Type: iceberggo.PrimitiveTypes.Int64},
		iceberggo.NestedField{ID: 4, Name: "key", Type: iceberggo.PrimitiveTypes.Binary},
		iceberggo.NestedField{ID: 5, Name: "value", Type: iceberggo.PrimitiveTypes.Binary},
		iceberggo.NestedField{ID: 6, Name: "error", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 7, Name: "stage", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 8, Name: "add_time", Type: iceberggo.PrimitiveTypes.TimestampTz},
	)
	if _, err := cat.CreateTable(ctx, dlq, old); err != nil {
		t.Fatal(err)
	}
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	b, at := headeredDLQBatch()
	load(t, s, b)
	want := []string{"1 " + headeredJSON + " " + at.Format(time.RFC3339Nano)}
	if got := dlqHeaders(t, s); !slices.Equal(got, want) {
		t.Errorf("dead letters:\n%v\nwant\n%v", got, want)
	}
}
