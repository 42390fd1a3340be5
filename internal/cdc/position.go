package cdc

import (
	"cmp"
	"slices"
)

// Position is where a change is in its source's log: a tuple of up to
// three unsigned integers, compared left to right. Positions of one source
// (one MySQL server, one PostgreSQL database, one Canal instance) order
// its changes; positions of different sources do not compare.
//
//   - Debezium MySQL: (binlog file number, source.pos); the file's base
//     name (mysql-bin) is dropped, it is the same for a server. A
//     snapshot's rows share the position of the binlog where it began.
//     source.row is left out: in a transaction the binlog compressed
//     (binlog_transaction_compression), every row has the payload's pos and
//     row starts again at 0 with each statement, so a later statement's
//     row 0 would sort before an earlier one's row 2; rows of one position
//     go by Kafka order (Debezium puts a key's changes in one partition).
//   - Debezium PostgreSQL: (max of the two, last commit LSN, source.lsn),
//     from source.sequence ("[\"lastCommitLsn\",\"lsn\"]"), led by the
//     max so that a transaction's later change sorts after its earlier one
//     stored as (source.lsn) before the upgrade (see postgresPosition): the connector
//     decodes transactions in commit order, and the first part, the end
//     of the transaction committed before the change's, orders them so;
//     the LSN, where the change was written, orders a transaction's
//     changes. By the LSN alone a change of a transaction that committed
//     after an incremental snapshot's chunk was read sorted before the
//     chunk's row (see readSource). Without a last commit (none seen
//     since the connector's offsets began: null) the first part is the
//     LSN; without sequence (a connector before it) the position is
//     (source.lsn), as every release before 2026-12-06 stored it.
//   - Canal: (es, ts, id): the flat message has no binlog position; es is
//     the binlog event's time in ms (whole seconds, as MySQL writes it),
//     ts Canal's clock when it made the message, which orders the changes
//     of one second across batches and across restarts of Canal, and id
//     Canal's batch id, which orders the batches of one millisecond of ts
//     (it starts at 1 again when Canal restarts: canalPosition). Within a
//     partition the Kafka offset (and a row's index in its message) is the
//     true order of what ties. A row's index is not a part: compared
//     across two messages of one batch it would put a later statement's
//     first row before an earlier one's third.
//   - Maxwell: (binlog file number, pos, xoffset) from position
//     "binlog.000001:1234", the transaction's last row (which has no
//     xoffset) after every other; the zero Position without position
//     (Maxwell's output_binlog_position off, and its bootstrap rows).
//
// The zero Position is unknown and sorts first.
type Position struct {
	parts [3]uint64
	n     uint8
}

// PositionDigits is the width of each part in a Position's text.
const PositionDigits = 20

func position(parts ...uint64) Position {
	var p Position
	p.n = uint8(copy(p.parts[:], parts))
	return p
}

// Parts returns the tuple.
func (p Position) Parts() []uint64 { return slices.Clone(p.parts[:p.n]) }

// IsZero says whether the source gave no position.
func (p Position) IsZero() bool { return p.n == 0 }

// Compare orders p and q as tuples: -1, 0 or +1.
func (p Position) Compare(q Position) int {
	for i := range min(p.n, q.n) {
		if c := cmp.Compare(p.parts[i], q.parts[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(p.n, q.n)
}

// AppendText appends p as text that sorts as the tuple does (byte order,
// as VARCHAR columns compare): each part as PositionDigits decimal digits,
// zero-padded, joined by '.'; "" for the zero Position.
func (p Position) AppendText(dst []byte) []byte {
	for i := range p.n {
		if i > 0 {
			dst = append(dst, '.')
		}
		var digits [PositionDigits]byte
		v := p.parts[i]
		for j := len(digits) - 1; j >= 0; j-- {
			digits[j] = byte('0' + v%10)
			v /= 10
		}
		dst = append(dst, digits[:]...)
	}
	return dst
}

func (p Position) String() string { return string(p.AppendText(nil)) }
