package tenancy

import (
	"net/http"
	"strings"
)

// The header in which a request names its tenant: HTTP's field name, and
// the key gRPC metadata carries it under (lower case, as HTTP/2 sends
// every field name). Grafana's dskit (user/http.go) reads the same.
const (
	Header      = "X-Scope-OrgID"
	MetadataKey = "x-scope-orgid"
)

// Named is the tenant a request names, from every value of its tenant
// header as it came (header is the header's name, for messages): "" when
// there is none, else the one value with the whitespace around it taken
// off. Every entry point reads its tenant through it (the OTLP receivers
// over HTTP and gRPC, Flight SQL, the Tempo, Loki and Prometheus APIs,
// the Kafka decoder's tenancy.kafka_header), so that one request names
// the same tenant whichever way it comes. A request naming none goes to
// the Resolver's default; what Named refuses, with an *Error of kind
// Invalid, is never taken as naming none nor as naming one of its values:
//   - several values (the header twice, or the metadata key with two
//     values): which one the client meant is not for the server to guess,
//     and taking the first would let a client override a tenant that a
//     proxy appends after it. dskit refuses them on gRPC too
//     (user/grpc.go, ExtractFromGRPCRequest: len(orgIDs) != 1), the same
//     value twice included; its HTTP middleware takes the first
//     (user/http.go, r.Header.Get), which would make HTTP and gRPC
//     disagree, so here both refuse;
//   - a value that is empty once trimmed: a malformed tenant (a header
//     templated from an unset variable), not a request naming none, which
//     would land in tenancy.default or, with a token reading every
//     tenant, read every tenant. The Kafka decoder refused it already.
//
// Whitespace around the value is not part of it: net/http strips it from
// an HTTP/1.1 field (RFC 9110 5.5) before any handler sees it, so every
// other entry point must strip it too for " a" to mean a everywhere
// rather than a over HTTP/1.1 and a refusal (or another tenant) over
// gRPC. Whether the value is a valid tenant id is the Resolver's to check
// (CheckTenant), as for a tenant given any other way.
func Named(header string, values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", refuse(Invalid, "%s sent %d times: several tenants, where a request names one, once", header, len(values))
	}
	t := strings.Trim(values[0], " \t")
	if t == "" {
		return "", refuse(Invalid, "%s is empty: name a tenant, or send no %s", header, header)
	}
	return t, nil
}

// NamedInHTTP is the tenant an HTTP request names in X-Scope-OrgID (Named).
func NamedInHTTP(h http.Header) (string, error) {
	return Named(Header, h.Values(Header))
}

// NamedInMetadata is the tenant a gRPC call names in its x-scope-orgid
// metadata (Named); md is the call's incoming metadata.MD, whose keys
// gRPC has lower-cased.
func NamedInMetadata(md map[string][]string) (string, error) {
	return Named(MetadataKey, md[MetadataKey])
}
