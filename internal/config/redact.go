package config

import (
	"net/url"
	"reflect"
	"strings"
)

// Redacted is the mask that replaces secrets.
const Redacted = "REDACTED"

// Redacted returns a copy of c whose secret values (fields tagged
// secret:"true") are masked: a URL keeps everything but its password and
// the values of its query parameters that name a secret (access_token), any
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
			u.RawQuery = redactQuery(u.RawQuery)
			return u.String()
		}
	}
	return Redacted
}

// redactQuery masks the values of the parameters of a URL's query that
// name a secret: a DSN or catalog URL carries them there too (databend-go
// reads access_token, libpq sslpassword). The other parameters (sslmode)
// are kept, in their order and as written.
func redactQuery(raw string) string {
	if raw == "" {
		return raw
	}
	params := strings.Split(raw, "&")
	for i, p := range params {
		name, _, hasValue := strings.Cut(p, "=")
		if unescaped, err := url.QueryUnescape(name); err == nil {
			name = unescaped
		}
		if hasValue && secretParameter(name) {
			params[i] = url.QueryEscape(name) + "=" + Redacted
		}
	}
	return strings.Join(params, "&")
}

// secretParameter says whether a query parameter's name says it holds a
// secret (password, sslpassword, access_token, secret_key, credential).
func secretParameter(name string) bool {
	name = strings.ToLower(name)
	for _, word := range []string{"password", "passwd", "pwd", "token", "secret", "key", "credential"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}
