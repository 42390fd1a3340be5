package cdc

import (
	"bytes"
	"strings"
)

// ddlTokens splits the start of a MySQL statement into tokens: words
// (identifiers and keywords, as written), identifiers quoted in
// backquotes (their content, a doubled backquote read as one, marked
// quoted) and single
// punctuation characters; spaces and comments (/* */, -- and #) are
// skipped. The text of an executable comment (/*!NNNNN … */, MariaDB's
// /*M!NNNNNN … */) is the statement's, as the server runs it: MySQL
// writes a session's implicit drop of its temporary tables as
// DROP /*!40005 TEMPORARY */ TABLE. It stops at a string literal, or
// after max tokens.
func ddlTokens(sql []byte, max int) []ddlToken {
	var out []ddlToken
	executable := false // within an executable comment
	for i := 0; len(out) < max && i < len(sql); {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case executable && c == '*' && i+1 < len(sql) && sql[i+1] == '/':
			executable = false
			i += 2
		case !executable && c == '/' && (bytes.HasPrefix(sql[i:], []byte("/*!")) || bytes.HasPrefix(sql[i:], []byte("/*M!"))):
			executable = true
			i += bytes.IndexByte(sql[i:], '!') + 1
			for i < len(sql) && sql[i] >= '0' && sql[i] <= '9' {
				i++ // the version
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			end := bytes.Index(sql[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '#' || c == '-' && i+2 < len(sql) && sql[i+1] == '-' && (sql[i+2] == ' ' || sql[i+2] == '\t'):
			end := bytes.IndexByte(sql[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '`':
			var name []byte
			j := i + 1
			for ; j < len(sql); j++ {
				if sql[j] == '`' {
					if j+1 < len(sql) && sql[j+1] == '`' {
						name = append(name, '`')
						j++
						continue
					}
					break
				}
				name = append(name, sql[j])
			}
			if j >= len(sql) {
				return out
			}
			out = append(out, ddlToken{text: string(name), quoted: true})
			i = j + 1
		case identByte(c):
			j := i
			for j < len(sql) && identByte(sql[j]) {
				j++
			}
			out = append(out, ddlToken{text: string(sql[i:j])})
			i = j
		case c == '\'' || c == '"':
			return out
		default:
			out = append(out, ddlToken{text: string(c)})
			i++
		}
	}
	return out
}

// ddlToken is a token of ddlTokens.
type ddlToken struct {
	text   string
	quoted bool
}

// is says whether t is the keyword kw (unquoted, in any case).
func (t ddlToken) is(kw string) bool { return !t.quoted && strings.EqualFold(t.text, kw) }

// identByte says whether c may be part of an unquoted MySQL identifier
// (letters, digits, _ and $, and the bytes of non-ASCII characters).
func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// tableName reads a table name at toks[i]: name, or database.name. db is
// "" when unqualified; n is the tokens read, 0 when none is a name.
func tableName(toks []ddlToken, i int) (db, name string, n int) {
	ident := func(j int) bool {
		return j < len(toks) && (toks[j].quoted || len(toks[j].text) > 0 && identByte(toks[j].text[0]))
	}
	if !ident(i) {
		return "", "", 0
	}
	if i+2 < len(toks) && toks[i+1].text == "." && !toks[i+1].quoted && ident(i+2) {
		return toks[i].text, toks[i+2].text, 3
	}
	return "", toks[i].text, 1
}

// droppedDatabase reads DROP {DATABASE | SCHEMA} [IF EXISTS] name: the
// database a statement drops, false for any other statement.
func droppedDatabase(sql []byte) (string, bool) {
	toks := ddlTokens(sql, 6)
	if len(toks) < 3 || !toks[0].is("DROP") || !toks[1].is("DATABASE") && !toks[1].is("SCHEMA") {
		return "", false
	}
	i := 2
	if len(toks) > 4 && toks[2].is("IF") && toks[3].is("EXISTS") {
		i = 4
	}
	if db, name, n := tableName(toks, i); n == 1 && db == "" {
		return name, true
	}
	return "", true
}

// droppedTemporary says whether sql is DROP TEMPORARY TABLE: a session's
// table, not the source's.
func droppedTemporary(sql []byte) bool {
	toks := ddlTokens(sql, 2)
	return len(toks) == 2 && toks[0].is("DROP") && toks[1].is("TEMPORARY")
}

// droppedTables reads DROP [TEMPORARY] {TABLE | TABLES} [IF EXISTS] t
// [, t]… (MySQL's grammar, sql_yacc.yy's table_or_tables): the
// tables a statement drops, each database "" where it names none, and
// whether they are temporary; ok false for any other statement, or one
// whose names cannot all be read.
func droppedTables(sql []byte) (tables [][2]string, temporary, ok bool) {
	toks := ddlTokens(sql, 1<<14)
	i := 0
	if i < len(toks) && toks[i].is("DROP") {
		i++
	} else {
		return nil, false, false
	}
	if i < len(toks) && toks[i].is("TEMPORARY") {
		temporary = true
		i++
	}
	if i < len(toks) && (toks[i].is("TABLE") || toks[i].is("TABLES")) {
		i++
	} else {
		return nil, false, false
	}
	if i+1 < len(toks) && toks[i].is("IF") && toks[i+1].is("EXISTS") {
		i += 2
	}
	for {
		db, name, n := tableName(toks, i)
		if n == 0 {
			return nil, false, false
		}
		tables = append(tables, [2]string{db, name})
		if i += n; i == len(toks) || toks[i].is("RESTRICT") || toks[i].is("CASCADE") || toks[i].text == ";" {
			return tables, temporary, true
		}
		if toks[i].text != "," || toks[i].quoted {
			return nil, false, false
		}
		i++
	}
}

// truncatedTable reads TRUNCATE [TABLE] name (MySQL's grammar,
// sql_yacc.yy's truncate_stmt: one table; MariaDB's may end in WAIT n or
// NOWAIT): the table a statement truncates, its database "" where it
// names none; ok false for any other statement, or one whose name cannot
// be read.
func truncatedTable(sql []byte) (db, name string, ok bool) {
	toks := ddlTokens(sql, 7)
	if len(toks) == 0 || !toks[0].is("TRUNCATE") {
		return "", "", false
	}
	i := 1
	if i < len(toks) && toks[i].is("TABLE") {
		i++
	}
	db, name, n := tableName(toks, i)
	if n == 0 {
		return "", "", false
	}
	if i += n; i < len(toks) && toks[i].text != ";" && !toks[i].is("WAIT") && !toks[i].is("NOWAIT") {
		return "", "", false
	}
	return db, name, true
}

// replacedTable reads MariaDB's CREATE OR REPLACE TABLE name …, which
// drops the table if it exists before creating it again: the table it
// empties, its database "" where it names none; ok false for any other
// statement, CREATE OR REPLACE TEMPORARY TABLE among them (a session's
// table, which may shadow a source table whose rows stay).
func replacedTable(sql []byte) (db, name string, ok bool) {
	toks := ddlTokens(sql, 7)
	if len(toks) < 5 || !toks[0].is("CREATE") || !toks[1].is("OR") || !toks[2].is("REPLACE") || !toks[3].is("TABLE") {
		return "", "", false
	}
	db, name, n := tableName(toks, 4)
	return db, name, n > 0
}
