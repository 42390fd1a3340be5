package query

import (
	"strings"
	"testing"
)

// TestStripPathsTakesWholePaths: a server's error reaches a tenant with
// its paths taken out. An Iceberg data file's path holds its partition as
// key=value directories (data/tenant_id=a/start_time_day=2024-03-01/…);
// the match of a path ended at the first '=', and the tenant read the rest
// of it: the partition layout and the data file's name after "<path>".
func TestStripPathsTakesWholePaths(t *testing.T) {
	f := func(msg, want string) {
		t.Helper()
		if got := StripPaths(msg); got != want {
			t.Errorf("StripPaths(%q)\n  = %q\n want %q", msg, got, want)
		}
	}
	f("read otel_spans: open /srv/wh/tracelake.db/otel_spans/data/tenant_id=a/start_time_day=2024-03-01/00000-0-3ebea844-00001.parquet: no such file or directory",
		"read otel_spans: open <path>: no such file or directory")
	// A tenant id's other characters, as the partition path escapes them.
	f("open /wh/t/data/tenant_id=o%27brien%28x%29%21%2A/day=1/f.parquet: EOF", "open <path>: EOF")
	// Quotes and parentheses around a path stay.
	f("cannot open file '/srv/wh/x.parquet' (/srv/wh/y.parquet)", "cannot open file '<path>' (<path>)")
	// An object store's URL, scheme and all.
	f("get s3://bucket/wh/t/data/tenant_id=a/day=1/f.parquet: 503", "get <path>: 503")
	f(`Get "https://s3.example.com/bucket/wh/t/data/tenant_id=a/f.parquet": timeout`, `Get "<path>": timeout`)
	f("get http://127.0.0.1:9000/bucket/wh/f.parquet: refused", "get <path>: refused")
	f("read file:///srv/data/x.duckdb: gone", "read <path>: gone")
	// What is not a path stays.
	f("a / b, 1/2, x=1 y=2", "a / b, 1/2, x=1 y=2")
}

// TestIcebergScanFailureNamesNoFile: a data file gone under a tenant's
// query fails it with the server's error, which the protocols answer
// through StripPaths: the tenant reads neither the file's name nor the
// partition layout of the warehouse.
func TestIcebergScanFailureNamesNoFile(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	l.removeDataFiles(t, func(p string) bool {
		return strings.Contains(p, "otel_spans") && strings.Contains(p, "tenant_id=a")
	})
	_, err := l.rows(t, tenantA, `SELECT name FROM otel_spans`)
	if err == nil {
		t.Fatal("a query over a removed file succeeded")
	}
	msg := StripPaths(err.Error())
	for _, s := range []string{".parquet", "tenant_id=", "start_time_day", "otel_spans/data"} {
		if strings.Contains(msg, s) {
			t.Errorf("the error a tenant gets names %q: %s", s, msg)
		}
	}
}

// TestStripPathsTakesObjectKeys: an object store's read failure other
// than a missing object (a 403, a 503, a read cut mid-file) comes from
// gocloud's blob package, which names the object by its key, a path
// without a leading slash: blob (key "warehouse/tracelake.db/…"). Its
// first part stayed before "<path>", naming the warehouse's prefix in
// the bucket, or the namespace where the warehouse is the bucket's root.
func TestStripPathsTakesObjectKeys(t *testing.T) {
	for _, key := range []string{
		"warehouse/tracelake.db/otel_spans/data/tenant_id=a/start_time_day=2024-03-01/00000-0-x.parquet",
		"tracelake.db/otel_spans/metadata/00001-x.metadata.json",
	} {
		msg := `open s3://lake/` + key + `: blob (key "` + key + `") (code=PermissionDenied): operation error S3: GetObject, https response error StatusCode: 403, api error AccessDenied: Access Denied`
		want := `open <path>: blob (key "<path>") (code=PermissionDenied): operation error S3: GetObject, https response error StatusCode: 403, api error AccessDenied: Access Denied`
		if got := StripPaths(msg); got != want {
			t.Errorf("StripPaths(%q)\n  = %q\n want %q", msg, got, want)
		}
	}
}
