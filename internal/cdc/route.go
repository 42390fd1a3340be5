package cdc

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// router routes source tables to their tables, once per source table, and
// detects two logical tables routed to one name. Safe for concurrent use.
type router struct {
	log, model template
	shards     []shard

	mu sync.RWMutex
	// tables by source key (database, schema, table joined by 0 bytes).
	tables map[string]*Table
	// owners maps each routed name to the logical table it belongs to.
	owners map[string]string
	// modelClaims are the names in owners claimed as the model of a
	// table of the registry, not as a changelog table that exists.
	modelClaims map[string]bool
	// claimed are the source tables of the changelog tables claimed, by
	// source key: tables whose changes an earlier process saw.
	claimed map[string]Registered
	// kept are the changelog tables claimed, by logical key, each with
	// the model the registry names for it ("" until its first merge):
	// the tables a logical table's changes go on into (see add).
	kept map[string][]keptTable
}

// keptTable is a changelog table of the registry and its model's name,
// "" when its model is not made yet (then named by the templates).
type keptTable struct{ log, model string }

// route returns the source table's Table, creating it on first sight.
func (r *router) route(db, schemaName, table []byte) (*Table, error) {
	var buf [256]byte
	key := append(append(append(append(append(buf[:0], db...), 0), schemaName...), 0), table...)
	r.mu.RLock()
	t := r.tables[string(key)]
	r.mu.RUnlock()
	if t != nil {
		return t, nil
	}
	return r.add(string(key), string(db), string(schemaName), string(table))
}

// logical returns the names of the logical table a source table belongs
// to (its shard rule's) and its key in owners.
func (r *router) logical(db, schemaName, table string) (names [fieldTable + 1]string, key string) {
	names = [fieldTable + 1]string{fieldDatabase: db, fieldSchema: schemaName, fieldTable: table}
	sharded := ""
	for i := range r.shards {
		if s := &r.shards[i]; s.matches(db, table) {
			if s.asDB != "" {
				names[fieldDatabase] = s.asDB
			}
			if s.asTable != "" {
				names[fieldTable] = s.asTable
			}
			// The shards of a logical table are one table, and a
			// source table of that name that no rule maps is another
			// (add it to the rule's pattern to make it one of them).
			sharded = shardsPrefix
			break
		}
	}
	return names, sharded + names[fieldDatabase] + "." + names[fieldSchema] + "." + names[fieldTable]
}

// shardsPrefix begins the logical key of a shard rule's logical table.
const shardsPrefix = "shards of "

// claim makes the logical table of the source table own the routed
// name, and the name of its model, unless a table owns them already. The
// model's name too: a source table whose changelog name is another's
// model (audit's cdc_db_audit_log, audit_log's model) is refused after a
// restart as it is in one process, before its table is created over the
// model or the model merged into its changelog table.
func (r *router) claim(name string, src Registered) {
	db, schemaName, table := src.Database, src.Schema, src.Table
	names, logical := r.logical(db, schemaName, table)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claimed == nil {
		r.claimed, r.kept = map[string]Registered{}, map[string][]keptTable{}
	}
	r.claimed[db+"\x00"+schemaName+"\x00"+table] = src
	r.kept[logical] = append(r.kept[logical], keptTable{name, src.Model})
	// A changelog table that exists owns its name even when another
	// table's model name was claimed for it first (the registry is read
	// in no order): its rows are there.
	if _, ok := r.owners[name]; !ok || r.modelClaims[name] {
		r.owners[name] = logical
		delete(r.modelClaims, name)
	}
	tmpl := r.model.expand(names)
	for _, n := range []string{tmpl, tmpl + TombstonesSuffix} {
		if r.owners[n] == "" {
			r.owners[n] = logical
			r.modelClaims[n] = true
		}
	}
}

// tablesOf returns the tables of database db known to r, routed or
// claimed, in the order of their changelog tables' names.
func (r *router) tablesOf(db string) ([]*Table, error) {
	r.mu.RLock()
	var out []*Table
	var claimed []Registered
	for _, t := range r.tables {
		if t.Database == db {
			out = append(out, t)
		}
	}
	for key, src := range r.claimed {
		if _, routed := r.tables[key]; !routed && src.Database == db {
			claimed = append(claimed, src)
		}
	}
	r.mu.RUnlock()
	for _, src := range claimed {
		t, err := r.route([]byte(src.Database), []byte(src.Schema), []byte(src.Table))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Table) int {
		return cmp.Or(strings.Compare(a.Log, b.Log), strings.Compare(a.source(), b.source()))
	})
	return slices.CompactFunc(out, func(a, b *Table) bool { return a == b }), nil
}

// named returns the known table (routed or claimed) that a Debezium
// topic name, server.database.table (MySQL) or server.schema.table
// (PostgreSQL), names, of that server; nil when none or more than one
// does (a table whose changes came from other servers only is not of it).
func (r *router) named(name string) *Table {
	parts := strings.Split(name, ".")
	if len(parts) < 3 {
		return nil
	}
	server, space, table := []byte(strings.Join(parts[:len(parts)-2], ".")), parts[len(parts)-2], parts[len(parts)-1]
	names := func(src Registered) bool {
		return src.Table == table && (src.Database == space && src.Schema == "" || src.Schema == space)
	}
	var claimed []Registered
	r.mu.RLock()
	for key, src := range r.claimed {
		if _, routed := r.tables[key]; !routed && names(src) {
			claimed = append(claimed, src)
		}
	}
	r.mu.RUnlock()
	for _, src := range claimed {
		// Routed as its first change would be, so that its servers are
		// known.
		if _, err := r.route([]byte(src.Database), []byte(src.Schema), []byte(src.Table)); err != nil {
			return nil
		}
	}
	var found *Table
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, t := range r.tables {
		if !names(Registered{Database: t.Database, Schema: t.Schema, Table: t.Name}) || t.fromOtherServers(server) {
			continue
		}
		if found != nil {
			return nil
		}
		found = t
	}
	return found
}

// TombstonesSuffix ends the name of a changelog model's tombstones table
// (after the model's): routed like the model's own name, so that no
// source table's changelog table or model takes it.
const TombstonesSuffix = "_tombstones"

// claimedError refuses a source table whose routed names another table
// holds.
type claimedError struct{ reason string }

func (e *claimedError) Error() string { return e.reason }

// routeError is the Error of a record whose source table cannot be
// routed.
func routeError(err error) *Error {
	var claimed *claimedError
	return &Error{Reason: err.Error(), Claimed: errors.As(err, &claimed)}
}

func (r *router) add(key, db, schemaName, table string) (*Table, error) {
	names, logical := r.logical(db, schemaName, table)
	t := &Table{Database: db, Schema: schemaName, Name: table, Log: r.log.expand(names), Model: r.model.expand(names),
		shard: strings.HasPrefix(logical, shardsPrefix)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if had := r.tables[key]; had != nil {
		return had, nil
	}
	if log, ok := r.keptLog(logical, t.Model); ok {
		t.Log = log
	}
	for _, name := range []string{t.Log, t.Model, t.Model + TombstonesSuffix} {
		if owner, ok := r.owners[name]; ok && owner != logical {
			// Writing both into one table would mix two tables' rows
			// under one key; the second one seen is refused, loudly.
			return nil, &claimedError{fmt.Sprintf("source table %s.%s is routed to %s, which already holds %s: map one of them with a shard rule or change the template",
				strconv.Quote(db), strconv.Quote(table), name, owner)}
		}
	}
	if t.Log == t.Model {
		return nil, fmt.Errorf("source table %s.%s: the changelog and model templates both make %s", strconv.Quote(db), strconv.Quote(table), t.Log)
	}
	r.owners[t.Log], r.owners[t.Model], r.owners[t.Model+TombstonesSuffix] = logical, logical, logical
	if c := r.claimed[key]; c.Server != "" {
		// Its changes an earlier process read came from those servers
		// (Table.fromOtherServers).
		list := strings.Split(c.Server, ",")
		t.servers.Store(&serverSet{list, strings.Join(list, ",")})
	}
	r.tables[key] = t
	return t, nil
}

// keptLog is the changelog table of the registry that the logical
// table's changes go on into: the one whose model is model (named so by
// the registry, or by the templates before its first merge). A model
// merges one changelog table: its watermarks, its truncation and its done
// marks are that table's. A new cdc.log_table template alone would
// otherwise start a second changelog table of the same model, and the
// merges of the two, by the one set of watermarks, skip the changes of
// whichever merges second below the offsets the other reached. A new
// cdc.model_table template names a new model, whose changes go into a
// new changelog table (a source switched to another server's log, which
// starts both afresh). Called with mu held.
func (r *router) keptLog(logical, model string) (string, bool) {
	var log string
	named := false
	for _, k := range r.kept[logical] {
		switch {
		case k.model != "" && k.model != model:
		case k.model == model && (!named || k.log < log):
			log, named = k.log, true // the model's own, before one not made
		case !named && (log == "" || k.log < log):
			log = k.log
		}
	}
	return log, log != ""
}

// sanitize makes a name a part of an identifier: ASCII letters lowercased,
// digits and _ kept, every other character (dots, quotes, spaces,
// non-ASCII) replaced by _. When one was replaced, _ and 8 hex digits of
// the name's FNV-1a hash follow, so names that differ only there (a.b, a-b
// and a_b; 订单 and 用户) stay apart. Names that differ only in case
// (Orders, orders) do not: the router refuses the second.
func sanitize(name string) string {
	out := make([]byte, 0, len(name)+9)
	replaced := false
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			out = append(out, byte(r)+'a'-'A')
		case isIdentByte(r):
			out = append(out, byte(r))
		default:
			out = append(out, '_')
			replaced = true
		}
	}
	if replaced {
		h := fnv.New32a()
		h.Write([]byte(name))
		out = fmt.Appendf(append(out, '_'), "%08x", h.Sum32())
	}
	return string(out)
}

// maxNames bounds the names a table interns: a source that invents column
// names (schemaless JSON with data as keys) costs a string per use beyond
// it, not memory without end.
const maxNames = 4096

// names interns a table's column names (and Canal's type names) so that a
// change does not allocate a string per column. Lookups take no lock: the
// list is replaced, never changed.
type names struct {
	mu   sync.Mutex
	list atomic.Pointer[[]string]
}

// intern returns b as a string; *hint is where to look first (columns come
// in the same order in every row) and is left after the match.
func (n *names) intern(b []byte, hint *int) string {
	if p := n.list.Load(); p != nil {
		list := *p
		if i := *hint; i < len(list) && list[i] == string(b) {
			*hint = i + 1
			return list[i]
		}
		for i, s := range list {
			if s == string(b) {
				*hint = i + 1
				return s
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var list []string
	if p := n.list.Load(); p != nil {
		list = *p
	}
	s := string(b)
	if len(list) < maxNames {
		grown := append(list[:len(list):len(list)], s)
		n.list.Store(&grown)
		*hint = len(grown)
	}
	return s
}
