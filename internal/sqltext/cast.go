package sqltext

import (
	"fmt"
	"strings"
)

// offsetPattern matches a time of day ending in a zone offset (Z, +02,
// +02:00, +0200).
const offsetPattern = `:[0-9]{2}(\.[0-9]*)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)\s*$`

// TryCast is DuckDB's TRY_CAST(src AS typ) of the text src, except that a
// timestamp with a zone offset cast to TIMESTAMP is the instant in UTC:
// DuckDB's cast drops the offset (10:00+02:00 would be stored as 10:00).
// It is read as TIMESTAMPTZ, whose offset DuckDB honours, and its epoch
// taken back as a TIMESTAMP, so the session's time zone plays no part; a
// text without an offset is cast as it is.
func TryCast(src, typ string) string {
	t := strings.ToUpper(strings.TrimSpace(typ))
	if t != "TIMESTAMP" && t != "DATETIME" {
		return fmt.Sprintf("TRY_CAST(%s AS %s)", src, typ)
	}
	return fmt.Sprintf("CASE WHEN regexp_matches(%s, %s) THEN make_timestamp(epoch_us(TRY_CAST(%s AS TIMESTAMPTZ))) ELSE TRY_CAST(%s AS TIMESTAMP) END",
		src, String(offsetPattern), src, src)
}
