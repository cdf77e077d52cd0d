package delay

import (
	"context"
	"time"
)

// ackLinger is how long the completion loop waits for more acks after the
// first when fewer than ackEnough are queued: at most a millisecond turns a
// trickle of small ack scripts into fewer larger ones, which leaves Redis
// more time for takes (measured: lower take+ack cost and lateness at 10k/s).
// An ack only deletes a finished task, so a late one delays nothing.
const (
	ackLinger = time.Millisecond
	ackEnough = 64
)

// ackLoop batches acks: it blocks for one, drains what else is queued and
// acks them all in one script. It also writes the taker's history counts,
// at most once per historyFlush and once more when it stops.
func (tk *taker) ackLoop(ctx context.Context) {
	q, acks, quit := tk.q, tk.acks, tk.quit
	batch := make([]leaseRef, 0, MaxBatch)
	tick := time.NewTicker(historyFlush)
	defer tick.Stop()
	defer tk.flushHistory(ctx) // after the last ack: every handler has counted
	for {
		var l leaseRef
		select {
		case l = <-acks:
		case <-tick.C:
			tk.flushHistory(ctx)
			continue
		case <-quit:
			// closeAcks ran: no send comes after it, so what is queued
			// now is all that is left to send.
			select {
			case l = <-acks:
			default:
				return
			}
		}
		// Beside a line with work due, scripts stay short (scriptCap);
		// what is left stays queued for the next script.
		most := tk.scriptCap(MaxBatch)
		batch = append(batch[:0], l)
		drain(acks, &batch, most)
		if enough := min(ackEnough, most); len(batch) < enough {
			// Linger briefly: handlers finishing together share one script.
			t := time.NewTimer(ackLinger)
		linger:
			for len(batch) < enough {
				select {
				case l := <-acks:
					batch = append(batch, l)
					drain(acks, &batch, most)
				case <-t.C:
					break linger
				case <-quit:
					break linger
				}
			}
			t.Stop()
		}
		req := q.req.next() // every attempt is the same call
		for attempt := 1; ; attempt++ {
			actx, cancel := completionCtx(ctx)
			errs, err := q.ackMany(actx, batch, req)
			cancel()
			if err == nil {
				for _, e := range errs {
					if e != nil {
						q.o.obs.OnError(q.name, "ack", e)
					}
				}
				break
			}
			tk.onError("ack", err)
			if attempt >= 6 {
				break // the leases will expire and the tasks come back
			}
			// Retried after the ShutdownTimeout too (ctx is then
			// cancelled): 6 attempts of 5 s at most bound it.
			time.Sleep(tk.reconnectDelay(attempt))
		}
	}
}

// flushHistory writes the history counts held, with a bounded ctx of its
// own (ctx ends at the ShutdownTimeout, before the last write).
func (tk *taker) flushHistory(ctx context.Context) {
	hctx, cancel := completionCtx(ctx)
	defer cancel()
	if err := tk.hist.flush(hctx, tk.q); err != nil {
		tk.onError("history", err)
	}
}

// drain appends what is queued on acks, up to most in all.
func drain(acks <-chan leaseRef, batch *[]leaseRef, most int) {
	for len(*batch) < most {
		select {
		case l := <-acks:
			*batch = append(*batch, l)
		default:
			return
		}
	}
}
