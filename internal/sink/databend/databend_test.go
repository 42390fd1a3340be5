package databend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

func open(t *testing.T, srv *databendtest.Server, dsnParams string) *databend.Sink {
	t.Helper()
	s, err := databend.Open(databend.Options{
		DSN: srv.DSN(dsnParams), Table: "trace_raw", Stage: "~", Prefix: "tracelake/trace_raw/",
		Purge: true, Zstd: true, Uploads: 3, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func prepared(t *testing.T, dsnParams string) (*databendtest.Server, *databend.Sink) {
	t.Helper()
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	s := open(t, srv, dsnParams)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, s
}

// bigNumber must reach Databend byte for byte.
const bigNumber = "123456789012345678901234567890.123456789"

// batch encodes offsets first..last of partition p of topic "traces" as
// the pipeline does for Databend (pretty-printed values, so the one-line
// encoding is exercised); offsets listed in bad are not JSON and become
// dead-letter rows.
func batch(p int32, first, last int64, bad ...int64) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: p}, First: first, Last: last}
	for o := first; o <= last; o++ {
		rec := &kgo.Record{Topic: "traces", Partition: p, Offset: o, Timestamp: time.Unix(1700000000, 0),
			Value: fmt.Appendf(nil, "{\n  \"o\": %d,\n  \"big\": %s\n}", o, bigNumber)}
		if slices.Contains(bad, o) {
			rec.Value = []byte("not json")
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not JSON", envelope.StageDecode)
			r.DLQ++
			continue
		}
		id := [16]byte{byte(p), byte(o >> 8), byte(o)}
		b.Rows = envelope.AppendRawRow(b.Rows, rec, &id, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	return b
}

func stage(t *testing.T, s *databend.Sink, batches ...*sink.Batch) []sink.File {
	t.Helper()
	var files []sink.File
	for _, b := range batches {
		f, err := s.Stage(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// offsets returns the koffsets of partition p in the raw table, checking
// each row's raw_data is the message as JSON (not a string holding it).
func offsets(t *testing.T, srv *databendtest.Server, p int) []int64 {
	t.Helper()
	var out []int64
	for _, r := range srv.Rows("trace_raw") {
		var part, off int64
		_ = json.Unmarshal(r["kpartition"], &part)
		_ = json.Unmarshal(r["koffset"], &off)
		if int(part) != p {
			continue
		}
		raw := string(r["raw_data"])
		if !strings.HasPrefix(raw, "{") || !strings.Contains(raw, `"big":`+bigNumber) || strings.Contains(raw, "\n") {
			t.Errorf("raw_data of offset %d is not the one-line JSON value: %s", off, raw)
		}
		out = append(out, off)
	}
	slices.Sort(out)
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

func count(stmts []string, prefix string) int {
	n := 0
	for _, s := range stmts {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func TestPrepareCreatesTablesAndIsIdempotent(t *testing.T) {
	srv, s := prepared(t, "")
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatalf("second prepare: %v", err)
	}
	stmts := srv.Statements()
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "trace_raw" ("uuid" VARCHAR, "koffset" BIGINT, "kpartition" INT, "raw_data" VARIANT NULL, "record_metadata" VARIANT, "add_time" TIMESTAMP DEFAULT NOW())`,
		`DESC "trace_raw_dlq"`,
		`DESC "trace_raw_ledger"`,
	} {
		if !slices.Contains(stmts, want) {
			t.Errorf("missing statement %s\nin %q", want, stmts)
		}
	}
}

func TestPrepareReportsEveryColumnDifference(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("trace_raw", []string{"uuid", "koffset", "raw_data", "extra"}, []string{"VARCHAR", "VARCHAR", "VARIANT", "INT"})
	err := open(t, srv, "").Prepare(context.Background())
	if err == nil {
		t.Fatal("prepare accepted a raw table with other columns")
	}
	for _, want := range []string{"table trace_raw exists with other columns", "column koffset is VARCHAR, want BIGINT",
		"column kpartition is missing (want INT)", "column extra is not one of tracelake's"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestPrepareTakesOverTheReferenceToolsTable(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	// The table of seeds/001, as bend-ingest-kafka users have it.
	srv.CreateTable("trace_raw", []string{"uuid", "koffset", "kpartition", "raw_data", "record_metadata", "add_time"},
		[]string{"STRING", "BIGINT", "INT", "JSON", "JSON", "TIMESTAMP"})
	if err := open(t, srv, "").Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestMultiFileLoad(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	var batches []*sink.Batch
	for i := range int64(5) {
		batches = append(batches, batch(0, i*10, i*10+9, i*10+3))
	}
	files := stage(t, s, batches...)
	for i, f := range files {
		want := fmt.Sprintf("traces-0-%d-%d-n1-", i*10, i*10+9)
		if !strings.HasPrefix(f.RowsPath, want) || !strings.HasSuffix(f.RowsPath, ".ndjson.zst") ||
			f.DLQPath != strings.TrimSuffix(f.RowsPath, ".ndjson.zst")+".dlq.ndjson.zst" {
			t.Errorf("file %d named %q / %q, want deterministic names from the offsets", i, f.RowsPath, f.DLQPath)
		}
		again, err := s.Stage(ctx, batches[i])
		if err != nil || again.RowsPath != f.RowsPath {
			t.Errorf("restaging batch %d gave %q (%v), want the same name", i, again.RowsPath, err)
		}
	}
	loaded, err := s.Load(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != 0 || loaded.Ranges[0].Last != 49 ||
		loaded.Ranges[0].Records != 45 || loaded.Ranges[0].DLQ != 5 {
		t.Errorf("loaded %+v", loaded.Ranges)
	}
	stmts := srv.Statements()
	copies := regexp.MustCompile(`^COPY INTO "trace_raw" FROM @~/tracelake/trace_raw/ FILES = \(('traces-0-\d+-\d+-n1-[0-9a-f]+\.ndjson\.zst'(, )?){5}\) FILE_FORMAT = \(TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO\) PURGE = FALSE FORCE = FALSE$`)
	var got []string
	for _, st := range stmts {
		if strings.HasPrefix(st, "COPY") || st == "BEGIN" || st == "COMMIT" || strings.HasPrefix(st, "INSERT") || strings.HasPrefix(st, "SELECT topic") {
			got = append(got, st)
		}
	}
	if len(got) != 6 || got[0] != "BEGIN" || !strings.HasPrefix(got[1], "SELECT topic") || !copies.MatchString(got[2]) ||
		!strings.HasPrefix(got[3], `COPY INTO "trace_raw_dlq"`) || !strings.HasPrefix(got[4], `INSERT INTO "trace_raw_ledger"`) || got[5] != "COMMIT" {
		t.Errorf("load statements:\n%s", strings.Join(got, "\n"))
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 49, 3, 13, 23, 33, 43)) {
		t.Errorf("raw offsets %v", o)
	}
	if n := len(srv.Rows("trace_raw_dlq")); n != 5 {
		t.Errorf("%d dead-letter rows, want 5", n)
	}
	if f := srv.StageFiles(); len(f) != 0 {
		t.Errorf("loaded files left in the stage (purge): %v", f)
	}
	next, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}})
	if err != nil || len(next) != 1 || next[sink.TopicPartition{Topic: "traces", Partition: 0}] != 50 {
		t.Errorf("positions %v, %v; want partition 0 at 50 and nothing for 1", next, err)
	}
}

// A COPY that ran but whose reply was lost: the load fails, its
// transaction is rolled back, and the retry loads every row once.
func TestLostCopyReplyLoadsOnce(t *testing.T) {
	srv, s := prepared(t, "")
	dropped := false
	srv.DropReply = func(sql string) bool {
		if strings.HasPrefix(sql, `COPY INTO "trace_raw" `) && !dropped {
			dropped = true
			return true
		}
		return false
	}
	files := stage(t, s, batch(0, 0, 9), batch(0, 10, 19))
	if _, err := s.Load(context.Background(), files); err == nil || errors.Is(err, sink.ErrFatal) {
		t.Fatalf("load with a lost COPY reply: %v; want a retryable error", err)
	}
	if n := len(srv.Rows("trace_raw")); n != 0 {
		t.Fatalf("%d rows visible after the failed load; its transaction must roll back", n)
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 19)) {
		t.Errorf("offsets after the retry: %v", o)
	}
}

// A COMMIT that succeeded but whose reply was lost: the retry finds the
// load in the ledger and loads nothing.
func TestLostCommitReplyLoadsOnce(t *testing.T) {
	srv, s := prepared(t, "")
	dropped := false
	srv.DropReply = func(sql string) bool {
		if sql == "COMMIT" && !dropped {
			dropped = true
			return true
		}
		return false
	}
	files := stage(t, s, batch(0, 0, 9, 4))
	if _, err := s.Load(context.Background(), files); err == nil {
		t.Fatal("load with a lost COMMIT reply reported success")
	}
	loaded, err := s.Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 0 {
		t.Errorf("retry loaded %+v, want nothing (all in the ledger)", loaded.Ranges)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9, 4)) {
		t.Errorf("offsets %v", o)
	}
	if n := len(srv.Rows("trace_raw_ledger")); n != 1 {
		t.Errorf("%d ledger rows, want 1", n)
	}
}

// Two owners of a partition overlapped: the new owner's batch repeats
// offsets the former owner loaded. Only rows past the ledger land.
func TestOverlapWithAFormerOwnerLoadsOnlyNewRows(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 9, 2))); err != nil {
		t.Fatal(err)
	}
	// A wholly loaded file, a partly loaded one, and a new one.
	files := stage(t, s, batch(0, 0, 9, 2), batch(0, 5, 14, 7, 12), batch(0, 15, 19))
	loaded, err := s.Load(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != 10 || loaded.Ranges[0].Last != 19 ||
		loaded.Ranges[0].Records != 9 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v; want 10..19 with 9 rows and 1 dead letter", loaded.Ranges)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 19, 2, 12)) {
		t.Errorf("offsets %v", o)
	}
	if n := len(srv.Rows("trace_raw_dlq")); n != 2 {
		t.Errorf("%d dead-letter rows, want 2 (offsets 2 and 12)", n)
	}
	if count(srv.Statements(), `INSERT INTO "trace_raw" (uuid`) != 1 {
		t.Error("the partly loaded file was not inserted with a filtering SELECT")
	}
}

// Databend's load history says a file is loaded but the ledger does not:
// the ledger, committed with the rows, wins.
func TestLoadHistoryDisagreeingWithLedgerIsCopiedAgain(t *testing.T) {
	srv, s := prepared(t, "")
	files := stage(t, s, batch(0, 0, 4))
	srv.MarkLoaded("trace_raw", "~/tracelake/trace_raw/"+files[0].RowsPath)
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 4)) {
		t.Errorf("offsets %v", o)
	}
	stmts := srv.Statements()
	if count(stmts, `COPY INTO "trace_raw" `) != 2 || !slices.ContainsFunc(stmts, func(s string) bool {
		return strings.HasPrefix(s, `COPY INTO "trace_raw" `) && strings.HasSuffix(s, "FORCE = TRUE")
	}) {
		t.Errorf("want a second COPY with FORCE = TRUE:\n%s", strings.Join(srv.Statements(), "\n"))
	}
}

func TestUploadErrorsAreClassified(t *testing.T) {
	srv, s := prepared(t, "")
	srv.UploadStatus = func(string) int { return 503 }
	_, err := s.Stage(context.Background(), batch(0, 0, 3))
	if err == nil || errors.Is(err, sink.ErrFatal) {
		t.Fatalf("upload answered 503: %v; want a retryable error", err)
	}
	srv.UploadStatus = func(string) int { return 403 }
	_, err = s.Stage(context.Background(), batch(0, 0, 3))
	if !errors.Is(err, sink.ErrFatal) {
		t.Fatalf("upload answered 403: %v; want a fatal error", err)
	}
	srv.UploadStatus = nil
	if _, err := s.Stage(context.Background(), batch(0, 0, 3)); err != nil {
		t.Fatalf("upload after the server recovered: %v", err)
	}
	if u := srv.Uploads(); len(u) != 3 || u[0] != u[2] {
		t.Errorf("uploads %v; want the same name three times", u)
	}
}

func TestWrongPasswordStopsWithAClearError(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	s, err := databend.Open(databend.Options{DSN: strings.Replace(srv.DSN(""), "s3cret", "wrong", 1), Table: "trace_raw", Prefix: "p/"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Prepare(context.Background())
	if !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "refused the credentials of sink.databend.dsn") ||
		!strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the password is in the error: %v", err)
	}
}

func TestSQLErrorIsFatal(t *testing.T) {
	srv, s := prepared(t, "")
	files := stage(t, s, batch(0, 0, 3))
	srv.DropTable("trace_raw")
	_, err := s.Load(context.Background(), files)
	if !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "Unknown table") {
		t.Fatalf("got %v", err)
	}
}

func TestStageUploadEndpointWhenPresignIsDisabled(t *testing.T) {
	srv, s := prepared(t, "presigned_url_disabled=true")
	files := stage(t, s, batch(1, 0, 9))
	if count(srv.Statements(), "PRESIGN") != 0 {
		t.Error("presigned although the DSN disables it")
	}
	if u := srv.Uploads(); len(u) != 1 || u[0] != "~/tracelake/trace_raw/"+files[0].RowsPath {
		t.Errorf("uploads %v", u)
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 1); !slices.Equal(o, seq(0, 9)) {
		t.Errorf("offsets %v", o)
	}
}
