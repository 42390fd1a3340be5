package config

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"
)

// What `tracelake config` prints (the redacted config, as YAML) loads
// back: a config of the DuckDB or Databend sink whose printed
// sink.iceberg.catalog was REDACTED (the default's SQLite path, masked as
// a secret) was refused on reading, as an iceberg key set with another
// sink. A catalog that is a path holds no password and is printed as is;
// a URL's password is still masked.
func TestPrintedConfigLoadsBack(t *testing.T) {
	for _, y := range []string{
		"kafka: {topics: [t]}",
		"kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: 'databend://u:pw@h:8000/d'}}",
		"kafka: {topics: [t]}\nsink: {type: iceberg, iceberg: {catalog: /data/catalog.db}}",
	} {
		cfg, err := FromYAML([]byte(y))
		if err = errors.Join(err, cfg.Validate()); err != nil {
			t.Fatalf("%s: %v", y, err)
		}
		printed, err := yaml.Marshal(cfg.Redacted())
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromYAML(printed)
		if err = errors.Join(err, back.Validate()); err != nil {
			t.Errorf("%s: the printed config does not load back: %v\n%s", y, err, printed)
			continue
		}
		if back.Sink.Iceberg.Catalog != cfg.Sink.Iceberg.Catalog {
			t.Errorf("%s: printed catalog %q, want the path %q", y, back.Sink.Iceberg.Catalog, cfg.Sink.Iceberg.Catalog)
		}
	}
	cfg := Default()
	cfg.Sink.Iceberg.Catalog = "postgres://cat:s3cret@db:5432/iceberg"
	if got := cfg.Redacted().Sink.Iceberg.Catalog; got != "postgres://cat:REDACTED@db:5432/iceberg" {
		t.Errorf("catalog URL redacted as %q", got)
	}
	cfg.Sink.Iceberg.Catalog = "postgres://db:5432/iceberg?password=s3cret"
	if got := cfg.Redacted().Sink.Iceberg.Catalog; got != Redacted {
		t.Errorf("catalog URL with a password parameter redacted as %q", got)
	}
}

// `tracelake config` prints the effective config, so a default filled in
// later is printed as it runs: merge.concurrency was printed 0 (the Go
// zero value, "the default") while two merges ran at once, as README's
// configuration reference (concurrency: 2) says.
func TestPrintedMergeConcurrencyIsTheOneThatRuns(t *testing.T) {
	cfg, err := FromYAML([]byte("kafka: {topics: [t]}"))
	if err != nil {
		t.Fatal(err)
	}
	printed, err := yaml.Marshal(cfg.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Merge struct {
			Concurrency int `yaml:"concurrency"`
		} `yaml:"merge"`
	}
	if err := yaml.Unmarshal(printed, &shown); err != nil {
		t.Fatal(err)
	}
	if got, runs := shown.Merge.Concurrency, cfg.MergeConcurrency(); got != runs {
		t.Errorf("printed merge.concurrency: %d, but %d merges run at once", got, runs)
	}
}
