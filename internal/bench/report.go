package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("bench: write JSON report: %w", err)
	}
	return nil
}

// WriteText writes the report for people: the conditions first (machine,
// database settings, seqbox knobs), then one line per figure, then the
// details that tell whether a figure can be trusted (backlog, table rows).
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	o := r.Options
	m := r.Machine
	ew.printf("seqbox bench, %s, took %v\n", r.StartedAt.Format(time.RFC3339), r.Duration.Round(time.Second))
	cpu := ""
	if m.CPUModel != "" {
		cpu = " (" + m.CPUModel + ")"
	}
	ew.printf("machine:  %d cores%s, %s RAM, %s/%s, %s, peak RSS %s\n",
		m.Cores, cpu, fmtBytes(m.MemTotalBytes), m.GOOS, m.GOARCH, m.GoVersion, fmtBytes(r.PeakRSSBytes))
	where := o.DSN
	if where == "" {
		where = "embedded SQLite file (temporary)"
	}
	ew.printf("database: %s %s (%s, driver %s)\n", r.Database.Name, r.Database.Version, where, r.Database.Driver)
	var settings []string
	for _, k := range slices.Sorted(maps.Keys(r.Database.Settings)) {
		settings = append(settings, k+"="+r.Database.Settings[k])
	}
	ew.printf("settings: %s\n", strings.Join(settings, " "))
	if av := r.Autovacuum; av != nil {
		ew.printf("autovacuum: %s\n", av.describe())
	}
	k := r.Knobs
	ew.printf("seqbox:   sequencer workers %d, batch %d (inner %d), reconcile %s; processor %s, concurrency %d, batch %d, poll %s, lease %s;\n"+
		"          vacuum every %s, chunk %d; enqueue chunk %d rows / %s; maybe-dirty window %s; rotate every %s or %s\n",
		k.SequencerWorkers, k.SequencerBatchSize, k.SequencerMaxInnerIterations, k.ReconcileInterval,
		k.ProcessorMode, k.ProcessorConcurrency, k.ProcessorBatchSize, k.PollInterval, k.Lease,
		k.VacuumInterval, k.VacuumChunk, k.EnqueueChunkRows, fmtBytes(int64(k.EnqueueChunkBytes)), k.MaybeDirtyWindow, k.RotateInterval, k.RotateSize)
	ew.printf("runs:     %d x %v per figure (median [min-max]); payload %d B, %d partitions, batch %d, drain %s msgs, latency rate %d msgs/s\n",
		o.Runs, o.Duration, o.Payload, o.Partitions, o.Batch, joinInts(o.DrainMessages), o.LatencyRate)
	var growth []string
	if slices.Contains(o.Scenarios, ScenarioHeldSnapshot) {
		rate := "full rate"
		if o.HeldRate > 0 {
			rate = fmt.Sprintf("%d msgs/s", o.HeldRate)
		}
		growth = append(growth, fmt.Sprintf("held-snapshot windows %v at %s", o.HeldWindow, rate))
	}
	if slices.Contains(o.Scenarios, ScenarioPartitions) {
		growth = append(growth, fmt.Sprintf("partition sweep %s (%v windows)", joinInts(o.PartitionSweep), o.Duration))
	}
	if slices.Contains(o.Scenarios, ScenarioSoak) {
		rate := fmt.Sprintf("%.0f%% of a measured sustained rate", 100*SoakRateShareDefault)
		if o.SoakRate > 0 {
			rate = fmt.Sprintf("%d msgs/s", o.SoakRate)
		}
		growth = append(growth, fmt.Sprintf("soak %v sampled every %v at %s", o.SoakDuration, o.SoakInterval, rate))
	}
	if len(growth) > 0 {
		ew.printf("growth:   %s (held-snapshot and partitions: pairs measured in each run; soak: one run)\n", strings.Join(growth, "; "))
	}
	ew.printf("\n")

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tvariant\tmsgs/s median [min-max]\tbaseline msgs/s\tratio\tlatency ms p50/p95/p99/max")
	for _, res := range r.Results {
		base, ratio, lat := "", "", ""
		if res.Baseline != nil {
			base = fmtStat(*res.Baseline)
		}
		if res.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f", res.Ratio)
		}
		if l := res.Latency; l != nil {
			lat = fmtLatency(*l)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", res.Scenario, res.Variant, fmtStat(res.MsgsPerSec), base, ratio, lat)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write text report: %w", err)
	}
	if err := r.writeRatios(ew); err != nil {
		return err
	}
	for _, res := range r.Results {
		if len(res.Samples) > 0 {
			if err := writeSamples(ew, res); err != nil {
				return err
			}
		}
		writeLadders(ew, res.Ladders)
	}

	var details []string
	for _, res := range r.Results {
		if len(res.Extra) == 0 {
			continue
		}
		details = append(details, fmt.Sprintf("  %s %s:", res.Scenario, res.Variant))
		for _, key := range slices.Sorted(maps.Keys(res.Extra)) {
			details = append(details, fmt.Sprintf("    %s: %s", key, fmtExtra(res.Extra[key])))
		}
	}
	if len(details) > 0 {
		ew.printf("\ndetails (per-run lists are in run order):\n%s\n", strings.Join(details, "\n"))
	}
	if len(r.TableRows) > 0 {
		byMoment := map[string][]string{}
		for key, n := range r.TableRows {
			i := strings.LastIndexByte(key, '.')
			byMoment[key[:max(i, 0)]] = append(byMoment[key[:max(i, 0)]], fmt.Sprintf("%s=%d", key[i+1:], n))
		}
		ew.printf("\ntable rows (last run):\n")
		for _, moment := range slices.Sorted(maps.Keys(byMoment)) {
			slices.Sort(byMoment[moment])
			ew.printf("  %-18s %s\n", moment+":", strings.Join(byMoment[moment], " "))
		}
	}
	return ew.err
}

// describe says which autovacuum was in force and who chose it.
func (a *Autovacuum) describe() string {
	if a.Mode == AutovacuumLeave {
		return a.During + " (the server's setting, left as it is; --pg-autovacuum on|off sets it for a run)"
	}
	s := fmt.Sprintf("%s for this run (--pg-autovacuum %s; it was %s", a.During, a.Mode, a.Before)
	switch {
	case a.RestoreError != "":
		s += ", and restoring it FAILED: " + a.RestoreError
	case a.Restored != "":
		s += ", restored to " + a.Restored
	}
	return s + ")"
}

// writeRatios lists every ratio, each measured within one run.
func (r *Report) writeRatios(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	printed := false
	for _, res := range r.Results {
		for _, ratio := range res.Ratios {
			if !printed {
				fmt.Fprintln(tw, "\nratios (each from two figures of the same run; median [min-max] over runs):")
				printed = true
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", res.Scenario, ratio.Name, fmtRatio(ratio.Stat))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write text report: %w", err)
	}
	return nil
}

func fmtRatio(s Stat) string {
	switch len(s.Runs) {
	case 0:
		return "n/a (its divisor was 0 in every run)"
	case 1:
		return fmt.Sprintf("%.2f", s.Median)
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", s.Median, s.Min, s.Max)
}

// writeSamples prints a soak's samples, one line each. Storage columns
// appear for the databases that report them.
func writeSamples(w io.Writer, res Result) error {
	has := func(get func(Sample) int64) bool {
		return slices.ContainsFunc(res.Samples, func(s Sample) bool { return get(s) != 0 })
	}
	sum := func(m map[string]int64) int64 {
		var t int64
		for _, v := range m {
			t += v
		}
		return t
	}
	type column struct {
		head string
		cell func(Sample) string
	}
	cols := []column{
		{"t s", func(s Sample) string { return fmt.Sprint(math.Round(s.AtSec*10) / 10) }},
		{"delivered/s", func(s Sample) string { return fmtCount(s.DeliveredPerSec) }},
		{"committed/s", func(s Sample) string { return fmtCount(s.CommittedPerSec) }},
		{"p50/p99 ms", func(s Sample) string { return fmtMs(s.LatencyP50Ms) + " / " + fmtMs(s.LatencyP99Ms) }},
		{"incoming", func(s Sample) string { return fmtCount(float64(s.Incoming)) }},
		{"unprocessed", func(s Sample) string { return fmtCount(float64(s.Unprocessed)) }},
		{"wait-vacuum", func(s Sample) string {
			if s.WaitingVacuum == nil {
				return "·" // counted once a minute
			}
			return fmtCount(float64(*s.WaitingVacuum))
		}},
		{"rows body/out", func(s Sample) string {
			return fmtCount(float64(s.TableRows["body"])) + " / " + fmtCount(float64(s.TableRows["outgoing"]))
		}},
	}
	if has(func(s Sample) int64 { return sum(s.Storage.TableBytes) }) {
		cols = append(cols, column{"table bytes", func(s Sample) string { return fmtBytes(sum(s.Storage.TableBytes)) }})
	}
	if has(func(s Sample) int64 { return sum(s.Storage.DeadTuples) }) {
		cols = append(cols, column{"dead tuples", func(s Sample) string { return fmtCount(float64(sum(s.Storage.DeadTuples))) }})
	}
	if has(func(s Sample) int64 { return s.Storage.HistoryLength }) {
		cols = append(cols, column{"history", func(s Sample) string { return fmtCount(float64(s.Storage.HistoryLength)) }})
	}
	if has(func(s Sample) int64 { return s.Storage.FileBytes }) {
		cols = append(cols, column{"db file / wal", func(s Sample) string {
			return fmtBytes(s.Storage.FileBytes) + " / " + fmtBytes(s.Storage.WALBytes)
		}})
	}
	cols = append(cols,
		column{"heap / rss", func(s Sample) string { return fmtBytes(s.HeapLiveBytes) + " / " + fmtBytes(s.RSSBytes) }},
		column{"in flight", func(s Sample) string { return fmtCount(float64(s.TrackedInFlight)) }},
		column{"goroutines", func(s Sample) string { return fmt.Sprint(s.Goroutines) }},
		column{"log err/warn", func(s Sample) string { return fmt.Sprintf("%d / %d", s.LogErrors, s.LogWarnings) }},
	)
	fmt.Fprintf(w, "\n%s %s, samples (rates and latency over the interval, sizes at its end):\n", res.Scenario, res.Variant)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c.head)
	}
	fmt.Fprintln(tw, "\t")
	for _, s := range res.Samples {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c.cell(s))
		}
		fmt.Fprintln(tw, "\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("bench: write text report: %w", err)
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// errWriter keeps the first write error so the text can be written without
// checking every line.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("bench: write text report: %w", err)
	}
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { _, _ = fmt.Fprintf(e, format, args...) }

func fmtStat(s Stat) string {
	if len(s.Runs) <= 1 {
		return fmtCount(s.Median)
	}
	return fmt.Sprintf("%s [%s-%s]", fmtCount(s.Median), fmtCount(s.Min), fmtCount(s.Max))
}

// fmtCount rounds to an integer with thousands separators: 41,297.
func fmtCount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	n := int64(math.Round(v))
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtMs(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// fmtLatency is a latency as the report's table shows it: p50 / p95 / p99 / max ms.
func fmtLatency(l LatencyStat) string {
	return fmt.Sprintf("%s / %s / %s / %s", fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99), fmtMs(l.Max))
}

// fmtExtra formats an Extra value the same way whether it is the value
// Run stored or what JSON decoding made of it (float64, []any, map[string]any).
func fmtExtra(v any) string {
	switch v := v.(type) {
	case nil:
		return "[]" // a nil list encodes as null
	case Stat:
		return fmtStat(v)
	case *LatencyStat:
		if v == nil {
			return "-"
		}
		return fmtLatency(*v)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return fmt.Sprint(int64(v))
		}
		return fmt.Sprintf("%.1f", v)
	case float32, int, int64:
		return fmt.Sprint(v)
	case string:
		return v
	case bool:
		return fmt.Sprint(v)
	case map[string]any:
		med, ok1 := v["median"].(float64)
		lo, ok2 := v["min"].(float64)
		hi, ok3 := v["max"].(float64)
		if runs, ok4 := v["runs"].([]any); ok1 && ok2 && ok3 && ok4 { // a Stat read back from JSON
			return fmtStat(Stat{Median: med, Min: lo, Max: hi, Runs: make([]float64, len(runs))})
		}
		p50, ok1 := v["p50_ms"].(float64)
		p95, ok2 := v["p95_ms"].(float64)
		p99, ok3 := v["p99_ms"].(float64)
		top, ok4 := v["max_ms"].(float64)
		if ok1 && ok2 && ok3 && ok4 { // a LatencyStat read back from JSON
			return fmtLatency(LatencyStat{P50: p50, P95: p95, P99: p99, Max: top})
		}
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = fmtExtra(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, " ") + "]"
	case reflect.Map:
		keys := make([]string, 0, rv.Len())
		byKey := map[string]string{}
		for it := rv.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			keys = append(keys, k)
			byKey[k] = fmtExtra(it.Value().Interface())
		}
		slices.Sort(keys)
		for i, k := range keys {
			keys[i] = k + "=" + byKey[k]
		}
		return "{" + strings.Join(keys, " ") + "}"
	default:
		return fmt.Sprint(v)
	}
}

// writeLadders lists the capacity scenario's steps, run by run.
func writeLadders(ew *errWriter, ladders [][]CapacityStep) {
	for i, ladder := range ladders {
		ew.printf("\ncapacity ladder, run %d (offered -> committed / delivered msgs/s, backlog growth):\n", i+1)
		for _, s := range ladder {
			verdict := "kept up"
			if !s.KeptUp {
				verdict = "fell behind"
			}
			if s.ProducerLimited {
				verdict += "; the producers could not offer this rate: the figure is a lower bound"
			}
			ew.printf("  %8s -> %8s / %8s  %+9d  %s\n", fmtCount(s.Offered), fmtCount(s.Committed), fmtCount(s.Delivered), s.BacklogGrowth, verdict)
		}
	}
}
