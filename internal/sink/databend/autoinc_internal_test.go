package databend

import "testing"

// autoIncremented reads SHOW CREATE TABLE as databend-query writes it
// (interpreter_table_show_create.rs show_create_table_query): the
// keyword counts in a column's own definition only, outside its name,
// a quoted name and quoted text (a COMMENT, a string DEFAULT).
func TestAutoIncrementedReadsEachColumn(t *testing.T) {
	create := "CREATE TABLE t (\n" +
		"  id BIGINT NOT NULL AUTOINCREMENT (0, 1) ORDER,\n" +
		"  `Odd, name` INT NOT NULL IDENTITY_IS_NOT_HERE COMMENT 'see AUTOINCREMENT, (docs)',\n" +
		"  autoincrement_n INT NOT NULL,\n" +
		"  s VARCHAR NOT NULL DEFAULT 'AUTOINCREMENT',\n" +
		"  c2 INT NULL AUTOINCREMENT (2, 3) NOORDER\n" +
		") ENGINE=FUSE COMMENT = 'AUTOINCREMENT'"
	cols := []userColumn{{name: "id"}, {name: "odd, name"}, {name: "autoincrement_n"}, {name: "s"}, {name: "c2"}}
	for i := range cols {
		cols[i].required = true
	}
	autoIncremented(cols, &result{Rows: [][]*string{{ptr("t"), ptr(create)}}})
	want := map[string]bool{"id": false, "odd, name": true, "autoincrement_n": true, "s": true, "c2": false}
	for _, c := range cols {
		if c.required != want[c.name] {
			t.Errorf("column %q: required %v, want %v", c.name, c.required, want[c.name])
		}
	}
}

func ptr(s string) *string { return &s }
