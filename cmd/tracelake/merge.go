package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// cmdMerge is `tracelake merge`: merge the raw table into the models'
// targets once, on a schedule, or rebuild one; or print the SQL.
func cmdMerge(ctx context.Context, args []string) error {
	fs := newFlagSet("merge")
	var cf configFlags
	cf.register(fs)
	model := fs.String("model", "", "merge only this model (default: every model in merge.models)")
	every := fs.Duration("every", 0, "merge again at this interval until stopped")
	rebuild := fs.String("rebuild", "", "rebuild this model's target from the whole raw table (after its columns or rules changed); with OpenTelemetry spans, genai_operations (genai.table) from the spans, with the prices of now")
	chunk := fs.Int64("chunk", 1_000_000, "rebuild: merge the raw table in slices of this many offsets")
	printSQL := fs.Bool("print-sql", false, "print the SQL of the models instead of running it")
	dialect := fs.String("dialect", "databend", "print-sql: databend or duckdb")
	task := fs.Bool("task", false, "databend sink: create and resume each model's Databend task, which runs the same merge every minute inside Databend (Databend Cloud), instead of merging here")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *every < 0 {
		// Negative, it was taken for 0 (merge once and exit) without a word.
		return usagef("--every %s: want 0 or more", *every)
	}
	cfg, err := cf.loadMerge()
	if err != nil {
		return err
	}
	if *printSQL {
		// Printing needs no database: do not open (and lock) the file.
		if cfg.DecodesOTLP() {
			return printDedupSQL(os.Stdout, cfg, *dialect)
		}
		models, err := selectModels(cfg, *model)
		if err != nil {
			return err
		}
		return printModelSQL(os.Stdout, models, *dialect)
	}
	// The operations are the spans', whichever signal of a load-mode run
	// takes them (GenAIConfig): with kafka.signal logs and traces among
	// otlp.signals, cfg's own table has none.
	if g := cfg.GenAIConfig(); g != nil && *rebuild != "" && *rebuild == g.GenAI.Table {
		n, err := rebuildGenAI(ctx, g)
		if err != nil {
			return fmt.Errorf("rebuild %s: %w", g.GenAI.Table, err)
		}
		fmt.Printf("rebuilt %s from %s: %d operations\n", g.GenAI.Table, g.Sink.Table, n)
		return nil
	}
	if cfg.DecodesOTLP() {
		if *rebuild != "" || *model != "" || *task {
			return usagef("--rebuild, --model and --task: an OpenTelemetry table has one built-in model, %s_dedup, merged by tracelake (drop it to rebuild it)%s", cfg.Sink.Table, genaiHint(cfg))
		}
		return mergeDedup(ctx, cfg, *every)
	}
	if cfg.Sink.Type == config.SinkIceberg {
		return fmt.Errorf("tracelake merge: models are not built for the iceberg sink yet")
	}
	if cfg.Sink.Type == config.SinkDatabend {
		if *rebuild != "" {
			return usagef("--rebuild: not built for the databend sink (drop the model's target, then merge: a merge that finds the target absent forgets the model's watermarks, rejects and tombstones and builds it again from the first raw row)")
		}
		snk, err := openDatabend(cfg)
		if err != nil {
			return err
		}
		defer snk.Close()
		models, err := selectModels(cfg, *model)
		if err != nil {
			return err
		}
		return mergeLoop(ctx, mergeJob{merger: merge.NewDatabendMerger(snk, *task), models: models}, *every)
	}
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		return err
	}
	defer snk.Close()
	if err := snk.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	mg := merge.NewMerger(snk.DB(), slog.Default())
	if cfg.CapturesChanges() {
		if *rebuild != "" || *model != "" || *task {
			return usagef("--rebuild, --model and --task: with kafka.format %s every changelog table's model is merged, none is configured", cfg.Kafka.Format)
		}
		hb, closeHB, err := newMarkSources(cfg, false)
		if err != nil {
			return err
		}
		defer closeHB()
		job, err := changelogJob(cfg, mg, snk, hb)
		if err != nil {
			return err
		}
		return mergeLoop(ctx, job, *every)
	}
	if *rebuild != "" {
		m, err := cfg.Model(*rebuild)
		if err != nil {
			return usageError{err}
		}
		res, err := mg.Rebuild(ctx, m, *chunk)
		if err != nil {
			return err
		}
		fmt.Println("rebuilt", res)
		return nil
	}
	models, err := selectModels(cfg, *model)
	if err != nil {
		return err
	}
	return mergeLoop(ctx, mergeJob{merger: mg, models: models}, *every)
}

// genaiHint names the one table --rebuild takes with OpenTelemetry spans.
func genaiHint(cfg *config.Config) string {
	if g := cfg.GenAIConfig(); g != nil {
		return "; --rebuild " + g.GenAI.Table + " recomputes the operations and costs of " + g.Sink.Table
	}
	return ""
}

// mergeJob is what merge.every merges with one merger: models, or the
// models list lists at each pass (the changelog tables' models, whose
// tables appear as their sources' first changes load).
type mergeJob struct {
	merger modelMerger
	models []config.Model
	list   func(context.Context) ([]config.Model, error)
	// after, when set, runs after each pass (the changelog models' done
	// marks, which look at each model's own progress: one failed merge
	// holds back its own model's marks alone).
	after func(context.Context) error
	// concurrency is how many of its models merge at once (eachModel);
	// 0 or 1, one after another.
	concurrency int
}

// current returns the job's models as of now.
func (j mergeJob) current(ctx context.Context) ([]config.Model, error) {
	if j.list == nil {
		return j.models, nil
	}
	models, err := j.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the models to merge: %w", err)
	}
	return models, nil
}

// changelogJob merges the model of every changelog table of cfg's sink
// (kafka.format debezium, canal or maxwell), snk, marking the hours done
// after each pass by hb: the heartbeats read and the listing of offsets.
func changelogJob(cfg *config.Config, mg *merge.Merger, snk *duckdb.Sink, hb markSources) (mergeJob, error) {
	dec, err := cdc.NewDecoder(cfg.CDCOptions())
	if err != nil {
		return mergeJob{}, err
	}
	cm := merge.NewChangelogMerger(mg, snk, dec)
	cm.SetConcurrency(cfg.MergeConcurrency()) // its merges share memory_limit (eachModel below)
	mark := func(ctx context.Context) error {
		m := merge.Marking{Now: time.Now(), Idle: cfg.CDC.Idle.D(), Delay: cfg.CDC.ReadyDelay.D(), Beats: hb.beats.Latest()}
		if hb.admin != nil {
			m.Ends, m.Committed = hb.ends, hb.committed
		}
		n, err := cm.MarkReady(ctx, m)
		if n > 0 {
			slog.Info("marked hours of changelog models done", "marks", n)
		}
		return err
	}
	return mergeJob{merger: cm, list: cm.Pending, after: mark, concurrency: cfg.MergeConcurrency()}, nil
}

// markSources are what the done marks go by beyond the tables: the
// heartbeats a run reads (cdc.heartbeats), and the client that lists the
// offsets of the changelog tables' topics and the group's committed ones
// (a partition with records to load and none loaded holds its tables
// back; a heartbeat moves partitions loaded to their end).
type markSources struct {
	beats *cdc.Beats
	admin *kafka.Admin
	group string
	kafka config.Kafka // the topics read
}

// listTimeout bounds a round's listing of offsets: a round whose listing
// fails marks nothing, and the merges go on.
const listTimeout = 15 * time.Second

// newMarkSources are cfg's mark sources with change capture: the
// heartbeats when reading (tracelake run; tracelake merge reads no
// change), and the listing client.
func newMarkSources(cfg *config.Config, reading bool) (markSources, func(), error) {
	var hb markSources
	if !cfg.CapturesChanges() {
		return hb, func() {}, nil
	}
	admin, err := kafka.NewAdmin(cfg.Kafka)
	if err != nil {
		return hb, nil, err
	}
	hb.admin, hb.group, hb.kafka = admin, cfg.Kafka.Group, cfg.Kafka
	if reading {
		hb.beats = cdc.NewBeats(cfg.Heartbeats())
	}
	return hb, admin.Close, nil
}

// ends lists the log start and last stable offsets of the partitions of
// those of topics that exist, and of every other topic read: a topic
// that no changelog table's changes came from yet may carry any table's
// (a shard's, on a topic of its own), and holds the marks back while it
// has records to load (merge.Marking.Ends).
func (h markSources) ends(ctx context.Context, topics []string) (map[sink.TopicPartition]merge.Offsets, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	read, err := h.admin.Topics(ctx, h.kafka)
	if err != nil {
		return nil, fmt.Errorf("list the topics read: %w", err)
	}
	topics = slices.Clone(topics) // the caller's
	for _, t := range read {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	w, err := h.admin.ExistingWatermarks(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make(map[sink.TopicPartition]merge.Offsets, len(w))
	for tp, m := range w {
		out[tp] = merge.Offsets{Start: m.Low, End: m.High}
	}
	return out, nil
}

// committed lists the consumer group's committed offsets.
func (h markSources) committed(ctx context.Context) (map[sink.TopicPartition]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	return h.admin.Committed(ctx, h.group)
}

// mergeJobs are the models merge.every merges in a run of cfg: with
// OpenTelemetry rows, each loaded table's dedup model (the run's, with
// merger, and those of the other signals' targets), else merge.models.
func mergeJobs(cfg *config.Config, merger modelMerger, targets []loadTarget, hb markSources) ([]mergeJob, error) {
	if cfg.CapturesChanges() {
		mg, ok := merger.(*merge.Merger)
		snk, sok := targets[0].snk.(*duckdb.Sink)
		if !ok || !sok {
			return nil, fmt.Errorf("BUG: kafka.format %s with a %T merger and a %T sink, not DuckDB's", cfg.Kafka.Format, merger, targets[0].snk)
		}
		job, err := changelogJob(cfg, mg, snk, hb)
		return []mergeJob{job}, err
	}
	if !cfg.DecodesOTLP() {
		models, err := selectModels(cfg, "")
		return []mergeJob{{merger: merger, models: models}}, err
	}
	jobs := []mergeJob{{merger: merger, models: oneModel(otelDedupOf(cfg))}}
	for _, t := range targets[1:] {
		jobs = append(jobs, mergeJob{merger: dedupMerger(t.cfg, t.snk), models: oneModel(otelDedupOf(t.cfg))})
	}
	return jobs, nil
}

// otelDedupOf is the dedup model of cfg's OpenTelemetry table.
func otelDedupOf(cfg *config.Config) merge.Dedup {
	return merge.Dedup{Table: typedTable(cfg), Name: cfg.Sink.Table}
}

// mergeDedup merges the built-in dedup model of each OpenTelemetry table
// a run of cfg loads — its own and, in a load-mode run taking several
// signals, each other signal's (otlp.signals: otel_logs, otel_metrics) —
// once or at each interval, their tables prepared first. Merging only
// cfg's table left the other signals' models unmerged (run's merge.every
// merges them all: mergeJobs).
func mergeDedup(ctx context.Context, cfg *config.Config, every time.Duration) error {
	var jobs []mergeJob
	var sinks []sink.Sink
	defer func() {
		for _, s := range slices.Backward(sinks) { // the DuckDB sinks beside the first before it
			s.Close()
		}
	}()
	for _, c := range cfg.SignalConfigs() {
		var snk sink.Sink
		var err error
		switch c.Sink.Type {
		case config.SinkIceberg:
			snk, err = openIceberg(ctx, c)
		case config.SinkDatabend:
			snk, err = openDatabend(c)
		default:
			if len(sinks) == 0 {
				snk, err = openDuckDB(c, false)
			} else {
				// One process opens a DuckDB file once: the other
				// tables' sinks share the first's database.
				snk, err = sinks[0].(*duckdb.Sink).Beside(duckDBOptions(c))
			}
		}
		if err != nil {
			if c != cfg {
				err = fmt.Errorf("the %s table %s: %w", c.Kafka.Signal, c.Sink.Table, err)
			}
			return err
		}
		sinks = append(sinks, snk)
		if err := snk.Prepare(ctx); err != nil {
			return fmt.Errorf("prepare the tables of %s: %w", c.Sink.Table, err)
		}
		jobs = append(jobs, mergeJob{merger: dedupMerger(c, snk), models: oneModel(otelDedupOf(c))})
	}
	return mergeLoops(ctx, jobs, every)
}

// dedupMerger is the merger of cfg's dedup model on its opened sink.
func dedupMerger(cfg *config.Config, snk sink.Sink) modelMerger {
	d := otelDedupOf(cfg)
	switch s := snk.(type) {
	case *iceberg.Sink:
		return icebergDedup{s, d}
	case *databend.Sink:
		return databendDedup{merge.NewDatabendMerger(s, false), d}
	case *duckdb.Sink:
		return otelDedup{merge.NewMerger(s.DB(), slog.Default()), d}
	}
	panic(fmt.Sprintf("BUG: no dedup model for a %T", snk))
}

// otelDedup runs an OpenTelemetry table's built-in model (one row per
// span, log record or point in <table>_dedup) on DuckDB.
type otelDedup struct {
	mg *merge.Merger
	d  merge.Dedup
}

// oneModel is the one model of an OpenTelemetry table, by name: what
// mergeLoop and merge.every merge.
func oneModel(d merge.Dedup) []config.Model { return []config.Model{{Name: d.Target()}} }

// Merge implements modelMerger.
func (o otelDedup) Merge(ctx context.Context, _ config.Model) (merge.Result, error) {
	r, err := o.mg.Dedup(ctx, o.d)
	return merge.Result{Model: r.Target, Read: r.Read, Changed: r.Inserted, Took: r.Took}, err
}

// icebergDedup runs the same model on Iceberg (iceberg.Sink.Dedup).
type icebergDedup struct {
	snk *iceberg.Sink
	d   merge.Dedup
}

// Merge implements modelMerger.
func (o icebergDedup) Merge(ctx context.Context, _ config.Model) (merge.Result, error) {
	start := time.Now()
	r, err := o.snk.Dedup(ctx, o.d.Identity())
	return merge.Result{Model: o.d.Target(), Read: r.Read, Changed: r.Inserted, Took: time.Since(start)}, err
}

// databendDedup runs the same model on Databend (DatabendMerger.Dedup).
type databendDedup struct {
	mg *merge.DatabendMerger
	d  merge.Dedup
}

// Merge implements modelMerger.
func (o databendDedup) Merge(ctx context.Context, _ config.Model) (merge.Result, error) {
	return o.mg.Dedup(ctx, o.d)
}

// mergeLoop merges every model once, or at each interval until ctx ends.
func mergeLoop(ctx context.Context, job mergeJob, every time.Duration) error {
	return mergeLoops(ctx, []mergeJob{job}, every)
}

// mergeLoops merges every model of each job once, or at each interval
// until ctx ends: a pass merges all the jobs, one after another, going
// on past a job that failed (one signal's table does not hold back the
// others'), and fails naming each failure.
func mergeLoops(ctx context.Context, jobs []mergeJob, every time.Duration) error {
	for {
		var errs []error
		for _, job := range jobs {
			errs = append(errs, mergeOnce(ctx, job))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if every <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// mergeOnce is one pass of job: its models merged, then its after.
func mergeOnce(ctx context.Context, job mergeJob) error {
	models, err := job.current(ctx)
	if err != nil {
		return err
	}
	if len(models) == 0 && job.list != nil {
		fmt.Println("no changelog table has rows its model lacks")
	}
	if err := mergeAll(ctx, job, models, func(r merge.Result) { fmt.Println(r) }); err != nil {
		return err
	}
	if job.after != nil {
		return job.after(ctx)
	}
	return nil
}

// selectModels returns the named model, or every model; an error if there
// is none.
func selectModels(cfg *config.Config, name string) ([]config.Model, error) {
	if name != "" {
		m, err := cfg.Model(name)
		if err != nil {
			return nil, usageError{err}
		}
		return []config.Model{m}, nil
	}
	if len(cfg.Merge.Models) == 0 {
		return nil, usagef("merge.models: no models configured (see README, \"Models\")")
	}
	return cfg.Models(), nil
}

// mergeAll merges each of the job's models once, reporting each result,
// and returns the failures joined, in the models' order, and an error
// when ctx ended before every model was merged. A model that fails
// changed nothing (one transaction), so the others are merged all the
// same: one changelog table without a primary key does not keep the
// others' models behind.
func mergeAll(ctx context.Context, job mergeJob, models []config.Model, report func(merge.Result)) error {
	errs := make([]error, len(models)+1)
	var mu sync.Mutex
	started := eachModel(ctx, models, job.concurrency, func(i int, m config.Model) {
		res, err := job.merger.Merge(ctx, m)
		if err != nil {
			errs[i] = fmt.Errorf("merge model %s: %w", m.Name, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		report(res)
	})
	if started < len(models) {
		errs[len(models)] = fmt.Errorf("stopped with %d of %d models not merged: %w", len(models)-started, len(models), context.Cause(ctx))
	}
	return errors.Join(errs...)
}

// eachModel calls merge for each model, up to n at once (one at a time
// for n ≤ 1), until ctx ends: the merges started finish, no other
// starts. It returns how many it started. Different models' merges
// write different tables and different rows of the tables they share,
// which exist before a round (ChangelogMerger.Pending creates them).
func eachModel(ctx context.Context, models []config.Model, n int, merge func(i int, m config.Model)) (started int) {
	sem := make(chan struct{}, max(n, 1))
	var wg sync.WaitGroup
	for i, m := range models {
		sem <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		started++
		wg.Go(func() {
			defer func() { <-sem }()
			merge(i, m)
		})
	}
	wg.Wait()
	return started
}

// mergeEvery merges every job's models at each interval in the
// background of `tracelake run` (merge.every), one after another (the
// tables of one database or catalog do not race each other's merges),
// until ctx ends, reporting each attempt to the metrics and the status
// page. A failed merge changes nothing (one transaction) and is tried
// again at the next interval.
func mergeEvery(ctx context.Context, jobs []mergeJob, every time.Duration, m *obs.Metrics, status *obs.Status) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, j := range jobs {
			if !mergePass(ctx, j, every, m, status) && ctx.Err() != nil {
				return
			}
		}
	}
}

// mergePass merges every model once, reporting each attempt, and reports
// whether every model merged (false too when ctx ended during the pass:
// the merge in flight was rolled back).
func mergePass(ctx context.Context, job mergeJob, every time.Duration, m *obs.Metrics, status *obs.Status) (ok bool) {
	models, err := job.current(ctx)
	if err != nil {
		slog.Warn("merge failed; retrying at the next merge.every", "every", every, "err", err)
		return false
	}
	var failed atomic.Bool
	eachModel(ctx, models, job.concurrency, func(_ int, model config.Model) {
		res, err := job.merger.Merge(ctx, model)
		if ctx.Err() != nil {
			failed.Store(true) // stopping: the merge was rolled back
			return
		}
		now := time.Now()
		ms := obs.ModelStatus{Name: model.Name, At: now}
		if err != nil {
			failed.Store(true)
			m.MergeFailures.WithLabelValues(model.Name).Inc()
			ms.Err = err.Error()
			status.SetModel(ms)
			slog.Warn("merge failed; retrying at the next merge.every", "model", model.Name, "every", every, "err", err)
			return
		}
		m.MergeRawRows.WithLabelValues(model.Name).Add(float64(res.Read))
		m.MergeChanged.WithLabelValues(model.Name).Add(float64(res.Changed))
		m.MergeRejected.WithLabelValues(model.Name).Add(float64(res.Rejected))
		m.MergeDuration.WithLabelValues(model.Name).Observe(res.Took.Seconds())
		m.MergeLastSuccess.WithLabelValues(model.Name).Set(float64(now.Unix()))
		ms.Read, ms.Changed, ms.Rejected, ms.Took, ms.LastSuccess = res.Read, res.Changed, res.Rejected, res.Took.Round(time.Millisecond), now
		status.SetModel(ms)
		if res.Read > 0 {
			slog.Info("merged", "model", res.Model, "read", res.Read, "changed", res.Changed, "rejected", res.Rejected, "took", res.Took.Round(time.Millisecond))
		}
	})
	if ctx.Err() != nil {
		return false
	}
	ok = !failed.Load()
	if job.after != nil {
		if err := job.after(ctx); err != nil {
			slog.Warn("after merging; retrying at the next merge.every", "every", every, "err", err)
			return false
		}
	}
	return ok
}

// printDedupSQL prints the dedup model of each OpenTelemetry table a run
// of cfg loads (SignalConfigs, as tracelake merge merges them: otel_logs
// and otel_metrics beside kafka.signal's in a load-mode run taking
// several signals), each under its title, in Databend's SQL, the one
// dialect where it is SQL text (on DuckDB and Iceberg tracelake runs it
// itself).
func printDedupSQL(w io.Writer, cfg *config.Config, dialect string) error {
	if dialect != merge.DialectDatabend {
		return usagef("--print-sql with an OpenTelemetry table prints its dedup model for --dialect databend only (on duckdb and iceberg tracelake merge runs it)")
	}
	for i, c := range cfg.SignalConfigs() {
		if i > 0 {
			fmt.Fprintln(w)
		}
		d := otelDedupOf(c)
		if _, err := fmt.Fprint(w, d.Databend().Script(fmt.Sprintf("model %s: %s, each span, log record or point once (tracelake merge runs this; the sink creates %s and %s)",
			d.Target(), d.Name, d.Target(), d.DatabendIncrement()))); err != nil {
			return err
		}
	}
	return nil
}

// printModelSQL prints each model's SQL in dialect.
func printModelSQL(w io.Writer, models []config.Model, dialect string) error {
	for i, m := range models {
		text, err := merge.SQL(m, dialect)
		if err != nil {
			return usageError{err}
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprint(w, text)
	}
	return nil
}
