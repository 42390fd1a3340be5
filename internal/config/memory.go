package config

// Memory defaults. A process holds the records read from Kafka and not yet
// loaded (max_inflight_bytes), the Kafka client's buffered fetches (outside
// that budget until polled, and decompressed: a fetch of JSON is several
// times its size on the wire), the rows a load hands DuckDB, DuckDB's own
// memory and Go's garbage. The defaults derive every other limit from
// max_inflight_bytes, so one setting sizes the process (docs/BENCHMARKS.md,
// "2026-12-01, bounded memory").
const (
	defaultInflightBytes = 256 << 20
	// fetchShare: buffered fetches get 1/fetchShare of max_inflight_bytes
	// decompressed, shared by the workers: 4 MiB each at the defaults (50
	// MiB fetches of compressed JSON held ~330 MB of decompressed records
	// per process).
	fetchShare = 32
	// goHeadroom is the Go heap allowed beyond max_inflight_bytes (fetch
	// buffers, open batches, the runtime) before the collector works harder.
	goHeadroom = 128 << 20
	// minDuckDBMemory: with 64 MiB DuckDB failed the first load of ~1 MB
	// values (an insert allocates 32 MiB at once); 96 MiB was enough.
	minDuckDBMemory = 128 << 20
)

// FetchBytes is kafka.fetch_max_bytes, or when unset 1/32 of
// max_inflight_bytes per worker, between 1 MiB and 50 MiB.
func (c *Config) FetchBytes() ByteSize {
	if c.Kafka.FetchMaxBytes > 0 {
		return c.Kafka.FetchMaxBytes
	}
	return min(max(c.MaxInflightBytes/fetchShare/ByteSize(max(c.Workers, 1)), 1<<20), 50<<20)
}

// DuckDBMemoryLimit is sink.duckdb.memory_limit, or when unset
// max_inflight_bytes (at least 128 MiB): a load inserts at most what the
// budget holds, so DuckDB gets as much as the batches it loads.
func (c *Config) DuckDBMemoryLimit() ByteSize {
	if c.Sink.DuckDB.MemoryLimit > 0 {
		return c.Sink.DuckDB.MemoryLimit
	}
	return max(c.MaxInflightBytes, minDuckDBMemory)
}

// LoadBytes is load.max_bytes, or when unset a sixteenth of
// max_inflight_bytes: DuckDB needs several times a load's bytes while it
// loads ~1 MB values (a load of 400 MB of them ran out of 256 MiB, 200 MB
// did not), and the next loads' rows are read meanwhile. Since loads keep
// their size under backpressure, a sixteenth peaks as an eighth did
// before, at the same speed; an eighth now peaks 30-100 MiB higher
// (docs/BENCHMARKS.md, "loads_at_size"). 0 (no limit) for
// Iceberg, whose loads commit files already written and take no memory
// for their size.
func (c *Config) LoadBytes() ByteSize {
	if c.Load.MaxBytes > 0 {
		return c.Load.MaxBytes
	}
	if c.Sink.Type == SinkIceberg {
		return 0
	}
	return c.MaxInflightBytes / 16
}

// GoMemoryLimit is the soft limit for Go's heap (runtime/debug.SetMemoryLimit)
// of a run: twice max_inflight_bytes plus a headroom. Without a limit the
// collector lets garbage grow to twice the live heap between collections,
// which at this allocation rate doubled the process's Go memory; with the
// budget plus the headroom alone, the live heap (the budget's batches, the
// fetches) sat at the limit, so the collector ran back to back and the
// scavenger handed back pages the next batch faulted in again: a quarter of
// a run's CPU into Databend (docs/BENCHMARKS.md, "2026-12-03, heap_limit";
// the peak RSS stayed under the bound).
func (c *Config) GoMemoryLimit() int64 {
	return 2*int64(c.MaxInflightBytes) + goHeadroom
}
