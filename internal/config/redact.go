package config

import (
	"net/url"
	"reflect"
)

// Redacted is the mask that replaces secrets.
const Redacted = "REDACTED"

// Redacted returns a copy of c whose secret values (fields tagged
// secret:"true") are masked: a URL keeps everything but its password, any
// other value becomes REDACTED. Print or log only redacted configs.
func (c *Config) Redacted() *Config {
	out := *c
	out.Kafka.Brokers = append([]string(nil), c.Kafka.Brokers...)
	out.Kafka.Topics = append([]string(nil), c.Kafka.Topics...)
	walkLeaves(reflect.ValueOf(&out).Elem(), "", func(_ string, f reflect.StructField, v reflect.Value) {
		if f.Tag.Get("secret") != "true" || v.Kind() != reflect.String || v.String() == "" {
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
