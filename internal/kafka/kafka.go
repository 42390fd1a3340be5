// Package kafka builds franz-go clients from tracelake's config and answers
// the admin look-ups other packages need (watermarks, committed offsets).
package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink"
)

// ClientOptions are the connection options shared by consumers and admin
// clients, TLS and SASL included.
func ClientOptions(k config.Kafka) ([]kgo.Opt, error) {
	sec, err := securityOptions(k)
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
		kgo.ClientID(k.ClientID),
		kgo.MetadataMaxAge(k.MetadataRefresh.D()),
		kgo.MetadataMinAge(min(k.MetadataRefresh.D(), 5*time.Second)),
		kgo.RetryTimeout(30 * time.Second),
	}, sec...), nil
}

// ConsumerOptions are ClientOptions plus the group consumer settings every
// worker uses: manual commits only (offsets move after the sink commits, and
// to a partition's start before a partition with no position is read),
// cooperative-sticky assignment, and rebalances blocked while a poll is being
// processed so a callback never runs in the middle of a batch.
//
// A partition without a committed offset starts at its log start: with
// start_offset latest the pipeline sets where it starts instead (the
// partition's end when the run started, see Admin.ConsumedWatermarks), so
// the reset offset franz-go hands to the offset-adjust callback is always
// "no offset" (-2) and never taken for one.
func ConsumerOptions(k config.Kafka) ([]kgo.Opt, error) {
	reset := kgo.NewOffset().AtStart()
	opts, err := ClientOptions(k)
	if err != nil {
		return nil, err
	}
	opts = append(opts, consumeTopics(k)...)
	return append(opts,
		kgo.ConsumerGroup(k.Group),
		kgo.SessionTimeout(k.SessionTimeout.D()),
		kgo.RebalanceTimeout(k.RebalanceTimeout.D()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		// Records of aborted transactions are never loaded; records of
		// open ones wait until they commit. The commit and abort markers
		// come with the records: each holds an offset, and a batch's range
		// covers it, so committed offsets reach a partition's end.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(reset),
		// Fetches wait in the client until polled, outside
		// max_inflight_bytes, and decompressed: each worker sizes its
		// fetches with a FetchSizer (config.FetchBytes).
		// Resumed partitions join the next fetch; a short wait keeps a
		// pause (max_inflight_bytes) from costing the default 5s.
		kgo.FetchMaxWait(time.Second),
	), nil
}

// Watermarks are a partition's first and next offsets in Kafka.
type Watermarks struct{ Low, High int64 }

// Admin answers offset look-ups for verify and for exit-when-idle.
type Admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

// NewAdmin connects an admin client.
func NewAdmin(k config.Kafka) (*Admin, error) {
	opts, err := ClientOptions(k)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (a *Admin) Close() { a.cl.Close() }

// Ping checks that a broker answers a request, through TLS and SASL as
// configured.
func (a *Admin) Ping(ctx context.Context) error {
	if err := a.cl.Ping(ctx); err != nil {
		return fmt.Errorf("no broker answered (check kafka.brokers, kafka.tls and kafka.sasl): %w", err)
	}
	return nil
}

// TopicIDString is a topic id as Kafka's tools print it (kafka-topics
// --describe: base64 URL-safe, unpadded); "" for the zero id a Kafka
// before 2.8 answers.
func TopicIDString(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// TopicIDs returns Kafka's id of each of topics it knows and gives one.
func (a *Admin) TopicIDs(ctx context.Context, topics []string) (map[string]string, error) {
	details, err := a.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list topics %s: %w", strings.Join(topics, ", "), err)
	}
	out := map[string]string{}
	for t, d := range details {
		if id := TopicIDString(d.ID); d.Err == nil && id != "" {
			out[t] = id
		}
	}
	return out, nil
}

// Watermarks returns the low watermark and the last stable offset (High)
// of every partition of topics: what a read-committed consumer can read.
// Without an open transaction the last stable offset is the high
// watermark; records past it belong to open transactions and are not
// readable yet, so lag and idleness are measured against it.
func (a *Admin) Watermarks(ctx context.Context, topics []string) (map[sink.TopicPartition]Watermarks, error) {
	return a.watermarks(ctx, topics, false)
}

// ExistingWatermarks are the Watermarks of the partitions of those of
// topics that exist: a topic Kafka does not know (deleted) has none, and
// is no error. A partition of a topic Kafka knows whose listing answered
// UNKNOWN_TOPIC_OR_PARTITION (the broker asked no longer hosts it, after
// a reassignment: stale metadata) is an error like any other: left out,
// start_offset latest took it as created after the run started and read
// it from 0, and exit-when-idle took it as caught up.
func (a *Admin) ExistingWatermarks(ctx context.Context, topics []string) (map[sink.TopicPartition]Watermarks, error) {
	return a.watermarks(ctx, topics, true)
}

func (a *Admin) watermarks(ctx context.Context, topics []string, existing bool) (map[sink.TopicPartition]Watermarks, error) {
	starts, err := a.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %v: %w", topics, err)
	}
	ends, err := a.adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list last stable offsets of %v: %w", topics, err)
	}
	out := make(map[sink.TopicPartition]Watermarks)
	var firstErr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			// Partition -1: kadm's answer for a topic its metadata
			// does not hold, the only sign that the topic is absent.
			if existing && o.Partition < 0 && errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			}
			return
		}
		tp := sink.TopicPartition{Topic: o.Topic, Partition: o.Partition}
		w := Watermarks{High: o.Offset}
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			w.Low = s.Offset
		}
		out[tp] = w
	})
	return out, firstErr
}

// Committed returns the group's committed offsets: none for a group
// that does not exist (yet), which some brokers answer GROUP_ID_NOT_FOUND.
func (a *Admin) Committed(ctx context.Context, group string) (map[sink.TopicPartition]int64, error) {
	resp, err := a.adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[sink.TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch committed offsets of group %s: %w", group, err)
	}
	out := make(map[sink.TopicPartition]int64)
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[sink.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.At
		}
	})
	return out, nil
}

// FormatPartitions renders {"t": [0 1]} as "t[0 1]" for the assignment logs.
func FormatPartitions(m map[string][]int32) string {
	topics := make([]string, 0, len(m))
	for t := range m {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	parts := make([]string, len(topics))
	for i, t := range topics {
		ps := slices.Clone(m[t])
		slices.Sort(ps)
		parts[i] = fmt.Sprintf("%s%v", t, ps)
	}
	return strings.Join(parts, ", ")
}

// SlogAdapter lets franz-go log through slog at warn level and above.
func SlogAdapter(l *slog.Logger) kgo.Opt {
	return kgo.WithLogger(kgoLogger{l})
}

type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// commitBookkeepingNote is franz-go's warning that a commit's response
// found no uncommitted map to update (consumer_group.go updateCommitted).
// That map is franz-go's own record of polled offsets, which tracelake
// never uses: it commits explicit offsets and checks each response's error
// codes itself (a member that was really kicked gets its commit refused and
// logs that). The map is absent before a member's first poll, when a new
// partition's start is committed, so the note came with every first start.
const commitBookkeepingNote = "received an OffsetCommitResponse after our group session has ended"

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelInfo
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	}
	if strings.HasPrefix(msg, commitBookkeepingNote) {
		lvl = slog.LevelDebug
	}
	k.l.Log(context.Background(), lvl, "kafka: "+msg, keyvals...)
}

// consumeTopics consumes the listed topics, or every topic matching
// topic_regex (franz-go re-evaluates it at each metadata refresh).
func consumeTopics(k config.Kafka) []kgo.Opt {
	if k.TopicRegex != "" {
		return []kgo.Opt{kgo.ConsumeRegex(), kgo.ConsumeTopics(k.TopicRegex)}
	}
	return []kgo.Opt{kgo.ConsumeTopics(k.Topics...)}
}

// Topics returns the topics consumed now: the listed ones, or those
// matching topic_regex that Kafka does not flag internal. That is what
// franz-go's regex consumer takes (kgo consumer.go skips a topic's
// metadata isInternal, nothing else); kadm's ListTopics of all topics
// leaves out the same ones. A name with a leading "__" is no sign: such a
// topic of the user's was consumed, but left out here, so start_offset
// latest read it from its beginning and verify and exit-when-idle did not
// see it.
func (a *Admin) Topics(ctx context.Context, k config.Kafka) ([]string, error) {
	if k.TopicRegex == "" {
		return k.Topics, nil
	}
	re, err := regexp.Compile(k.TopicRegex)
	if err != nil {
		return nil, fmt.Errorf("kafka.topic_regex: %w", err)
	}
	listed, err := a.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []string
	for _, t := range listed.Names() {
		if re.MatchString(t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ConsumedWatermarks returns the watermarks of every partition consumed now.
// A listed topic Kafka does not know (not created yet, or deleted) has no
// partition to consume, as a topic_regex run lists only existing topics:
// it is left out, not an error. Else exit-when-idle never saw the run
// caught up, and start_offset latest refused to start.
func (a *Admin) ConsumedWatermarks(ctx context.Context, k config.Kafka) (map[sink.TopicPartition]Watermarks, error) {
	topics, err := a.Topics(ctx, k)
	if err != nil {
		return nil, err
	}
	if len(topics) == 0 {
		return map[sink.TopicPartition]Watermarks{}, nil
	}
	return a.ExistingWatermarks(ctx, topics)
}

// DataRecords reads each partition of spans from its From through its
// Last offset, as a read-committed consumer, and returns the offsets that
// hold a committed data record — not a transaction marker, not a record
// of an aborted transaction, not compacted away. Verify uses it to tell a
// missing record from an offset that never held one. Each span's Last must
// be below the partition's last stable offset: the read ends at the first
// record or marker past Last, and one exists below that offset. stores,
// when set, says whether a record holds anything to store (an OTLP
// message with no items, or another signal's, does not); a record it
// refuses counts as no data record.
func DataRecords(ctx context.Context, k config.Kafka, spans map[sink.TopicPartition]sink.Run, stores func(*kgo.Record) bool) (map[sink.TopicPartition]*sink.Offsets, error) {
	out := make(map[sink.TopicPartition]*sink.Offsets, len(spans))
	if len(spans) == 0 {
		return out, nil
	}
	start := map[string]map[int32]kgo.Offset{}
	for tp, r := range spans {
		if start[tp.Topic] == nil {
			start[tp.Topic] = map[int32]kgo.Offset{}
		}
		start[tp.Topic][tp.Partition] = kgo.NewOffset().At(r.First)
		out[tp] = &sink.Offsets{}
	}
	opts, err := ClientOptions(k)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	done := make(map[sink.TopicPartition]bool, len(spans))
	for len(done) < len(spans) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %d partitions to tell missing records from markers: %w", len(spans)-len(done), err)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("read %s/%d: %w", t, p, err)
		})
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			tp := sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			span, ok := spans[tp]
			if !ok || done[tp] {
				return
			}
			if r.Offset <= span.Last && !r.Attrs.IsControl() && (stores == nil || stores(r)) {
				out[tp].Add(r.Offset)
			}
			if r.Offset >= span.Last {
				done[tp] = true
				cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
	}
	return out, nil
}
