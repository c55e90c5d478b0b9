package postgres_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
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

// TestArrayValuesRoundTrip: the values of the enqueue and of the move (a
// text array, kit.PGTextArray; byte strings packed, kit.PGPack and
// kit.PGFixed) come back from the server as they went in, NULLs as NULLs
// and empty values empty, whether bound as parameters (prepared) or
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

	// %s are the values, in order.
	const textQuery = "SELECT t.v, t.v IS NULL FROM unnest(CAST(%s AS text[])) WITH ORDINALITY AS t(v, n) ORDER BY t.n"
	packedQuery := "SELECT encode(" + kit.PGUnpack("%s", "t.s") + ", 'hex'), t.s IS NULL FROM unnest(CAST(%s AS bigint[])) WITH ORDINALITY AS t(s, n) ORDER BY t.n"
	fixedQuery := "SELECT encode(" + kit.PGFixed("%s", "t.n", 3) + ", 'hex'), false FROM generate_series(1, CAST(%s AS int)) AS t(n) ORDER BY t.n"
	for _, path := range []struct {
		name string
		run  func(query string, values ...any) (*sql.Rows, error)
	}{
		{"bound", func(query string, values ...any) (*sql.Rows, error) {
			for i := range values {
				query = strings.Replace(query, "%s", fmt.Sprintf("$%d", i+1), 1)
			}
			return db.DB.QueryContext(ctx, query, values...)
		}},
		{"inlined", func(query string, values ...any) (*sql.Rows, error) {
			return db.QueryContext(ctx, strings.ReplaceAll(query, "%s", "?"), values...)
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
			packed := kit.PGPack(bins)
			got = readArray(t, ctx, path.run, packedQuery, packed.Blob, packed.Spans)
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
			fixed := []byte{0, 1, 2, 0x5c, 0x22, 0x7b, 0xff, 0, 0}
			got = readArray(t, ctx, path.run, fixedQuery, fixed, 3)
			require.Equal(t, []*string{ptr("000102"), ptr("5c227b"), ptr("ff0000")}, got)
		})
	}
}

func ptr(s string) *string { return &s }

// FuzzPGPack: any byte strings survive being packed and sliced back, a
// nil one as NULL, an empty one empty.
func FuzzPGPack(f *testing.F) {
	f.Add([]byte("a"), []byte{}, false, []byte{0, 0xff})
	f.Add([]byte{}, []byte(`\x00`), true, []byte(nil))
	db := dbtest.Postgres(f)
	f.Fuzz(func(t *testing.T, a, b []byte, bNil bool, c []byte) {
		if bNil {
			b = nil
		}
		if a == nil {
			a = []byte{} // the fuzzer's empty slice; nil is b's case
		}
		vals := [][]byte{a, b, c}
		p := kit.PGPack(vals)
		rows, err := db.DB.QueryContext(t.Context(), "SELECT "+kit.PGUnpack("$1", "t.s")+" FROM unnest(CAST($2 AS bigint[])) WITH ORDINALITY AS t(s, n) ORDER BY t.n",
			p.Blob, p.Spans)
		require.NoError(t, err)
		defer rows.Close()
		var got [][]byte
		for rows.Next() {
			var v []byte
			require.NoError(t, rows.Scan(&v))
			got = append(got, v)
		}
		require.NoError(t, rows.Err())
		require.Len(t, got, len(vals))
		for i, want := range vals {
			require.Equal(t, want == nil, got[i] == nil, "value %d: NULL exactly when nil", i)
			require.True(t, bytes.Equal(want, got[i]), "value %d: %x, got %x", i, want, got[i])
		}
	})
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

func readArray(t *testing.T, ctx context.Context, run func(query string, values ...any) (*sql.Rows, error), query string, values ...any) []*string {
	t.Helper()
	rows, err := run(query, values...)
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
