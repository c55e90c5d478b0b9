package ui_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/ui"
)

// requireOperator stands for the application's own auth middleware: it
// lets operators in and says who they are.
func requireOperator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Operator") == "" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// The UI mounted under /seqbox/ behind the application's auth middleware,
// which also names who acts in the action log.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example") // Out of example scope: a scratch database.
	defer os.RemoveAll(dir)
	sqldb, _ := sql.Open(sqliteshim.ShimName, sqlite.DSN(sqliteshim.DriverName(), filepath.Join(dir, "app.db")))
	db := bun.NewDB(sqldb, sqlitedialect.New())
	defer db.Close()
	ob, err := seqbox.New(db).Migrate(true).Queue("orders", 4, nil).ProducerOnly().Start(ctx)
	if err != nil {
		panic(err)
	}
	defer ob.Stop(ctx)

	h, err := ui.New(ob.Admin(), ui.WithIdentity(func(r *http.Request) string {
		return r.Header.Get("X-Operator") // what your middleware established
	}))
	if err != nil {
		panic(err)
	}
	defer h.Close() // stops the sampler behind the overview's charts
	mux := http.NewServeMux()
	mux.Handle("/seqbox/", requireOperator(http.StripPrefix("/seqbox", h)))

	for _, who := range []string{"", "alice"} { // Out of example scope: two requests.
		r := httptest.NewRequest("GET", "/seqbox/queues/orders", nil)
		r.Header.Set("X-Operator", who)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// 401
	// 200
}
