package delaybench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tierset/tierset/delay"
	"github.com/tierset/tierset/internal/measure"
)

// lateness offers a steady rate of tasks due lead after their enqueue (by
// Redis TIME, delay.After) and records, in the handler, the delivery time on
// the server's clock (the local clock plus an offset to Redis TIME measured
// once with µs resolution, see measure.ClockOffset) minus the task's due time
// (decoded from its score: server clock, ms). The library's own OnDelivered
// lateness (Redis TIME at take minus due, ms resolution) is reported beside it.
func (b *delayBench) lateness(ctx context.Context) error {
	for _, rate := range b.sizes.rates {
		if err := b.latenessAt(ctx, rate); err != nil {
			return fmt.Errorf("at %d/s: %w", rate, err)
		}
	}
	return nil
}

func (b *delayBench) latenessAt(ctx context.Context, rate int) error {
	want := int(float64(rate) * b.sizes.steady.Seconds())
	obs := newDelayAckCounter(want)
	q, err := b.queue("late"+strconv.Itoa(rate), obs.observer())
	if err != nil {
		return err
	}
	var samples measure.Samples
	jobs := b.jobs(want, 0, delay.After(b.sizes.lead))
	var offered float64
	sent := 0
	// The producer sends, every millisecond, the tasks owed by then as one
	// EnqueueBatch pipeline (one round trip), so 10k/s needs no more than
	// 1k round trips a second. It stops at 1.5× its planned time even when
	// it fell behind (the offered rate reported is then below the target).
	produce := func(ctx context.Context) error {
		time.Sleep(100 * time.Millisecond) // let the worker reach its idle wait
		start := time.Now()
		stopAt := start.Add(b.sizes.steady * 3 / 2)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		defer func() { obs.setWant(sent) }()
		for sent < want && time.Now().Before(stopAt) {
			// At most 10 ms worth per round trip, so a producer that fell
			// behind still sees its stop time.
			owed := min(want, int(time.Since(start).Seconds()*float64(rate))+1, sent+max(1, rate/100))
			if owed > sent {
				if _, err := enqueueAll(ctx, q, jobs[sent:owed], time.Time{}); err != nil {
					return err
				}
				sent = owed
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		offered = float64(sent) / time.Since(start).Seconds()
		return nil
	}
	offset, rtt, err := measure.ClockOffset(ctx, b.p.client)
	if err != nil {
		return err
	}
	started := make(chan time.Time, 1)
	err = delayRunWorker(ctx, q, obs, 8, 100, func(_ context.Context, t *delay.Task) error {
		samples.Add(time.Now().Add(offset).Sub(t.Due))
		return nil
	}, started, b.sizes.lead+b.sizes.drain, produce)
	if err != nil {
		return err
	}
	got := samples.Summary()
	lib := &obs.Lateness
	label := fmt.Sprintf("lateness at %d/s", rate)
	note := fmt.Sprintf("1 worker (concurrency 8, batch 100); %d tasks due +%v, offered %.0f/s; min %s ms; clock offset to Redis TIME %v ± %v",
		sent, b.sizes.lead, offered, delayMs(got.Min), offset.Round(time.Microsecond), (rtt / 2).Round(time.Microsecond))
	if sent < want {
		note += fmt.Sprintf("; the producer fell behind (%d of %d sent)", sent, want)
	}
	if got.N < sent {
		note += fmt.Sprintf("; only %d delivered before the drain timeout: figures are lower bounds", got.N)
	}
	b.add(delayRow{metric: label + " p50 (handler)", value: delayMsF(got.P50), unit: "ms", note: note})
	if rate == 10_000 {
		b.floors.JudgeIf(b.p.meaningful, measure.NotRedis, measure.Floor{Subject: "delay", Kind: measure.Tight,
			Name: label + " p99 (handler), every task delivered", Want: fmt.Sprintf("≤ %v", floorLateP99), Value: delayMs(got.P99) + " ms",
			Note: fmt.Sprintf("%d of %d delivered", got.N, want)}, got.N == sent && sent == want && got.P99 <= floorLateP99)
	}
	b.add(delayRow{metric: label + " p99 (handler)", value: delayMsF(got.P99), unit: "ms"})
	b.add(delayRow{metric: label + " max (handler)", value: delayMsF(got.Max), unit: "ms"})
	b.add(delayRow{metric: label + " p99 (take, library histogram)", value: delayMsF(lib.Percentile(99)), unit: "ms",
		note: fmt.Sprintf("Redis TIME at take − due; p50 %s ms, max %s ms, %d early", delayMs(lib.Percentile(50)), delayMs(lib.Max()), lib.Early())})
	return nil
}

func delayMsF(d time.Duration) float64 { return float64(d) / 1e6 }
func delayMs(d time.Duration) string   { return strconv.FormatFloat(delayMsF(d), 'f', 2, 64) }
