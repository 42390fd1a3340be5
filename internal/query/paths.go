package query

import "regexp"

// filePath is an absolute path of two or more parts (a lone /, as in
// a / b, is not one), or a URL of one with its scheme and host
// (file:///…, s3://bucket/…, https://host:port/…). A part holds what file
// and object names hold, Iceberg's partition directories among them:
// key=value, the value %-escaped (url.QueryEscape, as iceberg-go and
// Java's URLEncoder write it: a tenant id's !*'() too). A path ends at a
// space, a quote, a parenthesis, a colon or a comma, where an error's
// message goes on. A relative path of three parts or more goes whole
// too: an object store's key (gocloud's blob (key "warehouse/…") of a
// failed read) has no leading slash, and its first part named the
// warehouse's prefix in its bucket.
var filePath = regexp.MustCompile(`(?:[A-Za-z][A-Za-z0-9+.-]*://[\w.@+~%:-]*|[A-Za-z]:|[\w.@+~=%-]+)?(?:[/\\][\w.@+~=%-]+){2,}[/\\]?`)

// StripPaths replaces the file paths in the message of a server's error
// with <path>: the read path's failures may name the files it reads (the
// DuckDB database, the Iceberg warehouse's data and metadata files), which
// are the operator's to know, not a tenant's. Every protocol answers a
// server's error through it (Flight SQL, the Tempo, Loki and Prometheus
// APIs); the logs keep the errors whole.
func StripPaths(msg string) string { return filePath.ReplaceAllString(msg, "<path>") }
