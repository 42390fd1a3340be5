package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// The reference tool (bend-ingest-kafka) reads a flat JSON object. Its users
// switch by pointing tracelake at that file unchanged, so every key it
// documents is accepted here and mapped onto Config. Times are seconds.
var referenceKeys = map[string]func(c *Config, raw json.RawMessage) error{
	"kafkaBootstrapServers": func(c *Config, r json.RawMessage) error { return setList(&c.Kafka.Brokers, r) },
	"kafkaTopic":            func(c *Config, r json.RawMessage) error { return setList(&c.Kafka.Topics, r) },
	"KafkaConsumerGroup":    func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Kafka.Group) },
	"isJsonTransform": func(c *Config, r json.RawMessage) error {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return err
		}
		c.Mode = ModeRaw
		if b {
			c.Mode = ModeTransform
		}
		return nil
	},
	"databendDSN": func(c *Config, r json.RawMessage) error {
		if err := json.Unmarshal(r, &c.Sink.Databend.DSN); err != nil {
			return err
		}
		if c.Sink.Databend.DSN != "" {
			c.Sink.Type = SinkDatabend
		}
		return nil
	},
	"databendTable":       func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Sink.Table) },
	"batchSize":           func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Batch.MaxRecords) },
	"batchMaxInterval":    func(c *Config, r json.RawMessage) error { return setSeconds(&c.Batch.MaxInterval, r) },
	"workers":             func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Workers) },
	"copyIntoFileCount":   func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Load.MaxFiles) },
	"copyIntoMaxInterval": func(c *Config, r json.RawMessage) error { return setSeconds(&c.Load.MaxInterval, r) },
	"maxRetryDelay":       func(c *Config, r json.RawMessage) error { return setSeconds(&c.Retry.MaxDelay, r) },
	"copyIntoUploadCompression": func(c *Config, r json.RawMessage) error {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return err
		}
		c.Load.Compression = "none"
		if b {
			c.Load.Compression = "zstd"
		}
		return nil
	},
	"isSASL": func(c *Config, r json.RawMessage) error {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return err
		}
		if b {
			c.Kafka.SASL.Mechanism = "PLAIN"
		}
		return nil
	},
	"saslUser":     func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Kafka.SASL.User) },
	"saslPassword": func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Kafka.SASL.Password) },
	"disableTLS": func(c *Config, r json.RawMessage) error {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return err
		}
		c.Kafka.TLS.Enabled = !b
		return nil
	},
	"metricsPort": func(c *Config, r json.RawMessage) error {
		var port int
		if err := json.Unmarshal(r, &port); err != nil {
			return err
		}
		if port > 0 {
			c.Metrics.Listen = fmt.Sprintf("127.0.0.1:%d", port)
		}
		return nil
	},
	"copyPurge": func(c *Config, r json.RawMessage) error { return json.Unmarshal(r, &c.Sink.Databend.Purge) },
	"disableVariantCheck": func(c *Config, r json.RawMessage) error {
		return json.Unmarshal(r, &c.Sink.Databend.DisableVariantCheck)
	},
	"useStreamingLoad": func(c *Config, r json.RawMessage) error {
		return json.Unmarshal(r, &c.Sink.Databend.StreamingLoad)
	},
	"userStage": func(c *Config, r json.RawMessage) error {
		if err := json.Unmarshal(r, &c.Sink.Databend.Stage); err != nil {
			return err
		}
		c.Sink.Databend.Stage = strings.TrimPrefix(c.Sink.Databend.Stage, "@")
		if c.Sink.Databend.Stage == "" {
			c.Sink.Databend.Stage = "~"
		}
		return nil
	},
}

// referenceIgnored are the reference keys accepted and meaningless here,
// each for a reason the README gives: loads are exactly-once through the
// ledger, so useReplaceMode (the reference's way to make a replay
// overwrite) and copyForce (FORCE = TRUE would load a file twice) have
// nothing to do; batches are sized by bytes as well as records (minBytes,
// maxBytes, maxWait were the reference's fetch knobs). Given null they
// are no error either: there is no default to keep in force.
var referenceIgnored = map[string]bool{
	"mockData": true, "dataFormat": true, "copyForce": true, "minBytes": true,
	"maxBytes": true, "maxWait": true, "useReplaceMode": true,
}

func init() {
	for k := range referenceIgnored {
		referenceKeys[k] = ignore
	}
}

func ignore(*Config, json.RawMessage) error { return nil }

// looksLikeReference reports whether a .json file is the reference's flat
// config rather than tracelake's own nested one (JSON is YAML). A key
// both take (workers) decides nothing: tracelake's own config in JSON
// with workers set was read as the reference's, and every section of it
// refused as "unknown key of the reference config".
func looksLikeReference(data []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	own := yamlFields(reflect.TypeFor[Config]())
	for k := range m {
		_, ref := referenceKeys[k]
		if _, ours := own[k]; ref && !ours {
			return true
		}
	}
	return false
}

func decodeReference(cfg *Config, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("parse reference config: %w", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range repeatedKeys(data) {
		errs = append(errs, fmt.Errorf("%s: given twice: give each key once", k))
	}
	for _, k := range keys {
		set, ok := referenceKeys[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key of the reference config (accepted: %s)", k, referenceKeyList()))
			continue
		}
		if string(bytes.TrimSpace(m[k])) == "null" && !referenceIgnored[k] {
			// encoding/json leaves the target as it was: the default,
			// in force without a word.
			errs = append(errs, fmt.Errorf("%s: %s", k, noValue))
			continue
		}
		if err := set(cfg, m[k]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", k, referenceProblem(err)))
		}
	}
	// The reference uses TLS only together with SASL, and there unless
	// disableTLS is true, its default false (bend-ingest-kafka,
	// batch_reader.go: SASL_SSL unless DisableTLS; before, a TLS dialer
	// "if !cfg.DisableTLS"): a file without disableTLS must not send the
	// SASL password in plain text. Without isSASL it connects in plain
	// text.
	_, tlsGiven := m["disableTLS"]
	switch {
	case cfg.Kafka.SASL.Mechanism == "":
		cfg.Kafka.TLS.Enabled = false
	case !tlsGiven:
		cfg.Kafka.TLS.Enabled = true
	}
	return errors.Join(errs...)
}

// referenceProblem words a value of the wrong JSON kind as tracelake's own
// keys do, by what the key accepts: encoding/json names a Go type ("cannot
// unmarshal string into Go value of type int"). The value is not quoted:
// it may be saslPassword's.
func referenceProblem(err error) error {
	var kind *json.UnmarshalTypeError
	if !errors.As(err, &kind) {
		return err
	}
	got, _, _ := strings.Cut(kind.Value, " ") // "number 1.5": the kind alone
	return fmt.Errorf("want %s, got a JSON %s", wanted(kind.Type), got)
}

// repeatedKeys are the keys the JSON object data gives more than once, in
// the order of their second occurrence: decoded into a map, only the last
// value of each is seen, and which setting is in force would depend on
// the order of the lines (a YAML file refuses such a key too).
func repeatedKeys(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil // decodeReference reports what is wrong with it
	}
	seen := map[string]int{}
	var repeated []string
	for dec.More() {
		t, err := dec.Token()
		key, isKey := t.(string)
		var value json.RawMessage
		if err != nil || !isKey || dec.Decode(&value) != nil {
			return repeated
		}
		if seen[key]++; seen[key] == 2 { // once however often it repeats
			repeated = append(repeated, key)
		}
	}
	return repeated
}

func referenceKeyList() string {
	keys := make([]string, 0, len(referenceKeys))
	for k := range referenceKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// setList reads "a,b" or ["a","b"].
func setList(dst *[]string, r json.RawMessage) error {
	var list []string
	if json.Unmarshal(r, &list) == nil {
		*dst = list
		return nil
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return fmt.Errorf("want a string or a list of strings")
	}
	*dst = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*dst = append(*dst, p)
		}
	}
	return nil
}

// setSeconds reads a number of seconds. Very old reference files stored
// nanoseconds (a Go time.Duration); values above a day of seconds are read
// as nanoseconds.
func setSeconds(dst *Duration, r json.RawMessage) error {
	var n int64
	if err := json.Unmarshal(r, &n); err != nil {
		return fmt.Errorf("want a whole number of seconds")
	}
	if n > 86400*365 {
		*dst = Duration(n)
		return nil
	}
	*dst = Duration(time.Duration(n) * time.Second)
	return nil
}
