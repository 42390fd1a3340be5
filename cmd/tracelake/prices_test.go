package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/prices"
)

// prices match names the price an operation gets, with how it was found;
// a model without one is an error that says its cost stays null.
func TestPricesMatch(t *testing.T) {
	tab := prices.Embedded()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := matchPrice(&out, tab, "azure.ai.openai", "gpt-4o", at); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"price_id     openai/gpt-4o", "price_match  alias", "input        2.5 $/M tokens", "cache read   1.25 $/M tokens", "output       10 $/M tokens"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("prices match lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := matchPrice(&out, tab, "anthropic", "claude-sonnet-4-5-20250929", at); err != nil || !strings.Contains(out.String(), "3 (6 over 200000)") {
		t.Errorf("tiers not shown: %v\n%s", err, out.String())
	}
	if err := matchPrice(&out, tab, "openai", "ft:custom", at); err == nil || !strings.Contains(err.Error(), "null cost") {
		t.Errorf("an unknown model: %v", err)
	}
	out.Reset()
	if err := listPrices(&out, tab, "openai", at); err != nil || !strings.Contains(out.String(), "openai/gpt-4o ") || strings.Contains(out.String(), "anthropic/") {
		t.Errorf("prices list --provider openai: %v\n%.500s", err, out.String())
	}
	if err := listPrices(&out, tab, "nobody", at); err == nil || !strings.Contains(err.Error(), "openai") {
		t.Errorf("an unknown provider should list the known ones: %v", err)
	}
}

// prices update refuses a file that is not a price table and a config
// without genai.prices_file, and installs a good one.
func TestPricesUpdate(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "c.yaml")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfgPath, "kafka: {topics: [t], format: otlp_proto}\n")
	good := filepath.Join(dir, "good.json")
	write(good, string(prices.EmbeddedJSON()))
	var out bytes.Buffer
	if err := updatePrices(&out, cfgPath, good); err == nil || !strings.Contains(err.Error(), "genai.prices_file is not set") {
		t.Errorf("without genai.prices_file: %v", err)
	}
	installed := filepath.Join(dir, "prices.json")
	write(cfgPath, "kafka: {topics: [t], format: otlp_proto}\ngenai: {prices_file: "+installed+"}\n")
	bad := filepath.Join(dir, "bad.json")
	write(bad, `{"providers": []}`)
	if err := updatePrices(&out, cfgPath, bad); err == nil || !strings.Contains(err.Error(), "no providers") {
		t.Errorf("an empty table: %v", err)
	}
	if _, err := os.Stat(installed); !os.IsNotExist(err) {
		t.Fatal("a refused table was installed")
	}
	if err := updatePrices(&out, cfgPath, good); err != nil || !strings.Contains(out.String(), "--rebuild genai_operations") {
		t.Fatalf("update: %v\n%s", err, out.String())
	}
	if got, err := os.ReadFile(installed); err != nil || !bytes.Equal(got, prices.EmbeddedJSON()) {
		t.Errorf("installed table differs: %v", err)
	}
}
