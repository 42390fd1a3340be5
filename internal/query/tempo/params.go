package tempo

import (
	"cmp"
	"strconv"
	"time"
)

// searchParams are a search's parameters, as pkg/api/http.go
// ParseSearchRequestWithDefault reads them.
type searchParams struct {
	start, end     uint32 // Unix seconds; 0, 0 for none
	q              string
	tags           map[string]string
	minDur, maxDur time.Duration // of the trace; 0 for none
	limit          int
	spss           int
}

const (
	defaultLimit = 20 // pkg/api/http.go defaultLimit
	defaultSpss  = 3  // defaultSpansPerSpanSet
	// The frontend's defaults (modules/frontend/config.go): max_limit,
	// max_spans_per_span_set and the search's max_duration.
	maxLimit          = 256 << 10
	maxSpss           = 100
	maxSearchDuration = 168 * time.Hour
)

func parseSearch(v map[string][]string) (searchParams, error) {
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	p := searchParams{limit: defaultLimit, spss: defaultSpss, tags: map[string]string{}}
	for _, f := range []struct {
		name string
		dst  *uint32
	}{{"start", &p.start}, {"end", &p.end}} {
		if s := get(f.name); s != "" {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return p, bad("invalid %s: %v", f.name, err)
			}
			*f.dst = uint32(n)
		}
	}
	p.q = get("q")
	if s := get("tags"); s != "" {
		if p.q != "" {
			return p, bad("invalid request: can't specify tags and q in the same query")
		}
		tags, err := parseLogfmt(s)
		if err != nil {
			return p, bad("invalid tags: %v", err)
		}
		p.tags = tags
	}
	if s := get("minDuration"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return p, bad("invalid minDuration: %v", err)
		}
		p.minDur = d.Truncate(time.Millisecond)
	}
	if s := get("maxDuration"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return p, bad("invalid maxDuration: %v", err)
		}
		p.maxDur = d.Truncate(time.Millisecond)
		if p.minDur != 0 && p.minDur > p.maxDur {
			return p, bad("invalid maxDuration: must be greater than minDuration")
		}
	}
	if s := get("limit"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return p, bad("invalid limit: %v", err)
		}
		if n == 0 {
			return p, bad("invalid limit: must be a positive number")
		}
		if n > maxLimit {
			// modules/frontend/search_handlers.go adjustLimit
			return p, bad("limit %d exceeds max limit %d", n, maxLimit)
		}
		p.limit = int(n)
	}
	if s := get("spss"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return p, bad("invalid spss: %v", err)
		}
		if n > maxSpss {
			// modules/frontend/search_sharder.go RoundTrip
			return p, bad("spans per span set exceeds %d. received %d", maxSpss, n)
		}
		// 0 is the engine's default (pkg/traceql/engine.go
		// ExecuteSearch: "if spansPerSpanSet == 0").
		p.spss = cmp.Or(int(n), defaultSpss)
	}
	if (p.start != 0 || p.end != 0) && p.end <= p.start {
		return p, bad("http parameter start must be before end. received start=%d end=%d", p.start, p.end)
	}
	if time.Duration(p.end-p.start)*time.Second > maxSearchDuration {
		// modules/frontend/search_sharder.go RoundTrip
		return p, bad("range specified by start and end exceeds %s. received start=%d end=%d", maxSearchDuration, p.start, p.end)
	}
	return p, nil
}

// window is the search's bounds on span start in microseconds (0, 0 for
// none): start through the end second.
func (p searchParams) window() (int64, int64) {
	if p.start == 0 && p.end == 0 {
		return 0, 0
	}
	return int64(p.start) * 1e6, (int64(p.end)+1)*1e6 - 1
}
