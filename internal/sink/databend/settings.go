package databend

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"strconv"
	"strings"

	godatabend "github.com/datafuselabs/databend-go"
)

// A sessionSetting is a Databend session setting the sink's contracts
// depend on. Every session sends it, whatever SET GLOBAL says (all of
// these have scope Both, settings/src/settings_default.rs, so a session's
// value wins). A DSN may carry settings as query parameters (databend-go
// passes every parameter it does not read itself on as a setting): it may
// repeat a pinned setting's value, or set an unpinned one within accepts,
// and anything else is refused rather than overridden or passed on.
type sessionSetting struct {
	name string
	def  string // what the sessions send when the DSN sets none
	// pinned: the sessions always send def; the DSN may only repeat it.
	pinned bool
	// accepts the DSN's value of an unpinned setting; want says which
	// values it accepts, for the error.
	accepts func(v string) bool
	want    string
}

const (
	minHistoryHours = 24          // load_file_metadata_expire_hours, at least (Databend's default)
	maxIdleTxnSecs  = 4 * 60 * 60 // idle_transaction_timeout_secs (Databend's default)
)

var sessionSettings = []sessionSetting{
	// databend-query cuts a SELECT without LIMIT at max_result_rows
	// without an error (planner.rs add_max_rows_limit), and tracelake's
	// reads of the ledger and its tables must be whole (a ledger read cut
	// short fences too low and loads rows again).
	{name: "max_result_rows", def: "0", pinned: true},
	// databend-query writes a TIMESTAMP in a result, casts one to text and
	// reads a string as one in the session's timezone (formats
	// field_encoder/string.rs timestamp_text; expression
	// types/timestamp.rs string_to_timestamp). tracelake reads results'
	// times as UTC, filters by UTC literals, hashes times as text into the
	// dedup model's keys (which must not change between sessions) and
	// casts model columns' times without an offset as UTC, as on DuckDB.
	{name: "timezone", def: "UTC", pinned: true},
	// A claim (claim.go) excludes another load only while Databend's load
	// history keeps its marker: COPY upserts the marker's key with the TTL
	// load_file_metadata_expire_hours (builder_copy_into_table.rs
	// build_upsert_copied_files_to_meta_req), and once the meta service
	// forgot it a load that read the same claim count copies the marker
	// and commits too. So the history keeps files at least
	// minHistoryHours, and a load's transaction is held to less
	// (maxClaimAge before its COMMIT, an idle transaction dropped after
	// maxIdleTxnSecs).
	{name: "load_file_metadata_expire_hours", def: strconv.Itoa(minHistoryHours),
		accepts: uintIn(minHistoryHours, math.MaxUint64), want: fmt.Sprintf("at least %d", minHistoryHours)},
	// databend-query keeps a transaction left open between two statements
	// for this many seconds and then drops it (servers/http/v1/query/
	// http_query_manager.rs add_txn sleeps timeout_secs, then removes the
	// transaction). A load leaves its transaction idle while it uploads
	// its claim markers and the pieces of files a former owner loaded in
	// part (claim.go, pieces.go), for as long as those uploads take: any
	// shorter value fails, on every retry alike, a load whose uploads take
	// longer (with 0, every load). Above maxIdleTxnSecs a transaction
	// could outlive its claims (above). So the one value is Databend's
	// default.
	{name: "idle_transaction_timeout_secs", def: strconv.Itoa(maxIdleTxnSecs), pinned: true},
	// With query_result_cache_allow_inconsistent the result cache answers
	// a statement run before with its old result, whatever was written
	// since (storages/basic/src/result_cache/read/reader.rs
	// try_read_cached_result_with_meta_key), and the ledger, claim and
	// verify reads must see every commit.
	{name: "enable_query_result_cache", def: "0", pinned: true},
	// With it on (the default on servers from v1.2.6xx until mid-2025,
	// databendlabs/databend#16120 and #18026) a reply writes a NULL as the
	// string NULL (RowSerializer, servers/http/v1/query/
	// blocks_serializer.rs), which no read here can tell from a value: the
	// claim read of an upgraded fence table (max(claim) over rows without
	// a number, claim.go) then failed every load for ever.
	{name: "format_null_as_str", def: "0", pinned: true},
	// In driver mode (databendlabs/databend#19639) a reply writes
	// TIMESTAMP and DATE as numbers (formats field_encoder/string.rs
	// timestamp_text, date_text), and the GenAI rebuild and the report
	// cast a time read (QueryRows) from its text. A server older than the
	// setting ignores it (HttpSessionConf::restore in
	// servers/http/v1/query/http_query.rs skips UNKNOWN_VARIABLE).
	{name: "http_json_result_mode", def: "display", pinned: true},
	// Under MySQL or Hive a double quote begins a string (ast/src/parser/
	// input.rs Dialect::is_string_quote), and every statement here (the
	// sink's, the merge models', verify's) names tables and columns in
	// double quotes (sqltext.Ident).
	{name: "sql_dialect", def: "PostgreSQL", pinned: true},
}

// uintIn accepts an unsigned decimal number from lo to hi.
func uintIn(lo, hi uint64) func(string) bool {
	return func(v string) bool {
		n, err := strconv.ParseUint(v, 10, 64)
		return err == nil && n >= lo && n <= hi
	}
}

// check says why the DSN's value v of the setting is refused, or "".
func (s sessionSetting) check(v string) string {
	switch {
	case s.pinned && !strings.EqualFold(v, s.def):
		return fmt.Sprintf("session setting %s: tracelake sets it to %s itself; leave it out of the DSN, got %q", s.name, s.def, v)
	case !s.pinned && !s.accepts(v):
		return fmt.Sprintf("session setting %s: want %s, got %q", s.name, s.want, v)
	}
	return ""
}

// settingProblems lists, one per setting, the settings of a DSN's
// parameters the sink refuses (sessionSettings), in the table's order.
func settingProblems(params map[string]string) []string {
	var problems []string
	for _, s := range sessionSettings {
		if v, ok := params[s.name]; ok {
			if p := s.check(v); p != "" {
				problems = append(problems, p)
			}
		}
	}
	return problems
}

// sessionValues are the settings every session sends: the DSN's own,
// then the checked ones (the DSN's value of an unpinned setting, or its
// default).
func sessionValues(params map[string]string) map[string]string {
	settings := make(map[string]string, len(params)+len(sessionSettings))
	maps.Copy(settings, params)
	for _, s := range sessionSettings {
		v, ok := params[s.name]
		if s.pinned || !ok {
			v = s.def
		}
		settings[s.name] = v
	}
	return settings
}

// DSNProblems says what in a sink.databend.dsn the sink cannot work with,
// for config validation: parameters databend-go refuses, and session
// settings the sink refuses (sessionSettings), one entry each. A DSN that
// is not a URL is left to the caller, whose error must not repeat it (it
// holds a password).
func DSNProblems(dsn string) []string {
	if _, err := url.Parse(dsn); err != nil {
		return nil
	}
	cfg, err := godatabend.ParseDSN(dsn)
	if err != nil {
		return []string{fmt.Sprintf("parameters: %v", err)}
	}
	return settingProblems(cfg.Params)
}
