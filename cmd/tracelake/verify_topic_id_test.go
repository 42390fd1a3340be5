package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// A ledger loaded from a topic of another id than the topic Kafka has
// under its name now (deleted, recreated and refilled past the ledger
// while tracelake was stopped, so its log does not end below the ledger):
// the ledger's offsets name records of the old log, and verify must fail
// naming both ids, as the run does. Before, it passed, the new records
// past the ledger counted as lag and those below it as loaded.
func TestVerifyFailsOnATopicOfAnotherID(t *testing.T) {
	cluster, cl := startKafka(t, 1)
	for range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: []byte(`{}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	path := writeConfig(t, cluster, "", "")
	cfg, err := config.FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prepareSignalTables(t, cfg)
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	const oldID = "AAAAAAAAAAAAAAAAAAAAAA" // not the topic's: Kafka never gives the zero id
	for _, q := range []string{
		`INSERT INTO trace_raw SELECT uuid()::VARCHAR, i, 0, json_object('i', i), json_object('topic', '` + testTopic + `'), now() FROM range(5) r(i)`,
		`INSERT INTO trace_raw_ledger VALUES ('` + testTopic + `', 0, 0, 4, 5, 0, 'l1', 1, now(), '` + oldID + `')`,
	} {
		if _, err := snk.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := snk.Close(); err != nil {
		t.Fatal(err)
	}
	details, err := kadm.NewClient(cl).ListTopics(context.Background(), testTopic)
	if err != nil {
		t.Fatal(err)
	}
	id := details[testTopic].ID
	now := base64.RawURLEncoding.EncodeToString(id[:])

	var out, errOut bytes.Buffer
	err = cmdVerify(context.Background(), &cmdEnv{stdout: &out, stderr: &errOut}, []string{"--config", path})
	if err == nil {
		t.Fatalf("verify passed over a ledger of another topic id:\n%s%s", out.String(), errOut.String())
	}
	if text := out.String(); !strings.Contains(text, oldID) || !strings.Contains(text, now) || !strings.Contains(text, "deleted and recreated") {
		t.Errorf("verify does not name the ledger's topic id %s and the topic's %s:\n%s", oldID, now, text)
	}
}
