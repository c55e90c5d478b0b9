package kit

import (
	"encoding/hex"
	"strconv"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// Values as the statements take them. Each is one value, passed through
// a ?name like any other: an array or JSON text is a string the statement
// casts or parses, never SQL text.

// KeyArg is a message key as stored: bytes, or NULL for none.
func KeyArg(key string) any {
	if key == "" {
		return nil
	}
	return []byte(key)
}

// HeadersArg stores headers as JSON text, or NULL.
func HeadersArg(h []byte) any {
	if h == nil {
		return nil
	}
	return string(h)
}

// LastErrorArg binds a failure's error text, made storable (see
// dialect.ErrorText), or NULL for none.
func LastErrorArg(s string) any {
	if s == "" {
		return nil
	}
	return dialect.ErrorText(s)
}

// IDs is a list of ids for an IN (?ids) of an inlined statement.
func IDs(ids []int64) any { return bun.List(ids) }

// PGArray renders ids as one PostgreSQL array value, {1,2}, for a
// CAST(?ids AS bigint[]): one bound value whatever their number.
func PGArray(ids []int64) string { return intArray(ids, '{', '}') }

// JSONArray renders ids as one JSON array value, [1,2], for JSON_TABLE or
// json_each.
func JSONArray(ids []int64) string { return intArray(ids, '[', ']') }

func intArray(ids []int64, open, close byte) string {
	b := make([]byte, 0, 8*len(ids)+2)
	b = append(b, open)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, close))
}

// PGByteaArray renders byte strings as one PostgreSQL array value,
// {"\\x0a0b",NULL,…}, for a CAST(?x AS bytea[]): each in bytea's hex
// input form, quoted, its backslash escaped; a nil one is NULL.
func PGByteaArray(vals [][]byte) string {
	return pgQuotedArray(vals, 5, 2, func(b, v []byte) []byte {
		return hex.AppendEncode(append(b, `\\x`...), v)
	})
}

// PGTextArray renders strings as one PostgreSQL array value,
// {"a","b\"c",NULL}, for a CAST(?x AS text[]): each quoted, its
// backslashes and double quotes escaped, so that no content (a comma, a
// brace, a quote, the word NULL) is read as the array's syntax; a nil one
// is NULL.
func PGTextArray(vals [][]byte) string {
	return pgQuotedArray(vals, 2, 1, func(b, v []byte) []byte {
		for _, c := range v {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		return b
	})
}

// pgQuotedArray renders vals as one array value, each non-nil one in
// double quotes as elem appends it, a nil one as NULL. Each takes about
// extra + per*len(v) bytes besides its separator.
func pgQuotedArray(vals [][]byte, extra, per int, elem func(b, v []byte) []byte) string {
	n := 2
	for _, v := range vals {
		n += per*len(v) + extra + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		if v == nil {
			b = append(b, "NULL"...)
			continue
		}
		b = append(b, '"')
		b = elem(b, v)
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// HexJSONArray renders byte strings as one JSON array of their hex.
func HexJSONArray(keys [][]byte) string {
	b := make([]byte, 0, 2*len(keys)*(2+32))
	b = append(b, '[')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, k)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// RangesJSON renders seq ranges (a prune's, a batch read's) as one JSON
// value, [[pid,from,to],…].
func RangesJSON(rs []dialect.VacuumRange) string {
	b := make([]byte, 0, 24*len(rs)+2)
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, r.PartitionID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.FromSeq, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.ToSeq, 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// Bool is a flag for a statement's optional condition: 1 or 0, which
// every database compares without a boolean type.
func Bool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func toID(b []byte) dialect.MessageID {
	var id dialect.MessageID
	copy(id[:], b)
	return id
}
