package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStatusPage(t *testing.T) {
	st := NewStatus([2]string{"group", "g<1>"}, [2]string{"topics", "llm-traces"})
	loaded := time.Now().Add(-3 * time.Second)
	var consumed, lagged int64
	st.AddSource(func() Snapshot {
		return Snapshot{
			Partitions: []PartitionStatus{
				{Topic: "t", Partition: 1, Worker: 1, Next: 900, Committed: 900, HWM: 1_250_000, LastLoad: loaded},
				{Topic: "t", Partition: 0, Worker: 0, Next: -1, Committed: -1, HWM: -1},
			},
			Consumed: consumed, Loaded: consumed - lagged, InflightBytes: 3 << 20, InflightBudget: 1 << 30,
		}
	})
	// Two samples older than the window, then a minute of samples 5s apart
	// reading 1000 records/s.
	start := time.Now().Add(-History - time.Minute)
	st.Sample(start)
	st.Sample(start.Add(5 * time.Second))
	now := time.Now()
	for at := now.Add(-time.Minute); at.Before(now); at = at.Add(5 * time.Second) {
		consumed += 5000
		st.Sample(at)
	}
	if got := len(st.Samples()); got != 12 {
		t.Errorf("%d samples kept, want the 12 of the last 15 minutes", got)
	}

	log := slog.New(KeepErrors(slog.NewTextHandler(discardWriter{}, nil), st)).With("worker", 3)
	log.Info("not an error")
	for i := range maxErrors + 5 {
		log.WithGroup("g").Error("failed", "n", i)
	}
	log.Warn("load failed; retrying", "err", errors.New(`bad <script>alert(1)</script>`))
	errs := st.Errors()
	if len(errs) != maxErrors || errs[1].Text != "failed worker=3 g.n=24" || errs[maxErrors-1].Text != "failed worker=3 g.n=6" {
		t.Fatalf("kept %d errors: %+v", len(errs), errs)
	}

	at := time.Now().Add(-2 * time.Second)
	st.SetModel(ModelStatus{Name: "spans", At: at, Read: 1200, Changed: 1100, Rejected: 3, Took: 40 * time.Millisecond, LastSuccess: at})
	st.SetModel(ModelStatus{Name: "spans", At: at, Err: "merge into <t>: conflict"}) // keeps the last success's figures

	st.AddCommit(CommitAttempt{Table: "ns.raw", Took: 30 * time.Millisecond, Snapshots: 40, MetadataBytes: 3 << 20})
	st.AddCommit(CommitAttempt{Table: "ns.raw", Took: 20 * time.Millisecond, Conflict: true})
	st.AddCommit(CommitAttempt{Table: "ns.raw", Took: 10 * time.Millisecond, Snapshots: 41})
	st.AddCommit(CommitAttempt{Table: "ns.raw", Took: 5 * time.Millisecond, Failed: true})

	html := render(t, st, "sink not prepared")
	for _, want := range []string{
		`group <b>g&lt;1&gt;</b>`,
		`not ready: sink not prepared`,
		`<td class="l">t</td><td>0</td><td>0</td><td>–</td><td>–</td><td>–</td><td class="lag">–</td><td>–</td>`,
		`<td class="l">t</td><td>1</td><td>1</td><td>900</td><td>900</td><td>1,250,000</td><td class="lag">1,249,100</td><td>3s ago</td>`,
		`3 MiB</div><div class="k">in flight of 1 GiB`,
		`bad &lt;script&gt;alert(1)&lt;/script&gt;`,
		`>1k/s</text>`, // throughput axis top: 1000/s
		// Commits landed, lost, failed; the last and the slowest; the
		// snapshot count of the last commit, the last metadata size read.
		`<td class="l">ns.raw</td><td>2</td><td>1</td><td class="bad">1</td><td>5ms</td><td>30ms</td><td>0s ago</td><td>41</td><td>3 MiB</td>`,
		`<td class="l">spans</td><td>2s ago</td><td>1,200</td><td>1,100</td><td>3</td><td>40ms</td><td>2s ago</td><td class="l bad">merge into &lt;t&gt;: conflict</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %s", want)

		}
	}
	if strings.Contains(html, "<script>") {
		t.Error("error text not escaped")
	}
	// Row order: partition 0 before 1, whatever the source's order.
	if i0, i1 := strings.Index(html, `<td>0</td><td>0</td>`), strings.Index(html, `<td>1</td><td>1</td>`); i0 > i1 {
		t.Error("partitions not sorted")
	}
	// The read series has 11 rates (12 samples in the window); loaded, the
	// same; both drawn as polylines of that many points.
	for _, m := range regexp.MustCompile(`<polyline points="([^"]*)"`).FindAllStringSubmatch(html, -1)[:2] {
		if n := len(strings.Fields(m[1])); n != 11 {
			t.Errorf("polyline with %d points, want 11", n)
		}
	}
}

func TestStatusPageEmpty(t *testing.T) {
	html := render(t, NewStatus(), "")
	for _, want := range []string{"no data yet", `<b class="ok">ready</b>`, "none since start", "not joined yet"} {
		if !strings.Contains(html, want) {
			t.Errorf("empty page lacks %q", want)
		}
	}
}

// A live header field is read at each render.
func TestStatusPageLiveField(t *testing.T) {
	s, n := NewStatus([2]string{"group", "g"}), 0
	s.AddLive("S3 requests", func() string { n++; return fmt.Sprintf("%d PUT", n) })
	for _, want := range []string{"S3 requests <b>1 PUT</b>", "S3 requests <b>2 PUT</b>"} {
		if html := render(t, s, ""); !strings.Contains(html, want) || !strings.Contains(html, "group <b>g</b>") {
			t.Errorf("page lacks %q (and the fixed field)", want)
		}
	}
}

// The page shows the sum of its sources: the Kafka workers' partitions
// and the receivers' direct loads side by side, their counts added.
func TestStatusSumsSources(t *testing.T) {
	st := NewStatus()
	st.AddSource(func() Snapshot {
		return Snapshot{Partitions: []PartitionStatus{{Topic: "t", Partition: 0, Worker: 1, Next: 10, Committed: 10, HWM: 12}},
			Consumed: 12, Loaded: 10, InflightBudget: 1 << 20}
	})
	st.AddSource(func() Snapshot {
		return Snapshot{Partitions: []PartitionStatus{{Topic: "otlp:traces", Partition: 0, Worker: -1, Next: 3, Committed: -1, HWM: 5}},
			Consumed: 5, Loaded: 700, DLQ: 1}
	})
	snap := st.Snapshot()
	if len(snap.Partitions) != 2 || snap.Consumed != 17 || snap.Loaded != 710 || snap.DLQ != 1 || snap.totalLag() != 4 {
		t.Fatalf("snapshot %+v", snap)
	}
	html := render(t, st, "")
	if !regexp.MustCompile(`otlp:traces</td><td>0</td><td>receivers</td>`).MatchString(html) {
		t.Errorf("the receivers' sequence is not shown as theirs:\n%s", html)
	}
}

func render(t *testing.T, st *Status, notReady string) string {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", New(), st, func() string { return notReady }, slog.New(slog.NewTextHandler(discardWriter{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	code, body := get(t, "http://"+srv.Addr()+"/")
	if code != 200 {
		t.Fatalf("GET / = %d", code)
	}
	if code, _ := get(t, "http://"+srv.Addr()+"/nope"); code != 404 {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	return body
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
