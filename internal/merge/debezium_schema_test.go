package merge

import "fmt"

// fld is a field of a Kafka Connect struct schema: name, type, logical
// type (schema name) and parameters (JSON), the last two "" for none.
type fld struct{ name, typ, logical, params string }

func (f fld) json() string {
	s := `{"field":"` + f.name + `","type":"` + f.typ + `","optional":true`
	if f.logical != "" {
		s += `,"name":"` + f.logical + `"`
	}
	if f.params != "" {
		s += `,"parameters":` + f.params
	}
	return s + `}`
}

func structOf(name string, fs []fld) string {
	s := `{"type":"struct","optional":true,"name":"` + name + `","fields":[`
	for i, f := range fs {
		if i > 0 {
			s += ","
		}
		s += f.json()
	}
	return s + `]}`
}

// dbzEvent is a Debezium MySQL change event of db.<table> with schemas on
// (the JsonConverter's wrapper; value fields fs, before and after the row
// images' JSON, "null" for none), at binlog file and pos, and its key with
// its schema of keyFs ("" without keyFs).
func dbzEvent(table, op string, file string, pos int, fs []fld, before, after string, keyFs []fld, key string) (k, v string) {
	st := structOf("s.db."+table+".Value", fs)
	bf := st[:len(st)-1] + `,"field":"before"}`
	af := st[:len(st)-1] + `,"field":"after"}`
	v = `{"schema":{"type":"struct","name":"s.db.` + table + `.Envelope","fields":[` + bf + `,` + af + `,{"type":"struct","field":"source","fields":[]},{"type":"string","field":"op"}]},"payload":{"before":` + before + `,"after":` + after +
		`,"source":{"connector":"mysql","name":"s","db":"db","table":"` + table + `","file":"` + file + `","pos":` + fmt.Sprint(pos) + `,"row":0,"ts_ms":1700000000000,"snapshot":"false"},"op":"` + op + `","ts_ms":1700000000001}}`
	if keyFs != nil {
		k = `{"schema":` + structOf("s.db."+table+".Key", keyFs) + `,"payload":` + key + `}`
	}
	return
}

// rawKey queues value with its Kafka key ("" for none) on partition p.
func (l *changeLoader) rawKey(p int32, topic, key, value string) {
	l.raw(p, topic, value)
	r := l.pending[p][len(l.pending[p])-1]
	if key != "" {
		r.Key = []byte(key)
	}
}
