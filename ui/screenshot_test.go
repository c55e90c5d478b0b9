package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox"
	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/internal/dbtest"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/ui"
)

// TestScreenshots is not a check but the generator of the README's
// screenshots of the web UI (docs/ARCHITECTURE.md, "The web UI"). It runs
// only when SEQBOX_UI_SCREENSHOTS names the directory to write them to (a
// relative one is taken from the repository's root):
//
//	SEQBOX_UI_SCREENSHOTS=docs/img go test ./ui -run TestScreenshots
//
// On SQLite it builds a believable shotScene, two queues under steady traffic
// of varying rate, slow partitions, a parked one, a retrying one and some
// dead letters, waits until the charts span their window, and has
// e2e/screenshot.mjs save overview.png, overview-dark.png, queue.png,
// partition.png and deadletters.png. The charts' window is shrunk to the
// scene's seconds (ui.WithChartWindow, export_test.go), so they show an
// hour's shapes.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("SEQBOX_UI_SCREENSHOTS")
	if dir == "" {
		t.Skip("a documentation generator: set SEQBOX_UI_SCREENSHOTS=<dir> to run it")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // go test runs in ui/
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	node := browserTools(t)

	sc := newShotScene(t)
	sc.wait(t)

	mux := http.NewServeMux()
	mux.Handle(mount, http.StripPrefix(strings.TrimSuffix(mount, "/"), sc.h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b := &browserEnv{node: node, db: "sqlite", url: srv.URL + mount}
	b.run(t, "screenshot.mjs", map[string]string{"OUT": dir, "QUEUE": "orders", "PARTITION": strconv.Itoa(sc.parked)})
	for _, name := range []string{"overview.png", "overview-dark.png", "queue.png", "partition.png", "deadletters.png"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		t.Logf("%s: %d bytes", filepath.Join(dir, name), fi.Size())
		// The README links them: keep them light.
		require.Less(t, fi.Size(), int64(300<<10), "%s is too big for the README", name)
	}
}

// The scene's timing: the sampler's interval, and the charts' window,
// which the traffic fills before the screenshots are taken.
const (
	shotInterval = 200 * time.Millisecond
	shotWindow   = 12 * time.Second
)

// The scene's failures.
const (
	shotPoisonOrder   = "ord-10482"
	shotParkedError   = "inventory: reserve sku-1042: 409 conflict: stock version changed"
	shotStuckPayment  = "pay-20931"
	shotRetryingError = "psp: POST /charges: 503 Service Unavailable"
	shotRetries       = 3 // Retry now this many times, so the page shows a few attempts
	shotDeclinedCard  = "tok_declined"
)

type shotLine struct {
	SKU       string `json:"sku"`
	Qty       int    `json:"qty"`
	UnitPrice string `json:"unit_price"`
}

type shotOrder struct {
	ID       string     `json:"order_id"`
	Customer string     `json:"customer_id"`
	Lines    []shotLine `json:"lines"`
	Total    string     `json:"total"`
	Currency string     `json:"currency"`
	PlacedAt time.Time  `json:"placed_at"`
}

type shotPayment struct {
	ID       string `json:"payment_id"`
	Order    string `json:"order_id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Method   string `json:"method"`
	Card     string `json:"card_token"`
}

// validate is the orders handler's check; what fails it is rejected to
// dead letters, as retrying cannot fix it.
func (o shotOrder) validate() error {
	if len(o.Currency) != 3 || strings.ToUpper(o.Currency) != o.Currency {
		return fmt.Errorf("currency %q is not an ISO 4217 code", o.Currency)
	}
	if len(o.Lines) == 0 {
		return errors.New("no order lines")
	}
	for i, l := range o.Lines {
		if l.Qty <= 0 {
			return fmt.Errorf("line %d: quantity %d is not positive", i+1, l.Qty)
		}
		if l.SKU == "" {
			return fmt.Errorf("line %d: no sku", i+1)
		}
	}
	return nil
}

// shotScene is the outbox the screenshots show.
type shotScene struct {
	ctx    context.Context
	ob     *seqbox.Outbox
	admin  *seqbox.Admin
	db     bun.IConn
	rng    *rand.Rand // the test goroutine's, for the messages it enqueues itself
	h      *ui.Handler
	parked int // the orders partition parked on shotPoisonOrder
	stuck  int // the payments partition retrying shotStuckPayment
	// rejected counts the invalid messages enqueued, by queue.
	rejected map[string]int64
}

// shotSlowOrders and shotSlowPayments are the partitions whose handler is slow
// (a downstream call that takes its time): their backlog grows at peaks.
var (
	shotSlowOrders   = []int{3, 11, 19, 30, 41, 52, 60}
	shotSlowPayments = []int{2, 9}
)

// shotPartitions are the scene's queues' partition counts.
var shotPartitions = map[string]int{"orders": 64, "payments": 16}

func newShotScene(t *testing.T) *shotScene {
	t.Helper()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	pause := func(ctx context.Context, d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	orders := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		var o shotOrder
		if err := json.Unmarshal(d.Payload, &o); err != nil {
			return processor.Reject(fmt.Errorf("decode %s: %w", d.PayloadType, err))
		}
		if err := o.validate(); err != nil {
			return processor.Reject(fmt.Errorf("validate order %s: %w", o.ID, err))
		}
		if o.ID == shotPoisonOrder {
			return errors.New(shotParkedError)
		}
		if slices.Contains(shotSlowOrders, d.Partition) {
			pause(ctx, 600*time.Millisecond)
		}
		return nil
	})
	payments := processor.Leased(func(ctx context.Context, d processor.Delivery) error {
		var p shotPayment
		if err := json.Unmarshal(d.Payload, &p); err != nil {
			return processor.Reject(fmt.Errorf("decode %s: %w", d.PayloadType, err))
		}
		switch {
		case p.ID == shotStuckPayment:
			return errors.New(shotRetryingError)
		case p.Card == shotDeclinedCard:
			return processor.Reject(fmt.Errorf("psp: POST /charges: 402 Payment Required: card_declined (insufficient_funds), payment %s", p.ID))
		}
		if slices.Contains(shotSlowPayments, d.Partition) {
			pause(ctx, 600*time.Millisecond)
		}
		return nil
	})
	ob, err := seqbox.New(db).TablePrefix(dbtest.Prefix(t)).Migrate(true).
		Logger(slog.New(slog.DiscardHandler)).PollInterval(50*time.Millisecond).ProcessorConcurrency(32).
		Queue("orders", shotPartitions["orders"], orders, processor.MaxAttempts(3), processor.Retry(20*time.Millisecond, 100*time.Millisecond),
			processor.OnFailure(processor.Park)).
		// A long backoff: the stuck payment waits minutes between tries,
		// so it stays retrying while the screenshots are taken.
		Queue("payments", shotPartitions["payments"], payments, processor.MaxAttempts(processor.MaxAttemptsNever), processor.Retry(10*time.Minute, time.Hour)).
		Start(ctx)
	require.NoError(t, err)
	h, err := ui.New(ob.Admin(), ui.WithLogger(slog.New(slog.DiscardHandler)), ui.WithSampleInterval(shotInterval), ui.WithChartWindow(shotWindow))
	require.NoError(t, err)
	sc := &shotScene{ctx: ctx, ob: ob, admin: ob.Admin(), db: db, h: h, rng: rand.New(rand.NewPCG(20, 1042)), rejected: map[string]int64{}}

	// The traffic runs until the screenshots are taken; cleanups run
	// last-in first-out: traffic stops, then the sampler, then the outbox.
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = ob.Stop(sctx)
	})
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	traffic, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })

	// Invalid messages, which the handlers reject to dead letters.
	for i, spoil := range []func(*shotOrder){
		func(o *shotOrder) { o.Currency = "" },
		func(o *shotOrder) { o.Lines[0].Qty = -1 },
		func(o *shotOrder) { o.Currency = "eur" },
		func(o *shotOrder) { o.Lines = nil },
		func(o *shotOrder) { o.Lines[len(o.Lines)-1].SKU = "" },
	} {
		o := sc.order(sc.rng, 10900+17*i)
		spoil(&o)
		sc.enqueue(t, "orders", "order.created.v1", o.Customer, o)
		sc.rejected["orders"]++
	}
	for i := range 2 {
		p := sc.payment(sc.rng, 21100+29*i)
		p.Card = shotDeclinedCard
		sc.enqueue(t, "payments", "payment.capture.v1", fmt.Sprintf("cus-%04d", 1000+sc.rng.IntN(9000)), p)
		sc.rejected["payments"]++
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		sc.traffic(traffic, rand.New(rand.NewPCG(7, 3)))
	}()
	return sc
}

// traffic enqueues orders and their payments until ctx ends, at a rate
// that rises and falls, with a burst, so the charts have shapes.
func (sc *shotScene) traffic(ctx context.Context, rng *rand.Rand) {
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	var owed float64
	next := 11000
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := time.Since(start).Seconds()
		rate := 100 + 70*math.Sin(2*math.Pi*s/8)
		if s > 5 && s < 6.5 {
			rate += 200 // a flash sale
		}
		owed += rate * tick.Seconds()
		var orders, payments []outbox.Message
		for ; owed >= 1; owed-- {
			o := sc.order(rng, next)
			next++
			orders = append(orders, sc.message("order.created.v1", o.Customer, o, rng))
			if rng.IntN(3) == 0 {
				p := sc.payment(rng, next+9000)
				p.Order, p.Amount = o.ID, o.Total
				payments = append(payments, sc.message("payment.capture.v1", o.Customer, p, rng))
			}
		}
		for q, msgs := range map[string][]outbox.Message{"orders": orders, "payments": payments} {
			if len(msgs) == 0 {
				continue
			}
			if _, err := sc.ob.EnqueueBatch(ctx, sc.db, q, msgs); err != nil {
				return // ctx ended: the test is over
			}
		}
	}
}

var (
	shotSKUs    = []string{"sku-1042", "sku-2210", "sku-0317", "sku-5531", "sku-7808", "sku-0999", "sku-3141"}
	shotTenants = []string{"acme-eu", "acme-us", "globex"}
)

func (sc *shotScene) order(rng *rand.Rand, n int) shotOrder {
	o := shotOrder{ID: "ord-" + strconv.Itoa(n), Customer: fmt.Sprintf("cus-%04d", 1000+rng.IntN(9000)), Currency: "EUR",
		PlacedAt: time.Now().UTC().Truncate(time.Millisecond)}
	var cents int
	for range 1 + rng.IntN(3) {
		price := 199 + rng.IntN(8000)
		l := shotLine{SKU: shotSKUs[rng.IntN(len(shotSKUs))], Qty: 1 + rng.IntN(3), UnitPrice: shotMoney(price)}
		cents += price * l.Qty
		o.Lines = append(o.Lines, l)
	}
	o.Total = shotMoney(cents)
	return o
}

func (sc *shotScene) payment(rng *rand.Rand, n int) shotPayment {
	return shotPayment{ID: "pay-" + strconv.Itoa(n), Order: "ord-" + strconv.Itoa(10000+rng.IntN(900)), Amount: shotMoney(500 + rng.IntN(20000)),
		Currency: "EUR", Method: "card", Card: "tok_visa_" + strconv.Itoa(1000+rng.IntN(9000))}
}

func shotMoney(cents int) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// message is v as a message keyed by customer, with the headers an
// application would set: its tenant and the W3C trace context.
func (sc *shotScene) message(typ, key string, v any, rng *rand.Rand) outbox.Message {
	payload, err := json.Marshal(v)
	if err != nil {
		panic(err) // the scene's own types always marshal
	}
	trace := fmt.Sprintf("00-%016x%016x-%016x-01", rng.Uint64(), rng.Uint64(), rng.Uint64())
	return outbox.Message{Key: key, PayloadType: typ, Payload: payload,
		Headers: map[string]string{"tenant": shotTenants[rng.IntN(len(shotTenants))], "traceparent": trace}}
}

// enqueue enqueues one message and returns its partition.
func (sc *shotScene) enqueue(t *testing.T, queue, typ, key string, v any) int {
	t.Helper()
	m := sc.message(typ, key, v, sc.rng)
	_, err := sc.ob.Enqueue(sc.ctx, sc.db, queue, m)
	require.NoError(t, err)
	return outbox.PartitionForKey(key, shotPartitions[queue])
}

var shotDepthPath = regexp.MustCompile(`(?s)queues/orders">orders</a></figcaption>.*?<path class="line" d="([^"]*)"`)

// wait waits for the scene: three fifths of the window's traffic, then the
// poison order and the stuck payment enqueued, so the charts show the
// backlog piling up behind them; the poison order's partition parked, the
// stuck payment retried a few times and waiting, every invalid message
// dead-lettered, and the charts spanning their window.
func (sc *shotScene) wait(t *testing.T) {
	t.Helper()
	// The sampler's points, as the overview draws them: one per interval.
	want := int(shotWindow/shotInterval) - 1
	sc.waitPoints(t, want*3/5)
	poison := shotOrder{ID: shotPoisonOrder, Customer: "cus-4471", Currency: "EUR", PlacedAt: time.Now().UTC().Truncate(time.Millisecond),
		Lines: []shotLine{{SKU: "sku-1042", Qty: 2, UnitPrice: "24.90"}}, Total: "49.80"}
	sc.parked = sc.enqueue(t, "orders", "order.created.v1", poison.Customer, poison)
	stuck := sc.payment(sc.rng, 20931)
	stuck.ID = shotStuckPayment
	sc.stuck = sc.enqueue(t, "payments", "payment.capture.v1", "cus-2290", stuck)

	parts := sc.admin.Partitions()
	state := func(queue string, n int) seqbox.PartitionState {
		s, err := parts.State(sc.ctx, queue, n)
		require.NoError(t, err)
		return s
	}
	eventually(t, "the poison order's partition parked", func() bool { return state("orders", sc.parked).State == seqbox.StateParked })
	for i := 1; i <= shotRetries+1; i++ {
		eventually(t, fmt.Sprintf("the stuck payment's attempt %d failed", i), func() bool {
			s := state("payments", sc.stuck)
			return s.State == seqbox.StateRetrying && !s.InFlight && s.Attempts >= i
		})
		if i <= shotRetries {
			_, err := parts.RetryNow(sc.ctx, "payments", sc.stuck)
			require.NoError(t, err)
		}
	}
	for queue, n := range sc.rejected {
		eventually(t, queue+"'s dead letters", func() bool {
			c, err := sc.admin.DeadLetters().Count(sc.ctx, deadletter.Filter{Queue: queue})
			require.NoError(t, err)
			return c[deadletter.StatusPending] == n
		})
	}
	sc.waitPoints(t, want)
}

// waitPoints waits until the orders' depth chart on the overview has n points.
func (sc *shotScene) waitPoints(t *testing.T, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d points on the charts", n), func() bool {
		code, body := do(t, sc.h, "GET", "/", nil)
		require.Equal(t, http.StatusOK, code)
		m := shotDepthPath.FindStringSubmatch(body)
		return m != nil && strings.Count(m[1], "M")+strings.Count(m[1], "L") >= n
	})
}
