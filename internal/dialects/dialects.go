// Package dialects picks seqbox's dialect for a *bun.DB: the one place
// that knows every implementation.
package dialects

import (
	"context"

	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/mysql"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/internal/configerr"
)

// DefaultPrefix is the table prefix used when none is given.
const DefaultPrefix = dialect.DefaultPrefix

// Open returns the dialect for db's bun dialect and a table prefix ("" is
// DefaultPrefix). Errors are *outbox.ConfigError.
func Open(ctx context.Context, db *bun.DB, prefix string, pgOpts ...postgres.Option) (dialect.Dialect, error) {
	if db == nil {
		return nil, configerr.New("New", "nil *bun.DB")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := dialect.ValidatePrefix(prefix); err != nil {
		e := configerr.New("TablePrefix", "%v", err)
		e.Also = dialect.ErrInvalidPrefix
		return nil, e
	}
	switch name := db.Dialect().Name(); name {
	case bundialect.PG:
		return postgres.New(db, prefix, pgOpts...)
	case bundialect.MySQL:
		return mysql.New(ctx, db, prefix)
	case bundialect.SQLite:
		return sqlite.New(db, prefix)
	default:
		return nil, configerr.New("New", "unsupported bun dialect %s (want pg, mysql or sqlite)", name)
	}
}
