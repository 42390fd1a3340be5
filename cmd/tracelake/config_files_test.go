package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/config"
)

// writeSelfSigned writes a self-signed certificate and its key as PEM
// files in dir, for configs that must name good TLS files.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

// configFiles are files for configs to name: a good certificate and its
// key, a file that is neither PEM nor a tokens file, and one missing.
type configFiles struct{ dir, cert, key, garbage, missing string }

func writeConfigFiles(t *testing.T) configFiles {
	t.Helper()
	f := configFiles{dir: t.TempDir()}
	f.cert, f.key = writeSelfSigned(t, f.dir)
	f.garbage, f.missing = filepath.Join(f.dir, "garbage"), filepath.Join(f.dir, "missing")
	writeFile(t, f.garbage, "not PEM, not tokens\n")
	return f
}

// writeFilesConfig writes, in a new directory, the config yaml makes of
// the files of writeConfigFiles and that directory; it returns both paths.
func writeFilesConfig(t *testing.T, yaml func(f configFiles, dir string) string) (dir, path string) {
	t.Helper()
	f := writeConfigFiles(t)
	dir = t.TempDir()
	path = filepath.Join(dir, "c.yaml")
	writeFile(t, path, yaml(f, dir))
	return dir, path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A tokens file or a TLS file that is missing or does not parse is a bad
// config: exit 2 with the key named, before any database is opened, and
// `tracelake config` says so. It was found only once the sink was open and
// its tables prepared (run exited 1 after creating the database), and
// `tracelake config` called such a config OK.
func TestBadConfigFilesExit2BeforeTheSinkOpens(t *testing.T) {
	f := writeConfigFiles(t)
	cert, key, garbage, missing := f.cert, f.key, f.garbage, f.missing
	goodTokens := filepath.Join(f.dir, "tokens")
	writeFile(t, goodTokens, "s3cr3t team-a\n")
	cases := map[string]struct{ section, key string }{
		"tokens missing":      {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tokens_file: %q}", missing), "otlp.tokens_file"},
		"tokens malformed":    {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tokens_file: %q}", garbage), "otlp.tokens_file"},
		"otlp cert missing":   {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q}}", missing, key), "otlp.tls.cert_file"},
		"otlp cert malformed": {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q}}", garbage, key), "otlp.tls.cert_file"},
		"otlp key missing":    {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q}}", cert, missing), "otlp.tls.key_file"},
		"otlp key malformed":  {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q}}", cert, garbage), "otlp.tls.key_file"},
		"otlp client CA missing": {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}", cert, key, missing),
			"otlp.tls.client_ca_file"},
		"otlp client CA malformed": {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}", cert, key, garbage),
			"otlp.tls.client_ca_file"},
		"query cert malformed": {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\", tokens_file: %q}\nquery: {flight_sql: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q}}", goodTokens, garbage, key),
			"query.tls.cert_file"},
		"query client CA missing": {fmt.Sprintf("otlp: {http: \"127.0.0.1:0\"}\nquery: {flight_sql: \"127.0.0.1:0\", tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}", cert, key, missing),
			"query.tls.client_ca_file"},
	}
	badConfigFilesExit2(t, cases)
}

// A kafka.tls file (ca_file, cert_file, key_file) that is missing or does
// not parse is a bad config as well: it was read first when the pipeline
// made its Kafka clients, after the sink was opened (exit 1), and
// `tracelake config` called it OK.
func TestBadKafkaTLSFilesExit2BeforeTheSinkOpens(t *testing.T) {
	f := writeConfigFiles(t)
	cert, key, garbage, missing := f.cert, f.key, f.garbage, f.missing
	kafka := func(tls string, args ...any) string {
		return `kafka: {brokers: ["127.0.0.1:1"], topics: [t], tls: {enabled: true, ` + fmt.Sprintf(tls, args...) + `}}`
	}
	badConfigFilesExit2(t, map[string]struct{ section, key string }{
		"CA missing":     {kafka("ca_file: %q", missing), "kafka.tls.ca_file"},
		"CA malformed":   {kafka("ca_file: %q", garbage), "kafka.tls.ca_file"},
		"cert malformed": {kafka("cert_file: %q, key_file: %q", garbage, key), "kafka.tls.cert_file"},
		"key missing":    {kafka("cert_file: %q, key_file: %q", cert, missing), "kafka.tls.key_file"},
		"key malformed":  {kafka("cert_file: %q, key_file: %q", cert, garbage), "kafka.tls.key_file"},
	})
}

// badConfigFilesExit2 checks each case's config section (its sink a
// DuckDB file of its own): validation names key, tracelake config and run
// exit 2, and run opened no database.
func badConfigFilesExit2(t *testing.T, cases map[string]struct{ section, key string }) {
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			// A run that got as far as the sink wraps the default logger
			// (obs.KeepErrors): the next run in this process would wrap
			// the wrapper, whose output is the log package's, its own.
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
			t.Cleanup(func() {
				slog.SetDefault(prev)
				log.SetOutput(os.Stderr)
			})
			dir := t.TempDir()
			db := filepath.Join(dir, "t.duckdb")
			cfgPath := filepath.Join(dir, "c.yaml")
			writeFile(t, cfgPath, fmt.Sprintf("%s\nsink: {duckdb: {path: %q}}\n", c.section, db))

			cf := configFlags{path: cfgPath}
			_, err := cf.loadService(true)
			if err == nil || !strings.Contains(err.Error(), c.key+": ") {
				t.Errorf("config check: %v, want an error naming %s", err, c.key)
			}
			if code := run([]string{"config", "--config", cfgPath}); code != exitUsage {
				t.Errorf("tracelake config exit code %d, want %d", code, exitUsage)
			}
			if code := run([]string{"run", "--config", cfgPath}); code != exitUsage {
				t.Errorf("tracelake run exit code %d, want %d", code, exitUsage)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("the database was opened for a bad config (stat: %v)", err)
			}
		})
	}
}

// The service's files (otlp.tokens_file, otlp.tls, query.tls, kafka.tls)
// are the service's: an operator's sql, dlq, verify or merge uses none of
// the server files, and one run where they are absent (or as a user who
// cannot read the service's key) must still answer. Since the files were
// read by every command's config check, each such command exited 2, "bad
// config", naming a file it never opens.
func TestCommandsThatDoNotUseTheServiceFilesIgnoreThem(t *testing.T) {
	dir, cfgPath := writeFilesConfig(t, func(f configFiles, dir string) string {
		return fmt.Sprintf(`otlp: {http: "127.0.0.1:0", tokens_file: %q, tls: {cert_file: %q, key_file: %q}}
query: {flight_sql: "127.0.0.1:0", tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}
kafka: {tls: {enabled: true, ca_file: %q}}
sink: {duckdb: {path: %q}}
`, f.missing, f.cert, f.missing, f.cert, f.garbage, f.missing, f.missing, filepath.Join(dir, "t.duckdb"))
	})
	// The commands read a database that is there (a run made it): where
	// none is they refuse the path (TestReadCommandsRefuseAMissingDatabase).
	createDatabase(t, filepath.Join(dir, "t.duckdb"))
	ctx := context.Background()
	for name, cmd := range map[string]func(env *cmdEnv) error{
		"sql":      func(env *cmdEnv) error { return cmdSQL(ctx, env, []string{"--config", cfgPath, "SELECT 42 AS answer"}) },
		"dlq list": func(env *cmdEnv) error { return cmdDLQ(ctx, env, []string{"list", "--config", cfgPath}) },
		"report":   func(env *cmdEnv) error { return cmdReport(ctx, env, []string{"--config", cfgPath, "-o", "-"}) },
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := cmd(&cmdEnv{stdout: &out, stderr: &errOut})
			if code, msg := exitStatus(err); code != exitOK {
				t.Errorf("%s: exit %d, %q, want the command answered (it uses none of the server files)", name, code, msg)
			}
		})
	}
	// The config check of those commands leaves the files alone; run
	// and tracelake config read them (the tests above), serve its query
	// files (TestServeIgnoresTheFilesItDoesNotUse). verify's
	// (needKafka) reads the kafka.tls files only: it asks Kafka with them
	// (TestVerifyRefusesAKafkaTLSFileItCannotRead).
	cf := configFlags{path: cfgPath, topics: "t"}
	if _, err := cf.loadFor(false); err != nil {
		t.Errorf("config of a command that uses no server file: %v", err)
	}
	_, err := cf.loadFor(true)
	if err == nil || !strings.Contains(err.Error(), "kafka.tls.ca_file: ") || strings.Contains(err.Error(), "otlp.") || strings.Contains(err.Error(), "query.") {
		t.Errorf("config of verify: %v, want kafka.tls.ca_file alone named (it uses no server file)", err)
	}
}

// verify asks Kafka for the end of every partition it checks, with the
// kafka.tls files. Since only run, serve and tracelake config read them up
// front, verify with a kafka.tls file it cannot read made no Kafka client,
// asked Kafka nothing and said nothing of it: it passed, checking the
// sink's tables only, whatever Kafka holds unloaded. A command that dials
// Kafka with these files must refuse them up front, as run does.
func TestVerifyRefusesAKafkaTLSFileItCannotRead(t *testing.T) {
	_, cfgPath := writeFilesConfig(t, func(f configFiles, dir string) string {
		return fmt.Sprintf(`kafka: {brokers: ["127.0.0.1:9"], topics: [t], group: g, tls: {enabled: true, ca_file: %q}}
sink: {duckdb: {path: %q}}
`, f.missing, filepath.Join(dir, "t.duckdb"))
	})
	cfg, err := config.FromFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	prepareSignalTables(t, cfg)
	var out, errOut bytes.Buffer
	err = cmdVerify(context.Background(), &cmdEnv{stdout: &out, stderr: &errOut}, []string{"--config", cfgPath})
	code, msg := exitStatus(err)
	if code != exitUsage || !strings.Contains(msg, "kafka.tls.ca_file: ") {
		t.Errorf("verify: exit %d, %q, want exit %d naming kafka.tls.ca_file (it dials Kafka with it)\n%s%s", code, msg, exitUsage, out.String(), errOut.String())
	}
}

// merge with change capture asks Kafka where the changelog topics end,
// with the kafka.tls files, and read none of them up front: it opened
// (created) the database and prepared its tables, then failed making its
// Kafka client (exit 1), not as a bad config before opening anything.
func TestChangeCaptureMergeRefusesAKafkaTLSFileItCannotRead(t *testing.T) {
	dir, cfgPath := writeFilesConfig(t, func(f configFiles, dir string) string {
		return fmt.Sprintf(`kafka: {brokers: ["127.0.0.1:9"], topics: [t], group: g, format: debezium, tls: {enabled: true, ca_file: %q}}
sink: {duckdb: {path: %q}}
`, f.missing, filepath.Join(dir, "t.duckdb"))
	})
	db := filepath.Join(dir, "t.duckdb")
	code, msg := exitStatus(cmdMerge(context.Background(), []string{"--config", cfgPath}))
	if code != exitUsage || !strings.Contains(msg, "kafka.tls.ca_file: ") {
		t.Errorf("merge: exit %d, %q, want exit %d naming kafka.tls.ca_file (it asks Kafka with it)", code, msg, exitUsage)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("merge opened the database before refusing its config (stat: %v)", err)
	}
}

// tracelake serve answers queries on the Iceberg tables: it reads
// query.tls and the tokens (its callers' tenants), not the receivers'
// otlp.tls nor kafka.tls. A query host given the service's config without
// the receivers' key or the Kafka CA (which it never opens) was refused,
// exit 2, naming those files.
func TestServeIgnoresTheFilesItDoesNotUse(t *testing.T) {
	_, cfgPath := writeFilesConfig(t, func(f configFiles, dir string) string {
		return fmt.Sprintf(`otlp: {http: "127.0.0.1:0", tls: {cert_file: %q, key_file: %q}}
query: {http: "127.0.0.1:0"}
kafka: {tls: {enabled: true, ca_file: %q}}
sink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q}}
`, f.cert, f.missing, f.missing, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve returns once it served, or fails opening
	err := cmdServe(ctx, []string{"--config", cfgPath})
	if code, msg := exitStatus(err); code == exitUsage || strings.Contains(msg, "otlp.tls") || strings.Contains(msg, "kafka.tls") {
		t.Errorf("serve: exit %d, %q, want no word of otlp.tls or kafka.tls (serve opens neither)", code, msg)
	}
}
