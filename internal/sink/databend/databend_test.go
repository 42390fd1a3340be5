package databend_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

func open(t *testing.T, srv *databendtest.Server, dsnParams string, change ...func(*databend.Options)) *databend.Sink {
	t.Helper()
	s, err := databend.Open(options(srv, dsnParams, change...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// options are the tests' sink options for srv, with dsnParams and change.
func options(srv *databendtest.Server, dsnParams string, change ...func(*databend.Options)) databend.Options {
	opt := databend.Options{
		DSN: srv.DSN(dsnParams), Table: "trace_raw", Stage: "~", Prefix: "tracelake/trace_raw/",
		Purge: true, Zstd: true, Uploads: 3, Timeout: 10 * time.Second,
	}
	for _, c := range change {
		c(&opt)
	}
	return opt
}

func prepared(t *testing.T, dsnParams string, change ...func(*databend.Options)) (*databendtest.Server, *databend.Sink) {
	t.Helper()
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	s := open(t, srv, dsnParams, change...)
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

// firstTimeOnly returns a fault hook's trigger: true on its first call
// only. The test server calls hooks with its lock held, one at a time.
func firstTimeOnly() func() bool {
	done := false
	return func() bool {
		if done {
			return false
		}
		done = true
		return true
	}
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
	copies := regexp.MustCompile(`^COPY INTO "trace_raw" FROM @~/tracelake/trace_raw/ FILES = \(('traces-0-\d+-\d+-n1-[0-9a-f]+\.ndjson\.zst'(, )?){5}\) FILE_FORMAT = \(TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO\) PURGE = FALSE FORCE = FALSE ON_ERROR = CONTINUE$`)
	var got []string
	for _, st := range stmts {
		if strings.HasPrefix(st, "COPY") || st == "BEGIN" || st == "COMMIT" || strings.HasPrefix(st, "INSERT") || strings.HasPrefix(st, "SELECT topic") {
			got = append(got, st)
		}
	}
	// The claims are read before the ledger, and partition 0's first
	// claim (numbered 0) comes before the rows (see claim.go).
	claim := regexp.MustCompile(`^COPY INTO "trace_raw_fence" FROM @~/tracelake/trace_raw/ FILES = \('claim-traces-[0-9a-f]{8}-0-0\.ndjson\.zst'\) .* FORCE = FALSE ON_ERROR = CONTINUE$`)
	if len(got) != 8 || got[0] != "BEGIN" || !strings.HasPrefix(got[1], `SELECT topic, "partition", count(*), max(claim) FROM "trace_raw_fence"`) ||
		!strings.HasPrefix(got[2], `SELECT topic, "partition", max(last_offset) FROM "trace_raw_ledger"`) || !claim.MatchString(got[3]) || !copies.MatchString(got[4]) ||
		!strings.HasPrefix(got[5], `COPY INTO "trace_raw_dlq"`) || !strings.HasPrefix(got[6], `INSERT INTO "trace_raw_ledger"`) || got[7] != "COMMIT" {
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
	first := firstTimeOnly()
	srv.DropReply = func(sql string) bool { return strings.HasPrefix(sql, `COPY INTO "trace_raw" `) && first() }
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
	first := firstTimeOnly()
	srv.DropReply = func(sql string) bool { return sql == "COMMIT" && first() }
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

// Files that repeat offsets load each offset once, row or dead letter,
// whether a former owner of the partition loaded the earlier file (the
// ledger fences it) or the earlier file is in the same load (a partition
// back on the same worker, read again while its first file was pending:
// the fence is cumulative within a load; before, both files passed the
// ledger as it was before the load, 5-9 were stored twice and 7 in both
// tables).
func TestOverlappingFilesLoadEachOffsetOnce(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		formerOwner                 bool
		first, records, deadLetters int64
	}{
		{name: "a former owner loaded the first file", formerOwner: true, first: 10, records: 9, deadLetters: 1},
		{name: "in one load", first: 0, records: 18, deadLetters: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, s := prepared(t, "")
			ctx := context.Background()
			if tc.formerOwner {
				if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 9, 2))); err != nil {
					t.Fatal(err)
				}
			}
			// A file, one that covers part of it, and a new one.
			files := stage(t, s, batch(0, 0, 9, 2), batch(0, 5, 14, 7, 12), batch(0, 15, 19))
			loaded, err := s.Load(ctx, files)
			if err != nil {
				t.Fatal(err)
			}
			if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != tc.first || loaded.Ranges[0].Last != 19 ||
				loaded.Ranges[0].Records != tc.records || loaded.Ranges[0].DLQ != tc.deadLetters {
				t.Errorf("loaded %+v; want %d..19 with %d rows and %d dead letters", loaded.Ranges, tc.first, tc.records, tc.deadLetters)
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 19, 2, 12)) {
				t.Errorf("offsets %v, want 0..19 but 2 and 12, each once", o)
			}
			if n := len(srv.Rows("trace_raw_dlq")); n != 2 {
				t.Errorf("%d dead-letter rows, want 2 (offsets 2 and 12)", n)
			}
			// The second file's rows past the first (10..14, less the
			// dead letter 12) were staged again as a piece of their own.
			piece := regexp.MustCompile(`'traces-0-5-14-n1-[0-9a-f]+\.l4-7-n4\.ndjson\.zst'`)
			if !slices.ContainsFunc(srv.Statements(), func(s string) bool { return strings.HasPrefix(s, "COPY") && piece.MatchString(s) }) {
				t.Errorf("no COPY of a piece with the rows past the first file:\n%s", strings.Join(srv.Statements(), "\n"))
			}
		})
	}
}

// Databend's load history says a file is loaded but the ledger does not:
// the ledger, committed with the rows, wins.
func TestLoadHistoryDisagreeingWithLedgerIsCopiedAgain(t *testing.T) {
	srv, s := prepared(t, "")
	files := stage(t, s, batch(0, 0, 4))
	srv.MarkLoaded("trace_raw", "~/tracelake/trace_raw/"+files[0].RowsPath)
	// First taken for a commit that landed after the ledger read: retried
	// from fresh reads; after those, for a load outside the ledger.
	for i := range 2 {
		if _, err := s.Load(context.Background(), files); err == nil || errors.Is(err, sink.ErrFatal) {
			t.Fatalf("load %d with the history ahead of the ledger: %v; want a retryable error", i+1, err)
		}
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 4)) {
		t.Errorf("offsets %v", o)
	}
	stmts := srv.Statements()
	if count(stmts, `COPY INTO "trace_raw" `) != 4 || !slices.ContainsFunc(stmts, func(s string) bool {
		return strings.HasPrefix(s, `COPY INTO "trace_raw" `) && strings.Contains(s, "FORCE = TRUE ")
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

// Behind a proxy that drops header names with underscores (nginx's
// default), the stage upload still names its stage: the documented
// x-databend-stage-name is sent, not the old stage_name.
func TestStageUploadEndpointWhenPresignIsDisabled(t *testing.T) {
	srv, s := prepared(t, "presigned_url_disabled=true")
	srv.Proxy = true
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

// dlqRows returns the dead-letter rows by offset.
func dlqRows(t *testing.T, srv *databendtest.Server) map[int64]databendtest.Row {
	t.Helper()
	out := map[int64]databendtest.Row{}
	for _, r := range srv.Rows("trace_raw_dlq") {
		var o int64
		if err := json.Unmarshal(r["offset"], &o); err != nil {
			t.Fatal(err)
		}
		out[o] = r
	}
	return out
}

// loadRawValues loads values, Kafka values of offsets 0.. of traces/0,
// in one raw-mode load on a fresh test server, and returns the server,
// what the load reports and the raw rows stored, by offset.
func loadRawValues(t *testing.T, values ...string) (*databendtest.Server, sink.Loaded, map[int64]databendtest.Row) {
	t.Helper()
	srv, s := prepared(t, "")
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: 0}, First: 0, Last: int64(len(values) - 1)}
	for i, v := range values {
		rec := &kgo.Record{Topic: "traces", Partition: 0, Offset: int64(i), Timestamp: time.Unix(1700000000, 0), Value: []byte(v)}
		id := [16]byte{byte(i)}
		b.Rows = envelope.AppendRawRow(b.Rows, rec, &id, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	loaded, err := s.Load(context.Background(), stage(t, s, b))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]databendtest.Row{}
	for _, row := range srv.Rows("trace_raw") {
		var o int64
		if err := json.Unmarshal(row["koffset"], &o); err != nil {
			t.Fatal(err)
		}
		stored[o] = row
	}
	return srv, loaded, stored
}

func ledgerTotals(t *testing.T, srv *databendtest.Server, table string) (records, dlq int64) {
	t.Helper()
	for _, r := range srv.Rows(table) {
		var a, b int64
		_ = json.Unmarshal(r["records"], &a)
		_ = json.Unmarshal(r["dlq_records"], &b)
		records += a
		dlq += b
	}
	return records, dlq
}

// Rows Databend rejects go to the dead-letter table with Databend's
// error; every other row of their files loads, once.
func TestRowsDatabendRejectsGoToTheDeadLetterTable(t *testing.T) {
	srv, s := prepared(t, "")
	bad := map[int64]bool{3: true, 17: true, 18: true, 25: true, 26: true, 27: true}
	srv.Reject = func(table string, r databendtest.Row) string {
		var o int64
		_ = json.Unmarshal(r["koffset"], &o)
		if table == "trace_raw" && bad[o] {
			return fmt.Sprintf("invalid JSON at offset %d", o)
		}
		return ""
	}
	files := stage(t, s, batch(0, 0, 9, 5), batch(0, 10, 29))
	loaded, err := s.Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 29, 3, 5, 17, 18, 25, 26, 27)) {
		t.Errorf("raw offsets %v", o)
	}
	dlq := dlqRows(t, srv)
	if len(dlq) != 7 {
		t.Errorf("%d dead-letter rows, want 7 (one decode, six rejected)", len(dlq))
	}
	for o := range bad {
		r := dlq[o]
		var reason, stage, value string
		_ = json.Unmarshal(r["error"], &reason)
		_ = json.Unmarshal(r["stage"], &stage)
		_ = json.Unmarshal(r["value"], &value)
		v, _ := base64.StdEncoding.DecodeString(value)
		if reason != fmt.Sprintf("invalid JSON at offset %d", o) || stage != "load" || !strings.Contains(string(v), fmt.Sprintf(`"o":%d,`, o)) {
			t.Errorf("dead letter of offset %d: error %q, stage %q, value %q", o, reason, stage, v)
		}
	}
	if records, dl := ledgerTotals(t, srv, "trace_raw_ledger"); records != 23 || dl != 7 {
		t.Errorf("ledger counts %d rows and %d dead letters, want 23 and 7", records, dl)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 23 || loaded.Ranges[0].DLQ != 7 {
		t.Errorf("loaded %+v", loaded.Ranges)
	}
	// The rejects are reported by position and reason (a receiver's
	// partial success); the decode failure was never the table's to refuse.
	reported := map[int64]string{}
	for _, r := range loaded.Rejected {
		reported[r.Offset] = r.Reason
	}
	if len(reported) != len(bad) || len(loaded.Rejected) != len(bad) {
		t.Errorf("rejected reported %+v, want offsets %v", loaded.Rejected, bad)
	}
	for o := range bad {
		if reported[o] != fmt.Sprintf("invalid JSON at offset %d", o) {
			t.Errorf("offset %d reported with %q", o, reported[o])
		}
	}
	if f := srv.StageFiles(); len(f) != 0 {
		t.Errorf("pieces left in the stage: %v", f)
	}
}

// A file every row of which Databend rejects goes to the dead-letter table
// in one more round, not one round per row.
func TestAFileDatabendRejectsWhollyIsDeadLettered(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Reject = func(table string, _ databendtest.Row) string {
		if table == "trace_raw" {
			return "column raw_data: not JSON"
		}
		return ""
	}
	if _, err := s.Load(context.Background(), stage(t, s, batch(2, 0, 99))); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Rows("trace_raw")); n != 0 {
		t.Errorf("%d raw rows", n)
	}
	dlq := dlqRows(t, srv)
	var reason string
	_ = json.Unmarshal(dlq[42]["error"], &reason)
	if len(dlq) != 100 || !strings.HasPrefix(reason, "column raw_data: not JSON (Databend rejected all 100 rows") {
		t.Errorf("%d dead letters, error %q", len(dlq), reason)
	}
	if n := count(srv.Statements(), "BEGIN"); n != 2 {
		t.Errorf("%d load rounds, want 2", n)
	}
}

// transformBatch encodes objects as the pipeline does in transform mode.
func transformBatch(p int32, first int64, values ...string) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "orders", Partition: p}, First: first, Last: first + int64(len(values)) - 1}
	for i, v := range values {
		rec := &kgo.Record{Topic: "orders", Partition: p, Offset: first + int64(i), Key: []byte{0xff, byte(i)}, Value: []byte(v)}
		b.Rows = envelope.AppendTransformRow(b.Rows, rec, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	return b
}

// Transform mode: objects load into the user's table by field name; rows
// the table rejects go to the dead-letter table with Databend's error and
// their coordinates and key.
func TestTransformModeLoadsObjectsAndDeadLettersRejects(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err == nil || !strings.Contains(err.Error(), "transform mode loads into your table orders") {
		t.Fatalf("prepare without the user's table: %v", err)
	}
	srv.CreateTable("orders", []string{"id", "qty", "note"}, []string{"BIGINT", "INT", "VARCHAR"})
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	files := stage(t, s, transformBatch(1, 100,
		`{"id": 1, "qty": 2, "note": "ok", "unknown": true}`,
		"{\n \"id\": 2,\n \"qty\": \"many\"\n}",
		`{"id": 3}`,
		`{"id": 4, "qty": true}`,
		`{"id": 5, "qty": 7}`))
	loaded, err := s.Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range srv.Rows("orders") {
		var id int64
		_ = json.Unmarshal(r["id"], &id)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{1, 3, 5}) {
		t.Errorf("orders ids %v, want 1 3 5", ids)
	}
	dlq := map[int64]databendtest.Row{}
	for _, r := range srv.Rows("orders_dlq") {
		var o int64
		_ = json.Unmarshal(r["offset"], &o)
		dlq[o] = r
	}
	var reason, key, value string
	_ = json.Unmarshal(dlq[101]["error"], &reason)
	_ = json.Unmarshal(dlq[101]["key"], &key)
	_ = json.Unmarshal(dlq[101]["value"], &value)
	v, _ := base64.StdEncoding.DecodeString(value)
	if len(dlq) != 2 || dlq[103] == nil || !strings.Contains(reason, `(qty INT): Incorrect json value, must be number`) || key != base64.StdEncoding.EncodeToString([]byte{0xff, 1}) ||
		string(v) != `{"id":2,"qty":"many"}` {
		t.Errorf("dead letters %d; offset 101: error %q key %q value %q", len(dlq), reason, key, v)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 3 || loaded.Ranges[0].DLQ != 2 {
		t.Errorf("loaded %+v", loaded.Ranges)
	}
}

// A cluster of rejects costs a few rounds, not one per reject.
func TestAClusterOfRejectsTakesFewRounds(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Reject = func(table string, r databendtest.Row) string {
		var o int64
		_ = json.Unmarshal(r["koffset"], &o)
		if table == "trace_raw" && o >= 100 && o < 140 {
			return fmt.Sprintf("bad %d", o)
		}
		return ""
	}
	if _, err := s.Load(context.Background(), stage(t, s, batch(0, 0, 999))); err != nil {
		t.Fatal(err)
	}
	dlq := dlqRows(t, srv)
	for o := int64(100); o < 140; o++ {
		var reason string
		_ = json.Unmarshal(dlq[o]["error"], &reason)
		if reason != fmt.Sprintf("bad %d", o) {
			t.Errorf("offset %d: error %q", o, reason)
		}
	}
	if o := offsets(t, srv, 0); len(o) != 960 {
		t.Errorf("%d raw rows, want 960", len(o))
	}
	if n := count(srv.Statements(), "BEGIN"); n > 14 {
		t.Errorf("%d rounds for 40 clustered rejects in 1000 rows; want about log2(1000)+2", n)
	}
}

func streaming(o *databend.Options) { o.StreamingLoad = true }

// streaming_load (the reference's useStreamingLoad) sends the files
// through the query node, never by presigned URLs, and loads them with
// COPY inside the load's transaction: /v1/streaming_load cannot join a
// transaction on the real server (the fake does not even serve it).
func TestStreamingLoadGoesThroughTheQueryNode(t *testing.T) {
	srv, s := prepared(t, "", streaming)
	files := stage(t, s, batch(0, 0, 9, 4), batch(0, 10, 19), batch(1, 0, 9))
	if n := count(srv.Statements(), "PRESIGN"); n != 0 || len(srv.Uploads()) != 4 {
		t.Errorf("%d presigned uploads, %d uploads; want none and 4 through /v1/upload_to_stage", n, len(srv.Uploads()))
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 19, 4)) {
		t.Errorf("partition 0 offsets %v", o)
	}
	if o := offsets(t, srv, 1); !slices.Equal(o, seq(0, 9)) {
		t.Errorf("partition 1 offsets %v", o)
	}
	if n := count(srv.Statements(), "COPY INTO"); n != 3 {
		t.Errorf("%d COPY statements; want 3 (the claim of the positions, raw and dead letters)", n)
	}
	if n := len(srv.Uploads()); n != 6 {
		t.Errorf("%d uploads; want 6, the claims of both partitions' positions among them, all through /v1/upload_to_stage", n)
	}
}

// A statement that outlasts the server's wait time answers Running and is
// polled; the page replies carry "session": null (the session did not
// change). Sending that null back ran the rest of the load outside its
// transaction: the ledger committed, the COPY's rows never did.
func TestCopySlowerThanTheWaitTimeStaysInTheTransaction(t *testing.T) {
	srv, s := prepared(t, "")
	srv.WaitTime = 20 * time.Millisecond
	srv.StatementTime = func(sql string) time.Duration {
		if strings.HasPrefix(sql, "COPY INTO") {
			return 150 * time.Millisecond
		}
		return 0
	}
	files := stage(t, s, batch(0, 0, 9, 3), batch(1, 0, 9))
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9, 3)) {
		t.Errorf("partition 0 offsets %v", o)
	}
	if o := offsets(t, srv, 1); !slices.Equal(o, seq(0, 9)) {
		t.Errorf("partition 1 offsets %v", o)
	}
	if len(dlqRows(t, srv)) != 1 {
		t.Errorf("dead letters %v; want offset 3", dlqRows(t, srv))
	}
	if records, dlq := ledgerTotals(t, srv, "trace_raw_ledger"); records != 19 || dlq != 1 {
		t.Errorf("ledger: %d records, %d dead letters", records, dlq)
	}
}

// On a cluster behind a balancer a transaction lives on one node: every
// statement of the load and every page poll must reach it.
func TestTwoNodesBehindABalancer(t *testing.T) {
	srv := databendtest.NewCluster("tl", "s3cret", 2)
	t.Cleanup(srv.Close)
	s := open(t, srv, "")
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range int64(4) {
		if _, err := s.Load(context.Background(), stage(t, s, batch(0, i*10, i*10+9, i*10+1), batch(1, i*10, i*10+9))); err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 39, 1, 11, 21, 31)) {
		t.Errorf("partition 0 offsets %v", o)
	}
	if o := offsets(t, srv, 1); !slices.Equal(o, seq(0, 39)) {
		t.Errorf("partition 1 offsets %v", o)
	}
}

// Errors are told apart by Databend's code: commit conflicts and lost
// transactions are retried, whatever their message says.
func TestErrorCodesAreClassified(t *testing.T) {
	for _, code := range []int{databendtest.CodeOCCRetryFailure, databendtest.CodeTableVersionMismatched,
		databendtest.CodeUnresolvableConflict, databendtest.CodeTxnTimeout, databendtest.CodeSessionLost} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv, s := prepared(t, "")
			first := firstTimeOnly()
			srv.CommitError = func() int {
				if first() {
					return code
				}
				return 0
			}
			files := stage(t, s, batch(0, 0, 9))
			_, err := s.Load(context.Background(), files)
			if err == nil || errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), fmt.Sprint(code)) {
				t.Fatalf("commit failed with %d: %v; want a retryable error naming the code", code, err)
			}
			if _, err := s.Load(context.Background(), files); err != nil {
				t.Fatal(err)
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9)) {
				t.Errorf("offsets %v", o)
			}
		})
	}
}

// A COMMIT whose reply was lost lands only after the retry read the
// ledger: the retry's COPY (FORCE = FALSE) names files now in the load
// history, and its COMMIT fails with DuplicatedUpsertFiles 2014. That is
// the guard telling the files are loaded: the next retry reads the ledger
// and loads nothing twice.
func TestDuplicatedUpsertFilesAfterALateCommit(t *testing.T) {
	srv, s := prepared(t, "")
	srv.LateCommit = firstTimeOnly()
	files := stage(t, s, batch(0, 0, 9, 4))
	if _, err := s.Load(context.Background(), files); err == nil {
		t.Fatal("a load whose COMMIT reply was lost reported success")
	}
	_, err := s.Load(context.Background(), files)
	if err == nil || errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "2014") {
		t.Fatalf("retry after the late commit: %v; want DuplicatedUpsertFiles, retryable", err)
	}
	loaded, err := s.Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 0 {
		t.Errorf("the last retry loaded %+v; the ledger has it all", loaded.Ranges)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9, 4)) {
		t.Errorf("offsets %v", o)
	}
	if n := len(srv.Rows("trace_raw_ledger")); n != 1 {
		t.Errorf("%d ledger rows, want 1", n)
	}
}

// Rows Databend rejected in one round of a load are fenced in the next
// like every other row: a former owner of the partition that loaded (and
// dead-lettered) part of the batch between the rounds leaves those rows
// out, the pieces staged in the first round included. Before, the rejects
// and pieces were loaded again: dead letters twice.
func TestRejectsAndPiecesAreFencedAgainstAFormerOwner(t *testing.T) {
	srv, s := prepared(t, "")
	former := open(t, srv, "")
	srv.Reject = func(table string, r databendtest.Row) string {
		if o := string(r["koffset"]); table == "trace_raw" && (o == "5" || o == "15") {
			return "bad row " + o
		}
		return ""
	}
	ctx := context.Background()
	files := stage(t, s, batch(0, 0, 19))
	formerFiles := stage(t, former, batch(0, 0, 9))
	moved := false
	srv.After = func(sql string) {
		if sql == "ROLLBACK" && !moved {
			moved = true // after the first round: the former owner loads 0-9
			if _, err := former.Load(ctx, formerFiles); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the load had no second round")
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 19, 5, 15)) {
		t.Errorf("offsets %v", o)
	}
	var dl []int64
	for _, r := range srv.Rows("trace_raw_dlq") {
		var o int64
		_ = json.Unmarshal(r["offset"], &o)
		dl = append(dl, o)
	}
	slices.Sort(dl)
	if !slices.Equal(dl, []int64{5, 15}) {
		t.Errorf("dead-letter offsets %v; want 5 and 15 once", dl)
	}
	if records, dlq := ledgerTotals(t, srv, "trace_raw_ledger"); records != 18 || dlq != 2 {
		t.Errorf("ledger: %d records, %d dead letters; want 18 and 2", records, dlq)
	}
}

// A COMMIT whose reply was lost lands while the retry's transaction runs:
// after the retry read the ledger (no rows yet) and before its COPY. The
// COPY's load history then has the files; copying them with FORCE = TRUE,
// as the ledger read said they were not loaded, doubled every row (seen in
// the CLI test against this server). The load history is current and the
// ledger read stale: the retry fails and the next one reads the ledger
// afresh.
func TestCommitLandingDuringTheRetryLoadsOnce(t *testing.T) {
	srv, s := prepared(t, "")
	other := open(t, srv, "")
	ctx := context.Background()
	srv.LateCommit = firstTimeOnly()
	files := stage(t, s, batch(0, 0, 9, 4))
	otherFiles := stage(t, other, batch(1, 0, 9))
	if _, err := s.Load(ctx, files); err == nil {
		t.Fatal("a load whose COMMIT reply was lost reported success")
	}
	// The retry reads the ledger; then another load's COMMIT makes the
	// late one land.
	landed := false
	srv.After = func(sql string) {
		if strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset)`) && !landed {
			landed = true
			if _, err := other.Load(ctx, otherFiles); err != nil {
				t.Error(err)
			}
		}
	}
	for range 3 {
		if _, err := s.Load(ctx, files); err == nil {
			break
		}
	}
	if !landed {
		t.Fatal("the late commit never landed during a retry")
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9, 4)) {
		t.Errorf("partition 0 offsets %v", o)
	}
	if n := len(dlqRows(t, srv)); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
}

// ExecTx (a model's merge): a statement Databend refuses for good (here
// one the server does not know) rolls the transaction back and is not run
// again; a commit conflict runs the whole transaction again.
func TestExecTxRollsBackAndRetriesOnlyConflicts(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Accept = func(sql string) bool { return strings.HasPrefix(sql, "UPDATE") }
	n := len(srv.Statements())
	err := s.ExecTx(context.Background(), "UPDATE w SET x = 1", "NO SUCH STATEMENT")
	ran := srv.Statements()[n:]
	if err == nil || !slices.Equal(ran, []string{"BEGIN", "UPDATE w SET x = 1", "NO SUCH STATEMENT", "ROLLBACK"}) {
		t.Fatalf("a refused statement: %v; ran %q, want it rolled back once", err, ran)
	}
	conflicts := 1
	srv.CommitError = func() int {
		if conflicts > 0 {
			conflicts--
			return databendtest.CodeOCCRetryFailure
		}
		return 0
	}
	n = len(srv.Statements())
	if err := s.ExecTx(context.Background(), "UPDATE w SET x = 2"); err != nil {
		t.Fatal(err)
	}
	if got := count(srv.Statements()[n:], "BEGIN"); got != 2 {
		t.Errorf("%d transactions, want the conflicting one and its rerun", got)
	}
}

// headeredBatch is offsets 0-2 of partition 0 of "traces", each record
// with a tenant header, a header whose value is not UTF-8, and a
// timestamp; offset 1 is not JSON (a dead letter of the pipeline's).
func headeredBatch() (*sink.Batch, time.Time) {
	at := time.Date(2026, 3, 1, 12, 34, 56, 789_000_000, time.UTC)
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: 0, Last: 2}
	for o := int64(0); o <= 2; o++ {
		rec := &kgo.Record{Topic: "traces", Offset: o, Timestamp: at, Value: fmt.Appendf(nil, `{"o":%d}`, o),
			Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("team-a")}, {Key: "bin", Value: []byte{0xff}}}}
		if o == 1 {
			rec.Value = []byte("not json")
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not JSON", envelope.StageDecode)
			r.DLQ++
			continue
		}
		id := [16]byte{byte(o)}
		b.Rows = envelope.AppendRawRow(b.Rows, rec, &id, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	return b, at
}

// checkHeaders fails the test unless the dead letter r holds headeredBatch's
// headers and timestamp.
func checkHeaders(t *testing.T, what string, r databendtest.Row, at time.Time) {
	t.Helper()
	const want = `[{"key":"X-Scope-OrgID","value":"team-a"},{"key":"bin","value":"/w==","value_encoding":"base64"}]`
	var got, exp any
	if err := json.Unmarshal(r["headers"], &got); err != nil {
		t.Errorf("%s: headers %s: %v", what, r["headers"], err)
	}
	_ = json.Unmarshal([]byte(want), &exp)
	if fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Errorf("%s: headers %s, want %s", what, r["headers"], want)
	}
	if c := string(r["create_time"]); c != strconv.FormatInt(at.UnixMicro(), 10) {
		t.Errorf("%s: create_time %q, want the record's %d µs", what, c, at.UnixMicro())
	}
}

// A dead letter keeps its record's headers and timestamp (a tenant sent as
// a Kafka header, the record's time), both a message the pipeline
// dead-letters and a raw row Databend rejects at the load (read from its
// record_metadata). Before, the dead-letter table held key and value only.
func TestDeadLettersKeepTheRecordsHeaders(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Reject = func(table string, r databendtest.Row) string {
		if table == "trace_raw" && string(r["koffset"]) == "2" {
			return "bad row"
		}
		return ""
	}
	b, at := headeredBatch()
	if _, err := s.Load(context.Background(), stage(t, s, b)); err != nil {
		t.Fatal(err)
	}
	dl := dlqRows(t, srv)
	if len(dl) != 2 {
		t.Fatalf("%d dead letters, want offsets 1 and 2", len(dl))
	}
	checkHeaders(t, "the pipeline's dead letter", dl[1], at)
	checkHeaders(t, "the row Databend rejected", dl[2], at)
}

// A dead-letter table made before headers and create_time existed gets
// them at Prepare (ALTER TABLE … ADD COLUMN, nullable), and new dead
// letters keep theirs there.
func TestOldDeadLetterTableGainsHeaders(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("trace_raw_dlq", []string{"topic", "partition", "offset", "key", "value", "error", "stage", "add_time"},
		[]string{"VARCHAR", "INT", "BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP"})
	s := open(t, srv, "")
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatalf("prepare over an old dead-letter table: %v", err)
	}
	if cols := srv.Columns("trace_raw_dlq"); !slices.Contains(cols, "headers VARIANT") || !slices.Contains(cols, "create_time TIMESTAMP") {
		t.Fatalf("dead-letter columns %v: want headers and create_time added", cols)
	}
	b, at := headeredBatch()
	if _, err := s.Load(context.Background(), stage(t, s, b)); err != nil {
		t.Fatal(err)
	}
	checkHeaders(t, "the dead letter", dlqRows(t, srv)[1], at)
}

// Two owners of a partition load overlapping offsets at the same moment
// (a former owner whose load outlived the revoke, or one that lost its
// group membership without noticing, and the new owner): the new owner's
// load commits while the former owner's transaction runs, after that
// transaction read the ledger (nothing loaded yet). Databend merges two
// transactions that only append (storages/fuse/src/retry/commit.rs,
// try_rebuild_req: appended segments apply on top of any latest
// snapshot), so the ledger read alone did not fence the second load: both
// committed and offsets 0-9 were stored twice. The second load to commit
// must fail (its retry reads the ledger afresh) or store only the offsets
// the first did not, wherever in its transaction the other commit lands.
func TestTwoOwnersLoadingAtOnceStoreEachOffsetOnce(t *testing.T) {
	for _, tc := range []struct{ name, after string }{
		{"after the ledger read", `SELECT topic, "partition", max(last_offset)`},
		{"after the claim", `COPY INTO "trace_raw_fence"`},
		{"after the rows were copied", `COPY INTO "trace_raw" `},
		{"before the commit", `INSERT INTO "trace_raw_ledger"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, former := prepared(t, "")
			owner := open(t, srv, "")
			ctx := context.Background()
			formerFiles := stage(t, former, batch(0, 0, 9, 3))
			// The new owner resumed from the ledger as it was (nothing
			// loaded), as after a revoke whose loads were still pending.
			ownerFiles := stage(t, owner, batch(0, 0, 14, 3, 12))
			moved := false
			srv.After = func(sql string) {
				if strings.HasPrefix(sql, tc.after) && !moved {
					moved = true
					if _, err := owner.Load(ctx, ownerFiles); err != nil {
						t.Error(err)
					}
				}
			}
			var err error
			for range 3 { // the pipeline retries a retryable failure
				if _, err = former.Load(ctx, formerFiles); err == nil || errors.Is(err, sink.ErrFatal) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if !moved {
				t.Fatal("the new owner never loaded during the former owner's load")
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 14, 3, 12)) {
				t.Errorf("offsets %v; want 0..14 but 3 and 12, each once", o)
			}
			dl := dlqRows(t, srv)
			if n := len(srv.Rows("trace_raw_dlq")); n != 2 || dl[3] == nil || dl[12] == nil {
				t.Errorf("%d dead-letter rows; want offsets 3 and 12 once", n)
			}
			if records, dlq := ledgerTotals(t, srv, "trace_raw_ledger"); records != 13 || dlq != 2 {
				t.Errorf("ledger: %d records, %d dead letters; want 13 and 2", records, dlq)
			}
		})
	}
}

// The load that claimed a ledger position first committed and removed its
// marker from the stage between another load's upload of the same marker
// and that load's COPY of it: the COPY names a file that is gone
// (StorageNotFound 3001). That is a claim lost, retried from a fresh
// ledger read, not a fault that stops the run.
func TestClaimRemovedByTheLoadThatWonIsRetried(t *testing.T) {
	srv, former := prepared(t, "")
	owner := open(t, srv, "")
	ctx := context.Background()
	formerFiles := stage(t, former, batch(0, 0, 9), batch(1, 0, 9))
	ownerFiles := stage(t, owner, batch(0, 0, 14))
	moved := false
	srv.After = func(sql string) {
		// Partition 0's marker is uploaded; partition 1's is next.
		if strings.HasPrefix(sql, "PRESIGN UPLOAD") && strings.Contains(sql, "claim-") && strings.Contains(sql, "-1-0.ndjson.zst") && !moved {
			moved = true
			if _, err := owner.Load(ctx, ownerFiles); err != nil {
				t.Error(err)
			}
		}
	}
	_, err := former.Load(ctx, formerFiles)
	if !moved {
		t.Fatal("the new owner never loaded during the former owner's load")
	}
	if err == nil || errors.Is(err, sink.ErrFatal) {
		t.Fatalf("load whose claim was removed: %v; want a retryable error", err)
	}
	if _, err := former.Load(ctx, formerFiles); err != nil {
		t.Fatal(err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 14)) {
		t.Errorf("partition 0 offsets %v; want 0..14 once", o)
	}
	if o := offsets(t, srv, 1); !slices.Equal(o, seq(0, 9)) {
		t.Errorf("partition 1 offsets %v; want 0..9 once", o)
	}
}

// A former owner's COMMIT that lands late (its reply lost) after the new
// owner committed the same claim must fail at the meta service as any
// commit does (DuplicatedUpsertFiles 2014), not land: the test server
// applied late commits without checking their load history, so a lost
// claim landed beside the winner's and offsets were stored twice there,
// where databend-query stores them once.
func TestLateCommitOfALostClaimLandsNothing(t *testing.T) {
	srv, former := prepared(t, "")
	owner := open(t, srv, "")
	ctx := context.Background()
	formerFiles := stage(t, former, batch(0, 0, 9))
	ownerFiles := stage(t, owner, batch(0, 0, 14))
	moved := false
	srv.After = func(sql string) {
		if strings.HasPrefix(sql, `INSERT INTO "trace_raw_ledger"`) && !moved {
			moved = true
			if _, err := owner.Load(ctx, ownerFiles); err != nil {
				t.Error(err)
			}
			srv.Set(func() { srv.LateCommit = firstTimeOnly() }) // the former owner's COMMIT
		}
	}
	var err error
	for range 3 {
		if _, err = former.Load(ctx, formerFiles); err == nil || errors.Is(err, sink.ErrFatal) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the new owner never loaded during the former owner's load")
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 14)) {
		t.Errorf("offsets %v; want 0..14 once", o)
	}
}
