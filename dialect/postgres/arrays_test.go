package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/seqbox/seqbox/dialect/internal/kit"
	"github.com/seqbox/seqbox/internal/dbtest"
)

// hostileTexts are strings whose bytes mean something to an array literal
// or to SQL: quotes, backslashes, braces, commas, the word NULL, blanks.
var hostileTexts = [][]byte{
	nil, {}, []byte(`"`), []byte(`\`), []byte(`\\`), []byte(`\"`), []byte(`"\`), []byte(`{`), []byte(`}`), []byte(`{}`),
	[]byte(`,`), []byte(`NULL`), []byte(`null`), []byte(`"NULL"`), []byte(" "), []byte(" lead and trail "),
	[]byte("tab\tnew\nline\rcr"), []byte(`'`), []byte(`''`), []byte(`$1`), []byte(`?`), []byte(`{"a":"b\"c","d":"e\\f"}`),
	[]byte("é ü 日本 🎉"), []byte(`{"x",NULL,"y"}`), []byte(`\x00`), []byte("a\x7fb"),
}

// TestArrayValuesRoundTrip: the array values of the enqueue and of the
// move (kit.PGTextArray, kit.PGByteaArray) come back from the server as
// they went in, NULLs as NULLs, whether bound as a parameter (prepared) or
// inlined (a caller's transaction of another pool).
func TestArrayValuesRoundTrip(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	ctx := t.Context()
	texts := append([][]byte{}, hostileTexts...)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(1 + rng.IntN(127)) // any ASCII but NUL, which text cannot hold
		}
		texts = append(texts, b)
	}
	bins := append([][]byte{nil, {}, {0}, {0x5c}, {0x22}, {0xff, 0x00, 0x7b}}, texts...)

	const textQuery = "SELECT t.v, t.v IS NULL FROM unnest(CAST(%s AS text[])) WITH ORDINALITY AS t(v, n) ORDER BY t.n"
	const byteaQuery = "SELECT encode(t.v, 'hex'), t.v IS NULL FROM unnest(CAST(%s AS bytea[])) WITH ORDINALITY AS t(v, n) ORDER BY t.n"
	for _, path := range []struct {
		name string
		run  func(query, value string) (*sql.Rows, error)
	}{
		{"bound", func(query, value string) (*sql.Rows, error) {
			return db.DB.QueryContext(ctx, strings.Replace(query, "%s", "$1", 1), value)
		}},
		{"inlined", func(query, value string) (*sql.Rows, error) {
			return db.QueryContext(ctx, strings.Replace(query, "%s", "?", 1), value)
		}},
	} {
		t.Run(path.name, func(t *testing.T) {
			got := readArray(t, ctx, path.run, textQuery, kit.PGTextArray(texts))
			require.Equal(t, len(texts), len(got))
			for i, want := range texts {
				if want == nil {
					require.Nil(t, got[i], "element %d", i)
					continue
				}
				require.NotNil(t, got[i], "element %d: %q", i, want)
				require.Equal(t, string(want), *got[i], "element %d", i)
			}
			got = readArray(t, ctx, path.run, byteaQuery, kit.PGByteaArray(bins))
			require.Equal(t, len(bins), len(got))
			for i, want := range bins {
				if want == nil {
					require.Nil(t, got[i], "element %d", i)
					continue
				}
				require.NotNil(t, got[i], "element %d: %x", i, want)
				raw, err := hex.DecodeString(*got[i])
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, raw), "element %d: %x, got %x", i, want, raw)
			}
		})
	}
}

// FuzzPGTextArray: any text the server can hold survives the array value.
func FuzzPGTextArray(f *testing.F) {
	for _, s := range hostileTexts {
		f.Add(string(s), "second")
	}
	db := dbtest.Postgres(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) || strings.ContainsRune(a+b, 0) {
			t.Skip("not text PostgreSQL can hold")
		}
		var got []string
		rows, err := db.DB.QueryContext(t.Context(), "SELECT t.v FROM unnest(CAST($1 AS text[])) WITH ORDINALITY AS t(v, n) ORDER BY t.n",
			kit.PGTextArray([][]byte{[]byte(a), []byte(b)}))
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			got = append(got, s)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{a, b}, got)
	})
}

func readArray(t *testing.T, ctx context.Context, run func(query, value string) (*sql.Rows, error), query, value string) []*string {
	t.Helper()
	rows, err := run(query, value)
	require.NoError(t, err)
	defer rows.Close()
	var out []*string
	for rows.Next() {
		var v sql.NullString
		var isNull bool
		require.NoError(t, rows.Scan(&v, &isNull))
		require.Equal(t, isNull, !v.Valid)
		if v.Valid {
			out = append(out, &v.String)
		} else {
			out = append(out, nil)
		}
	}
	require.NoError(t, rows.Err())
	return out
}
