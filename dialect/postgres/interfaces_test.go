package postgres

import (
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/vacuum"
)

// The optional interfaces the engine and the vacuum find by type
// assertion, checked here rather than in the package: a dialect must not
// import the engine that depends on it.
var (
	_ engine.AckLeaser     = (*pgDialect)(nil)
	_ engine.GroupLeaser   = (*pgDialect)(nil)
	_ vacuum.TableVacuumer = (*pgDialect)(nil)
)
