package databend

import (
	"context"
	"encoding/json"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// PruneEvery is how many loads a process commits between two prunes of
// the fence table.
const PruneEvery = pruneEvery

// OldReleaseClaim begins, in a transaction of a session of its own, the
// claim of tp as a release before numbered claims made it: it counts the
// partition's rows in the fence table, uploads the marker named by the
// count (a row without a claim number) and copies it. It returns the
// count and the COMMIT of the transaction, which the caller runs (or
// not: the transaction is then left open, as a killed process's).
func (s *Sink) OldReleaseClaim(ctx context.Context, tp sink.TopicPartition) (int64, func() error, error) {
	ss, end, err := s.begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	fail := func(err error) (int64, func() error, error) {
		end(false)
		return 0, nil, err
	}
	res, err := ss.query(ctx, `SELECT topic, "partition", count(*) FROM `+s.tables.fence+
		` WHERE topic IN (`+sqltext.DatabendString(tp.Topic)+`) GROUP BY topic, "partition"`)
	if err != nil {
		return fail(err)
	}
	counts, err := partitionCounts(res, "the claims")
	if err != nil {
		return fail(err)
	}
	n := counts[tp]
	name := markerName(tp, n)
	row, err := json.Marshal(map[string]any{"topic": tp.Topic, "partition": tp.Partition, "after_offset": -1})
	if err != nil {
		return fail(err)
	}
	if err := s.zstd.Compress(append(row, '\n'), func(b []byte) error { return s.upload(ctx, name, b) }); err != nil {
		return fail(err)
	}
	if _, _, err := s.copyOnce(ctx, ss, s.tables.fence, []target{{name, 1}}, false); err != nil {
		return fail(err)
	}
	return n, func() error {
		_, err := ss.query(ctx, "COMMIT")
		end(err == nil)
		return err
	}, nil
}
