package mysql

import (
	"github.com/seqbox/seqbox/internal/engine"
)

// The optional interfaces the engine and the vacuum find by type
// assertion, checked here rather than in the package: a dialect must not
// import the engine that depends on it.
var (
	_ engine.AckLeaser        = (*mysqlDialect)(nil)
	_ engine.GroupLeaser      = (*mysqlDialect)(nil)
	_ engine.BufferPoolReader = (*mysqlDialect)(nil)
)
