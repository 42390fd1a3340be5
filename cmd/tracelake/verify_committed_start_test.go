package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// A partition whose start a run committed (start_offset latest: the end
// when it began, 4) before anything of it was loaded: verify showed its
// lag as unknown ("-", -1), as if nothing said where loading begins. The
// committed start does: nothing is loaded yet, loading starts at 4, and
// the 6 records from there to the end are its lag. Not a problem: verify
// still passes.
func TestVerifyCommittedStartWithoutLoads(t *testing.T) {
	path := committedStartConfig(t, "", "")
	verifyOut := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		env := &cmdEnv{stdout: &out, stderr: &errOut}
		if err := cmdVerify(context.Background(), env, append([]string{"--config", path}, args...)); err != nil {
			t.Fatalf("verify %v: %v (want it to pass)\n%s%s", args, err, out.String(), errOut.String())
		}
		return out.String()
	}
	var rep struct { // verify.Report's JSON
		Partitions []struct {
			Lag        int64  `json:"lag"`
			LedgerNext int64  `json:"ledger_next"`
			Start      *int64 `json:"committed_start"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(verifyOut("--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 1 {
		t.Fatalf("partitions %+v, want one", rep.Partitions)
	}
	p := rep.Partitions[0]
	if p.Lag != 6 || p.Start == nil || *p.Start != 4 || p.LedgerNext != -1 {
		t.Errorf("lag %d, committed start %v, ledger next %d; want lag 6 (10 - 4), start 4, nothing loaded", p.Lag, p.Start, p.LedgerNext)
	}
	text := verifyOut()
	if want := testTopic + "/0: nothing loaded yet; loading starts at offset 4 (its committed start)"; !strings.Contains(text, want) {
		t.Errorf("verify's text does not say %q:\n%s", want, text)
	}
}

// committedStartConfig writes the config of a topic of 10 records (with
// kafkaExtra and rest, start_offset latest) whose group committed offset
// 4 with nothing loaded, and prepares the tables of each of its signals.
func committedStartConfig(t *testing.T, kafkaExtra, rest string) string {
	t.Helper()
	cluster, cl := startKafka(t, 1)
	for range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: []byte(`{}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	path := writeConfig(t, cluster, "start_offset: latest"+kafkaExtra, rest)
	cfg, err := config.FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: testTopic, Partition: 0, At: 4, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), cfg.Kafka.Group, off)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	prepareSignalTables(t, cfg)
	return path
}

// prepareSignalTables prepares the DuckDB tables of each of cfg's signals.
func prepareSignalTables(t *testing.T, cfg *config.Config) {
	t.Helper()
	for _, c := range cfg.SignalConfigs() {
		snk, err := openDuckDB(c, false)
		if err == nil {
			err = snk.Prepare(context.Background())
			snk.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
