package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// The capacity scenario's ladder of offered rates and its tests of "kept
// up" (docs/ARCHITECTURE.md, "Cost that stays flat").
const (
	capacityGrow = 1.25  // each step offers this much more
	capacityMax  = 400e3 // no step offers more
	// capacityRefine is how many steps bisect (geometrically) between the
	// last step that kept up and the first that did not: two narrow the
	// 25% gap to about 6%.
	capacityRefine = 2
	// capacityFloor: a ladder whose first step falls behind steps down
	// instead, capacityGrow apart, to at most start/capacityFloor, so that
	// a start above the pipeline's capacity (or a first step slowed by a
	// new schema's first seconds) still gives a figure, not zero.
	capacityFloor = 10
	// capacityProducers is the least number of producers: paced, they
	// must offer more than the pipeline takes, so the pipeline, not the
	// producers, is what the ladder finds the limit of.
	capacityProducers = 32
	// A step kept up when the backlog, sampled every second of the window
	// after the first, grew by less than maxSlope of the offered rate per
	// second (least squares): a pipeline that keeps up holds a steady
	// backlog of about its latency times the rate, one that does not adds
	// the difference every second. Below about 16k msgs/s the bound is
	// the commits' own rhythm instead (judge).
	maxSlope = 0.02
	// A step whose producers committed less than reached of the offered
	// rate ends the ladder: the producers, not the pipeline, were the
	// limit there.
	reached = 0.95
)

// CapacityStep is one rung of the capacity scenario's ladder.
type CapacityStep struct {
	Offered   float64 `json:"offered_msgs_per_sec"`
	Committed float64 `json:"committed_msgs_per_sec"`
	// Delivered is the window's messages over the time until the last of
	// them was delivered (window plus drain): the rate the pipeline got
	// them through, not cut short by the last moments' latency.
	Delivered float64 `json:"delivered_msgs_per_sec"`
	// BacklogGrowth is the backlog when the producers stopped minus the
	// first sample, a second in; BacklogSlope its least-squares growth
	// per second over the samples.
	BacklogGrowth int64   `json:"backlog_growth"`
	BacklogSlope  float64 `json:"backlog_slope_per_sec"`
	KeptUp        bool    `json:"kept_up"`
	// ProducerLimited: the producers could not offer the rate.
	ProducerLimited bool `json:"producer_limited"`
}

// judge says whether a run kept up with the rate offered, and whether
// its producers reached that rate. quantum is what one commit of each
// producer adds to the backlog at once (producers × batch): the backlog
// swings by that much whether or not the pipeline keeps up, and such a
// swing late in a 10 s window has a slope of up to about a tenth of it a
// second. So the slope must also exceed quantum over the window's length:
// at 12k msgs/s from 32 producers of 100, 320 a second (2.7%) instead of
// 240 (2%), where one commit's swing, 278 a second, had ended ladders at a
// third of the rate they reached in other runs of the same build.
func judge(offered float64, pr pipelineRun, quantum int64) CapacityStep {
	series := append(slices.Clone(pr.backlogSeries), pr.backlogFinal)
	s := CapacityStep{Offered: offered, Committed: pr.enqueueRate, Delivered: pr.throughput(), BacklogGrowth: pr.backlogGrowth(),
		BacklogSlope: slope(series)}
	// Kept up with what was committed, whether or not the producers
	// reached the offered rate.
	s.ProducerLimited = pr.enqueueRate < reached*offered
	bound := maxSlope * max(pr.enqueueRate, 1)
	if span := float64(len(series) - 1); span > 0 {
		bound = max(bound, float64(quantum)/span)
	}
	s.KeptUp = s.BacklogSlope < bound
	return s
}

// capacityFigure raises the offered load step by step until the pipeline
// no longer keeps up, and reports the highest delivered rate of a step
// that kept up, beside the one-table INSERT ceiling measured right after
// with the same producers and batch: capacity, not the producers' rate.
// A ladder that ends because its producers could not offer more reports
// that too (producer_limited): its figure, the last step's if the pipeline
// kept up with what they committed, is then a lower bound.
func (b *bencher) capacityFigure(ctx context.Context, producers int) ([]Result, error) {
	producers = max(producers, capacityProducers)
	batch := b.opts.Batch
	variant := fmt.Sprintf("%d partitions, %d/tx, %s paced", b.opts.Partitions, batch, plural(producers, "producer"))
	var capacities, ceilings []float64
	var ladders [][]CapacityStep
	var limited []bool
	var use, baseUse usageStats
	for i := range b.opts.Runs {
		ladder, best, producerLimited, err := climb(float64(b.opts.CapacityStart), func(offered float64) (CapacityStep, error) {
			pace := paceFor(offered, producers, batch)
			spec := pipelineSpec{partitions: b.opts.Partitions, producers: producers, batch: batch, window: b.opts.Duration, pace: pace}
			label := fmt.Sprintf("%s, %s msgs/s offered", b.runLabel(ScenarioCapacity, variant, i), fmtCount(offered))
			pr, err := b.pipelineOnce(ctx, label, &use, spec, delivered)
			if err != nil {
				return CapacityStep{}, err
			}
			return judge(offered, pr, int64(producers*batch)), nil
		})
		if err != nil {
			return nil, err
		}
		ceiling, err := b.timed(b.runLabel(ScenarioCapacity, "one-table INSERT ceiling", i), &baseUse, func(m *meter) (float64, error) {
			return b.baselineRun(ctx, producers, batch, m)
		})
		if err != nil {
			return nil, err
		}
		capacities, ceilings = append(capacities, best), append(ceilings, ceiling)
		ladders, limited = append(ladders, ladder), append(limited, producerLimited)
	}
	base := newStat(ceilings)
	res := Result{Scenario: ScenarioCapacity, Variant: variant, MsgsPerSec: newStat(capacities), Baseline: &base,
		Ladders: ladders, Extra: map[string]any{"producer_limited": limited}}
	if base.Median > 0 {
		res.Ratio = res.MsgsPerSec.Median / base.Median
	}
	res.Ratios = []Ratio{{Name: "capacity / one-table INSERT ceiling", Stat: ratioStat(capacities, ceilings)}}
	use.put(res.Extra)
	return []Result{res}, nil
}

// climb runs the capacity ladder: steps capacityGrow apart from start until
// one does not keep up (or its producers fall short of the offered rate),
// then capacityRefine steps between the last that kept up and the first
// that did not. A first step that does not keep up sends the ladder down
// instead, to the first step that does (no lower than start/capacityFloor).
// best is the highest delivered rate of a step that kept up.
func climb(start float64, run func(offered float64) (CapacityStep, error)) (ladder []CapacityStep, best float64, producerLimited bool, err error) {
	lo, hi := 0.0, 0.0 // the last offered rate that kept up, the first that did not
	// step runs one rung and moves lo or hi to it; stop says its
	// producers fell short, which ends the ladder.
	step := func(offered float64) (stop bool, err error) {
		s, err := run(offered)
		if err != nil {
			return true, err
		}
		ladder = append(ladder, s)
		if s.KeptUp {
			best, lo = max(best, s.Delivered), offered
		} else {
			hi = offered
		}
		return s.ProducerLimited, nil
	}
	for offered := start; hi == 0 && offered <= max(capacityMax, start); offered *= capacityGrow {
		if stop, err := step(offered); stop || err != nil {
			return ladder, best, err == nil, err
		}
	}
	if hi == 0 {
		return ladder, best, false, nil // never failed
	}
	for offered := start / capacityGrow; lo == 0 && offered >= start/capacityFloor; offered /= capacityGrow {
		if stop, err := step(offered); stop || err != nil {
			return ladder, best, err == nil, err
		}
	}
	if lo == 0 {
		return ladder, best, false, nil // no step down to start/capacityFloor kept up
	}
	for range capacityRefine {
		if stop, err := step(math.Sqrt(lo * hi)); stop || err != nil {
			return ladder, best, err == nil, err
		}
	}
	return ladder, best, false, nil
}
