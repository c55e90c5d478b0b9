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

// PGTextArray renders strings as one PostgreSQL array value,
// {"a","b\"c",NULL}, for a CAST(?x AS text[]): each quoted, its
// backslashes and double quotes escaped, so that no content (a comma, a
// brace, a quote, the word NULL) is read as the array's syntax; a nil one
// is NULL.
func PGTextArray(vals [][]byte) string {
	n := 2
	for _, v := range vals {
		n += len(v) + 3
	}
	return pgArrayOf(vals, n, func(b, v []byte) []byte {
		b = append(b, '"')
		for _, c := range v {
			if c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, c)
		}
		return append(b, '"')
	})
}

// pgArrayOf renders vals as one PostgreSQL array value of about size
// bytes: a nil value as NULL, any other as elem appends it.
func pgArrayOf(vals [][]byte, size int, elem func(b, v []byte) []byte) string {
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		if v == nil {
			b = append(b, "NULL"...)
			continue
		}
		b = elem(b, v)
	}
	return string(append(b, '}'))
}

// PGPacked is byte strings as one PostgreSQL statement binds them
// cheapest: Blob holds them end to end, one bytea value, and Spans (a
// bigint[] value) each one's place in it, offset<<32 | length, or NULL for
// a nil one; PGUnpack reads one back. A bytea[] of the same values costs
// the server an array_in over every value's quoted hex text when the
// statement is bound, and pgdriver a copy of that text rune by rune; one
// bytea is decoded in one pass and sliced per row (docs/ARCHITECTURE.md,
// "The SQL layer").
type PGPacked struct {
	Blob  []byte
	Spans string
}

// PGPack packs vals for PGUnpack. A value longer than 4 GiB, or a blob
// past 2 GiB, cannot be a bound value anyway (PostgreSQL refuses a value
// over 1 GiB), so the spans' two 32-bit halves are enough.
func PGPack(vals [][]byte) PGPacked {
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	blob := make([]byte, 0, n)
	spans := pgArrayOf(vals, 12*len(vals)+2, func(b, v []byte) []byte {
		b = strconv.AppendInt(b, int64(len(blob))<<32|int64(len(v)), 10)
		blob = append(blob, v...)
		return b
	})
	return PGPacked{Blob: blob, Spans: spans}
}

// PGUnpack is the SQL expression of one value packed by PGPack: blob is
// the bytea value (a placeholder), span the row's element of its Spans (a
// bigint column). A NULL span gives NULL.
func PGUnpack(blob, span string) string {
	return "substring(CAST(" + blob + " AS bytea) FROM CAST(" + span + " >> 32 AS int) + 1 FOR CAST(" + span + " & 4294967295 AS int))"
}

// PGFixed is the SQL expression of the n-th (from 1) value of blob, where
// every value is width bytes: a chunk's message ids, end to end.
func PGFixed(blob, n string, width int) string {
	w := strconv.Itoa(width)
	return "substring(CAST(" + blob + " AS bytea) FROM CAST(" + n + " AS int) * " + w + " - " + strconv.Itoa(width-1) + " FOR " + w + ")"
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
