package databend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// wholeReject is the size above which a part whose every row Databend
// rejected is dead-lettered at once rather than row by row.
const wholeReject = 32

// line is where one staged line came from and what it carried.
type line struct {
	tp     sink.TopicPartition
	offset int64
	index  int32   // a declared table's row: its index in the record (kindex)
	key    *string // base64 of the key's bytes; nil without a key
	value  []byte  // the message value as staged (JSON)
	// headers and created are the record's headers and timestamp for its
	// dead letter (envelope.DLQRow); nil for a declared table's row, whose
	// record is not kept.
	headers json.RawMessage
	created *string
}

// rowAt is a declared table's row's coordinates: a span, and the GenAI
// operation derived from it, share them.
type rowAt struct {
	tp     sink.TopicPartition
	offset int64
	index  int32
}

// origin reads line i of a kept file: raw rows and dead-letter rows carry
// their coordinates; transform-mode objects have theirs beside them.
func origin(k *keptFile, i int, dlq bool) (line, error) {
	if k == nil || i >= len(k.Lines()) {
		return line{}, fmt.Errorf("staged line %d is not kept", i)
	}
	text := k.Lines()[i]
	switch {
	case dlq:
		var r envelope.DLQRow
		if err := json.Unmarshal(text, &r); err != nil {
			return line{}, fmt.Errorf("staged dead-letter line %d: %w", i, err)
		}
		return line{tp: sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}, offset: r.Offset, key: r.Key}, nil
	case k.coords != nil:
		c := k.coords[i]
		return line{tp: sink.TopicPartition{Topic: c.Topic, Partition: c.Partition}, offset: c.Offset, key: c.Key, value: k.sentLine(i),
			headers: c.Headers, created: c.CreateTime}, nil
	default:
		var r struct {
			Partition int32           `json:"kpartition"`
			Offset    int64           `json:"koffset"`
			Topic     *string         `json:"ktopic"` // a declared table's row
			Index     int32           `json:"kindex"`
			Value     json.RawMessage `json:"raw_data"`
			Metadata  struct {
				Topic       string          `json:"topic"`
				Key         *string         `json:"key"`
				KeyEncoding string          `json:"key_encoding"`
				CreateTime  string          `json:"create_time"`
				Headers     json.RawMessage `json:"headers"`
			} `json:"record_metadata"`
		}
		if err := json.Unmarshal(text, &r); err != nil {
			return line{}, fmt.Errorf("staged raw line %d: %w", i, err)
		}
		if r.Topic != nil {
			// A declared table's row (a span, a log record, a point):
			// its message is not kept, so a rejected row is
			// dead-lettered as the row itself.
			return line{tp: sink.TopicPartition{Topic: *r.Topic, Partition: r.Partition}, offset: r.Offset, index: r.Index, value: text}, nil
		}
		l := line{tp: sink.TopicPartition{Topic: r.Metadata.Topic, Partition: r.Partition}, offset: r.Offset, value: r.Value,
			headers: r.Metadata.Headers}
		if l.headers == nil {
			l.headers = json.RawMessage("[]") // envelope.AppendMetadata writes none for a record without
		}
		// A time out of the dead-letter table's range (record_metadata
		// writes any) is left null there.
		if at, err := time.Parse(time.RFC3339Nano, r.Metadata.CreateTime); err == nil {
			if ct, ok := envelope.DLQCreateTime(at); ok {
				l.created = &ct
			}
		}
		if key := r.Metadata.Key; key != nil && r.Metadata.KeyEncoding != "base64" {
			b64 := base64.StdEncoding.EncodeToString([]byte(*key))
			l.key = &b64
		} else {
			l.key = key
		}
		if string(l.value) == "null" {
			l.value = nil
		}
		return l, nil
	}
}

// lineTP is the partition of line i (for the ledger's counts).
func (s *Sink) lineTP(k *keptFile, i int, dlq bool) sink.TopicPartition {
	l, err := origin(k, i, dlq)
	if err != nil {
		s.log.Error("cannot read a staged line's partition", "err", err)
	}
	return l.tp
}

// fence leaves out of the pieces of a kept file every line at or below
// the ledger (fence): pieces that lose lines are staged again with the
// rest, pieces with none left are dropped. A file not yet in pieces is
// one piece of all its lines. A former owner of a partition may advance
// the ledger between two rounds of one load, so every round fences what
// earlier rounds staged.
func (s *Sink) fence(ctx context.Context, p *loadPlan, name string, fence map[sink.TopicPartition]int64, dlq bool) error {
	return s.keepLines(ctx, p, name, dlq, func(l line) bool { return pastFence(fence, l.tp, l.offset) })
}

// keepLines leaves out of the pieces of a kept file every line keep is
// false for: pieces that lose lines are staged again with the rest,
// pieces with none left are dropped. A file not yet in pieces is one
// piece of all its lines.
func (s *Sink) keepLines(ctx context.Context, p *loadPlan, name string, dlq bool, keep func(line) bool) error {
	k := s.keptLines(name)
	if k == nil {
		return fmt.Errorf("%w: staged file %s is not kept in this process", sink.ErrFatal, name)
	}
	pcs, split := p.pieces[name]
	if !split {
		all := make([]int, len(k.Lines()))
		for i := range all {
			all[i] = i
		}
		pcs = []*piece{{name: name, origin: name, idx: all}}
	}
	var out []*piece
	for _, pc := range pcs {
		var idx []int
		for _, i := range pc.idx {
			l, err := origin(k, i, dlq)
			if err != nil {
				return err
			}
			if keep(l) {
				idx = append(idx, i)
			}
		}
		switch {
		case len(idx) == len(pc.idx):
			out = append(out, pc)
		case len(idx) > 0:
			np, err := s.stagePiece(ctx, p, name, k, idx)
			if err != nil {
				return err
			}
			out = append(out, np)
		}
	}
	p.pieces[name] = out
	return nil
}

// pastFence reports whether offset of tp lies past the ledger.
func pastFence(fence map[sink.TopicPartition]int64, tp sink.TopicPartition, offset int64) bool {
	last, ok := fence[tp]
	return !ok || offset > last
}

// stagePiece uploads lines idx of the kept file origin under a name built
// from the origin's and the lines'.
func (s *Sink) stagePiece(ctx context.Context, p *loadPlan, originName string, k *keptFile, idx []int) (*piece, error) {
	lines := make([][]byte, len(idx))
	for j, i := range idx {
		lines[j] = k.Lines()[i]
	}
	stem := strings.TrimSuffix(strings.TrimSuffix(originName, ".zst"), ".ndjson")
	name, _, err := s.put(ctx, fmt.Sprintf("%s.l%d-%d-n%d", stem, idx[0], idx[len(idx)-1], len(idx)), sink.JoinLines(lines))
	if err != nil {
		return nil, err
	}
	p.staged = append(p.staged, name)
	return &piece{name: name, origin: originName, idx: idx}, nil
}

// leaveOut takes the rows COPY rejected out of the plan. For each file (or
// piece) with rejects, COPY names the first rejected row and counts the
// others: the rows before it loaded, so they become one piece; the row
// goes to the dead-letter table with Databend's error; the rest becomes
// one piece if it had no other reject, else two halves, each of which
// names its own first reject in the next round. Pieces halve each round,
// so rejects, even in a cluster, cost about log2(rows)+2 rounds: once a
// piece is all rejects it is split into single rows (up to wholeReject
// rows) or dead-lettered whole. A part of more than
// wholeReject rows whose every row was rejected goes to the dead-letter
// table whole, with the first row's error (the common case of a table
// that cannot take the data at all, where splitting further would cost a
// round per row).
func (s *Sink) leaveOut(ctx context.Context, p *loadPlan, rejected map[string]copyOutcome) error {
	before := len(p.rejects)
	for name, o := range rejected {
		pc := p.find(name)
		derived := p.isDerived(pc.origin)
		k := s.keptLines(pc.origin)
		if k == nil {
			return fmt.Errorf("%w: staged file %s is not kept in this process", sink.ErrFatal, pc.origin)
		}
		if pc.idx == nil { // the whole staged file
			pc.idx = make([]int, len(k.Lines()))
			for i := range pc.idx {
				pc.idx[i] = i
			}
		}
		m := int64(len(pc.idx))
		var next []*piece
		if o.errors >= m && m > wholeReject {
			reason := o.firstError
			if m > 1 { // always: m > wholeReject
				reason = fmt.Sprintf("%s (Databend rejected all %d rows of this part of the batch; this is the first row's error)", o.firstError, m)
			}
			for _, i := range pc.idx {
				if err := p.reject(k, i, reason, derived); err != nil {
					return err
				}
			}
		} else {
			bad := o.firstLine - 1
			if bad < 0 || bad >= m {
				return fmt.Errorf("%w: COPY reported a rejected row at line %d of %s, which has %d lines", sink.ErrFatal, o.firstLine, name, m)
			}
			if err := p.reject(k, pc.idx[bad], o.firstError, derived); err != nil {
				return err
			}
			parts := [][]int{pc.idx[:bad]}
			rest := pc.idx[bad+1:]
			switch {
			case o.errors == 1 || len(rest) < 2:
				parts = append(parts, rest)
			case o.errors == m:
				// A small part, all rejected: one row per piece, so the
				// next round names each row's own error.
				for i := range rest {
					parts = append(parts, rest[i:i+1])
				}
			default:
				parts = append(parts, rest[:len(rest)/2], rest[len(rest)/2:])
			}
			for _, idx := range parts {
				if len(idx) == 0 {
					continue
				}
				np, err := s.stagePiece(ctx, p, pc.origin, k, idx)
				if err != nil {
					return err
				}
				next = append(next, np)
			}
		}
		p.replace(pc, next)
		s.log.Warn("Databend rejected rows; loading the rest and sending these to the dead-letter table",
			"file", name, "rejected", o.errors, "first_error", o.firstError)
	}
	if err := s.leaveOutDerivedOf(ctx, p, p.rejects[before:]); err != nil {
		return err
	}
	return s.stageRejects(ctx, p)
}

// leaveOutDerivedOf takes out of the plan's derived files the rows derived
// from main rows just rejected (a GenAI operation of a span Databend
// refused): its span is in the dead-letter table, and an operation without
// its span is what verify reports (a rebuild derives it again once the
// span is loaded).
func (s *Sink) leaveOutDerivedOf(ctx context.Context, p *loadPlan, rejects []rejectRow) error {
	gone := map[rowAt]bool{}
	for _, r := range rejects {
		if !r.derived && r.at != nil {
			gone[*r.at] = true
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, f := range p.files {
		if f.DerivedPath == "" {
			continue
		}
		err := s.keepLines(ctx, p, f.DerivedPath, false, func(l line) bool {
			return !gone[rowAt{tp: l.tp, offset: l.offset, index: l.index}]
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// stageRejects stages the plan's rejected rows as one dead-letter file
// (none when there are none).
func (s *Sink) stageRejects(ctx context.Context, p *loadPlan) error {
	p.rejectsFile = ""
	if len(p.rejects) == 0 {
		return nil
	}
	rows := make([][]byte, len(p.rejects))
	for i, r := range p.rejects {
		rows[i] = r.row
	}
	name, _, err := s.put(ctx, fmt.Sprintf("%s.rejects-n%d.dlq", p.files[0].Name, len(rows)), sink.JoinLines(rows))
	if err != nil {
		return err
	}
	p.rejectsFile = name
	p.staged = append(p.staged, name)
	return nil
}

// fenceRejects leaves out the rejected rows at or below the ledger (a
// former owner loaded, and dead-lettered, them meanwhile), staging the
// rest again.
func (s *Sink) fenceRejects(ctx context.Context, p *loadPlan, fence map[sink.TopicPartition]int64) error {
	kept := p.rejects[:0:0]
	for _, r := range p.rejects {
		if pastFence(fence, r.tp, r.offset) {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(p.rejects) {
		return nil
	}
	p.rejects = kept
	return s.stageRejects(ctx, p)
}

// find returns the piece staged as name, or a piece standing for the whole
// staged file name.
func (p *loadPlan) find(name string) *piece {
	for _, ps := range p.pieces {
		for _, pc := range ps {
			if pc.name == name {
				return pc
			}
		}
	}
	return &piece{name: name, origin: name}
}

// replace puts next where pc was in its origin's pieces.
func (p *loadPlan) replace(pc *piece, next []*piece) {
	var out []*piece
	for _, x := range p.pieces[pc.origin] {
		if x != pc {
			out = append(out, x)
		}
	}
	p.pieces[pc.origin] = append(out, next...)
}

// reject records line i of k (a derived table's file or not) as rejected
// by Databend with reason.
func (p *loadPlan) reject(k *keptFile, i int, reason string, derived bool) error {
	l, err := origin(k, i, false)
	if err != nil {
		return err
	}
	var value *string
	if l.value != nil {
		v := base64.StdEncoding.EncodeToString(l.value)
		value = &v
	}
	row, err := json.Marshal(envelope.DLQRow{Topic: l.tp.Topic, Partition: l.tp.Partition, Offset: l.offset,
		Key: l.key, Value: value, Error: reason, Stage: envelope.StageLoad, Headers: l.headers, CreateTime: l.created})
	if err != nil {
		return err
	}
	rj := rejectRow{tp: l.tp, offset: l.offset, row: row, reason: reason, derived: derived}
	if k.coords == nil && !derived { // a declared table's row (raw rows derive nothing)
		rj.at = &rowAt{tp: l.tp, offset: l.offset, index: l.index}
	}
	p.rejects = append(p.rejects, rj)
	return nil
}

// isDerived reports whether the staged file name holds a derived table's
// rows.
func (p *loadPlan) isDerived(name string) bool {
	for _, f := range p.files {
		if f.DerivedPath != "" && f.DerivedPath == name {
			return true
		}
	}
	return false
}

// rejected is what the load dead-lettered of the main table's rows.
func (p *loadPlan) rejected() []sink.Rejected {
	var out []sink.Rejected
	for _, r := range p.rejects {
		if !r.derived {
			out = append(out, sink.Rejected{TopicPartition: r.tp, Offset: r.offset, Reason: r.reason})
		}
	}
	return out
}
