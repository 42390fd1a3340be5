package cdc

import (
	"strings"
	"testing"
)

// Debezium sends a tombstone (the row's key, a null value) after each
// delete so that Kafka's log compaction can drop the key's records; once
// compacted, a topic can hold the tombstone without the delete before it
// (the cleaner keeps a key's latest record, and a consumer behind it reads
// only that). A tombstone of a table the decoder knows, named by its
// topic (server.database.table) or by its key's schema (server.database.
// table.Key), is a delete of its key: decoded to no change, the row its
// delete removed stayed in the model for good.
func TestDebeziumTombstoneDeletesItsKey(t *testing.T) {
	del := readFixture(t, "testdata/debezium_mysql_delete.txt")
	const keyed = "delete inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key=id pos= time=0\n"
	wrapped := `{"schema":{"type":"struct","name":"mysql-server-1.inventory.customers.Key","optional":false,"fields":[{"field":"id","type":"int32","optional":false}]},"payload":{"id":1004}}`
	for _, tc := range []struct {
		name, topic, key, want string
	}{
		{"schemas off, a topic per table", del.topic, `{"id":1004}`, keyed + "  id Int64 - = 1004\n"},
		{"the key's schema names the table, the topic renamed", "customers-compacted", wrapped, keyed + "  id Int32 int32 = 1004\n"},
		// Where the table cannot be known, nothing is deleted.
		{"one topic for many tables", "mysql-server-1.inventory.all_tables", `{"id":1004}`, ""},
		{"a topic that names no table", "customers-compacted", `{"id":1004}`, ""},
		{"a table the decoder has not seen", "mysql-server-1.inventory.orders", `{"id":1004}`, ""},
		{"no key", del.topic, "", ""},
		// Another producer's tombstone on the table's topic, keyed by
		// what is not the table's key: no delete of the table's.
		{"a key that is not the table's", del.topic, `{"customer_id":1004}`, ""},
		{"a key of more columns than the table's", del.topic, `{"id":1004,"__dbz__physicalTableIdentifier":"mysql-server-1.inventory.customers"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tombstoneAfter(t, tc.topic, tc.key, tc.want, del)
		})
	}
}

// A PostgreSQL topic names the schema, not the database: a tombstone of
// server.public.customers is of the table of that schema and name whose
// changes came from that server (here a second server captures
// public.customers of another database), and of none of another.
func TestDebeziumTombstoneOfPostgresTableOfItsServer(t *testing.T) {
	pg := readFixture(t, "testdata/debezium_postgres.txt")
	other := strings.NewReplacer(`"db":"postgres"`, `"db":"shop"`, `"name":"PostgreSQL_server"`, `"name":"shop_server"`).Replace(string(pg.value))
	const want = "delete postgres.public.customers log=cdc_postgres_customers_log model=cdc_postgres_customers key=id pos= time=0\n  id Int64 - = 1\n"
	for _, tc := range []struct {
		name, topic, want string
	}{
		{"its server", pg.topic, want},
		{"another server", "other_server.public.customers", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tombstoneAfter(t, tc.topic, `{"id":1}`, tc.want, pg, fixture{topic: "shop_server.public.customers", key: pg.key, value: []byte(other)})
		})
	}
}

// tombstoneAfter decodes the records seen, then a tombstone of key on
// topic, and checks its changes are want (render's).
func tombstoneAfter(t *testing.T, topic, key, want string, seen ...fixture) {
	t.Helper()
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range seen {
		if _, err := d.Decode(nil, f.topic, f.key, f.value); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := d.Decode(nil, topic, []byte(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := render(changes); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
