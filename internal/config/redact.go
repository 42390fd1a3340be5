package config

import (
	"net/url"
	"reflect"
	"strings"
)

// Redacted is the mask that replaces secrets.
const Redacted = "REDACTED"

// Redacted returns a copy of c whose secret values (fields tagged
// secret:"true") are masked: a URL keeps everything but its password, any
// other value becomes REDACTED. A field tagged secret:"url" (the Iceberg
// catalog: a SQLite path or a postgres:// URL) is a secret only as a URL:
// a path holds no password, and masked it was printed as REDACTED, which
// `tracelake config` then could not load back (the default path, changed,
// read as an iceberg key set with another sink). Print or log only
// redacted configs.
func (c *Config) Redacted() *Config {
	out := *c
	out.Kafka.Brokers = append([]string(nil), c.Kafka.Brokers...)
	out.Kafka.Topics = append([]string(nil), c.Kafka.Topics...)
	walkLeaves(reflect.ValueOf(&out).Elem(), "", func(_ string, f reflect.StructField, v reflect.Value) {
		tag := f.Tag.Get("secret")
		if tag != "true" && tag != "url" || v.Kind() != reflect.String || v.String() == "" {
			return
		}
		if tag == "url" && !strings.Contains(v.String(), "://") {
			return
		}
		v.SetString(redact(v.String()))
	})
	return &out
}

func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Redacted)
			return u.String()
		}
	}
	return Redacted
}
