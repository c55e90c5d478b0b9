package postgres

import (
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// RenderMoveReads renders the moves' reads of incoming, Select for
// partition pids[0] and ManySelect for every pid, from bound 0, for the
// external plan test.
func RenderMoveReads(d dialect.Dialect, db *bun.DB, pids []int64, limit int) (map[string]string, error) {
	pg := d.(*pgDialect)
	bounds := make([]int64, len(pids))
	sel, err := pg.Runner.Render(db.QueryGen(), moveSQL.Select, kit.Args{"pid": pids[0], "bound": int64(0), "limit": limit})
	if err != nil {
		return nil, err
	}
	many, err := pg.Runner.Render(db.QueryGen(), moveSQL.ManySelect, kit.Args{"pids": kit.PGArray(pids), "bounds": kit.PGArray(bounds), "limit": limit})
	if err != nil {
		return nil, err
	}
	return map[string]string{"Select": sel, "ManySelect": many}, nil
}
