// Package prometheus exports tierset's metrics to Prometheus.
//
// [CacheCollector] is a [cache.Observer]: pass it as cache.Options.Observer
// and register it; register a [DelayCollector] and pass its
// [DelayCollector.Observer] as delay.Options.Observer, and a
// [PeriodicCollector] and its [PeriodicCollector.Observer] as
// periodic.Options.Observer. They count what this process saw. [QueueCollector] reads [delay.Queue.Stats] on each
// scrape: depths and the counters the queue's scripts keep in Redis, which
// cover every producer and worker of the queue, not just this process.
// A [BudgetCollector]'s [BudgetCollector.Observer] is a budget.Options.Observer:
// grants, refusals by cap and expired holds this process saw.
//
// The package is its own module so the core tierset module keeps its short
// dependency list; importing it is what pulls in client_golang.
//
// Metric names (namespace "tierset" unless Options.Namespace says otherwise).
// Every outcome, event, op and record label value of the cache series is
// created with the collector, so each reads 0 before its first event:
//
//	tierset_cache_lookups_total{outcome}              cart lines by outcome (hit, no_tier, not_found, not_active, error, damaged)
//	tierset_cache_lookup_duration_seconds              per line: the duration of the call it was part of
//	tierset_cache_promotion_hits_total{promotion}      hits per promotion, at most MaxPromotions values, then "other"
//	tierset_cache_round_trips_total{op}                round trips by call (match, gifts, refresh, delete, info, list);
//	                                                   a Match's gift reads count under gifts
//	tierset_cache_gift_fetches_total                   Cache.Gifts calls, and Match calls with Gifts, that went to Redis
//	tierset_cache_refreshes_total{outcome}             promotions refreshed (added, updated, unchanged, repaired, failed)
//	tierset_cache_refresh_duration_seconds             per Refresh call (the Loader's included)
//	tierset_cache_corrupt_reads_total{record}          bytes from Redis that failed to decode (member, gifts, meta)
//	tierset_cache_near_events_total{event}             near cache: hit, miss (per line), install, invalidate, evict, drop_all
//	tierset_cache_load_duration_seconds{outcome}       read-through loads (loaded, unknown, remembered, shared, failed):
//	                                                   the read's wait; _count is the loads by outcome
//	tierset_cache_warnings_total                       settings New accepted that an operator should fix
//	tierset_delay_enqueued_total{queue,result}         new or duplicate
//	tierset_delay_delivered_total{queue}, tierset_delay_acked_total{queue}
//	tierset_delay_retries_total{queue}, tierset_delay_dead_total{queue}
//	tierset_delay_sweep_returned_total{queue}, tierset_delay_sweep_dead_total{queue}
//	tierset_delay_errors_total{queue,op}
//	tierset_delay_losses_total{queue,kind}             lost state met (record_lost, due_lost: tasks; counter_lost, index_lost: repairs)
//	tierset_delay_warnings_total{queue,kind}           eviction_policy, config_unavailable, high_water, other
//	tierset_delay_lateness_seconds{queue}              this process's deliveries
//	tierset_delay_handle_seconds{queue,result}         this process's handler calls: ok, error, skip_retry, panic, shutdown
//	tierset_periodic_ticks_enqueued_total{queue,job}  ticks that made their task (each tick counted by one process)
//	tierset_periodic_ticks_missed_total{queue,job,reason}  ticks passed without a task: catchup, paused
//	tierset_queue_up{queue}                            1 when the last Health read worked
//	tierset_queue_workers{queue}                       live worker pools serving the queue
//	tierset_queue_health{queue,verdict}                1 for the current verdict: idle, served, behind, no_worker, paused
//	tierset_queue_tasks{queue,state}                   scheduled, ready, in_flight, dead, done (no overlap: the sum is every task)
//	tierset_queue_oldest_due_age_seconds{queue}
//	tierset_queue_paused{queue}                        1 while paused (Queue.Pause)
//	tierset_queue_rate_limit_per_second{queue}         Queue.SetRate's limit; 0 when none
//	tierset_queue_high_water{queue}, tierset_queue_high_water_space{queue}  busiest millisecond's seqs, of the space
//	tierset_queue_delivered_total{queue} ... acked, retries, dead_lettered, expired, cancelled, corrupt
//	tierset_queue_seq_overflows_total{queue}           Stats.SeqOverflows: scores moved to a later millisecond
//	tierset_queue_lost_total{queue}                    Stats.Lost: task IDs without a record, moved to dead
//	tierset_queue_restored_total{queue}                Stats.Restored: records in no set put back in due by an enqueue
//	tierset_queue_id_repairs_total{queue}              Stats.CounterLost: task ID counter repairs
//	tierset_queue_index_lost_total{queue}              Stats.IndexLost: key index repairs
//	tierset_queue_lateness_seconds{queue}              the server-side histogram, its own bucket bounds, _sum a lower bound;
//	                                                   a delivery exactly 2^b ms late is under le=2^(b+1) ms
//	tierset_budget_grants_total{budget,promotion}      new holds, per line (BudgetCollector; MaxPromotions, then "other")
//	tierset_budget_refusals_total{budget,promotion,cap}  reservations refused by a cap (Cap.String, or "per cart")
//	tierset_budget_holds_expired_total{budget}         holds that ended unpaid (Expire's first report)
package prometheus
