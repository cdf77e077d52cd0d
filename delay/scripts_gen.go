// Code generated from delay/internal/luacompose.Scripts by `go generate ./delay`; DO NOT EDIT.

package delay

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// scriptEnqueueBatch runs lua/gen/enqueue_batch.lua, composed from
// lua/enqueue_batch.lua: the multi-job enqueue that EnqueueBatch
// pipelines (and that Sharded loads before its pipelines).
var scriptEnqueueBatch = redis.NewScript(luaEnqueueBatch)

//go:embed lua/gen/enqueue_batch.lua
var luaEnqueueBatch string

// scriptEnqueue runs lua/gen/enqueue.lua, composed from
// lua/enqueue.lua: the leaner one-job enqueue behind Enqueue, which
// costs the server less per call than a one-job batch (its Lua sets up
// fewer tables and closures).
var scriptEnqueue = redis.NewScript(luaEnqueue)

//go:embed lua/gen/enqueue.lua
var luaEnqueue string

// scriptTake runs lua/gen/take.lua, composed from lua/take.lua.
var scriptTake = redis.NewScript(luaTake)

//go:embed lua/gen/take.lua
var luaTake string

// scriptAck runs lua/gen/ack.lua, composed from lua/ack.lua.
var scriptAck = redis.NewScript(luaAck)

//go:embed lua/gen/ack.lua
var luaAck string

// scriptAckDone runs lua/gen/ack_done.lua, composed from
// lua/ack_done.lua.
var scriptAckDone = redis.NewScript(luaAckDone)

//go:embed lua/gen/ack_done.lua
var luaAckDone string

// scriptRelease runs lua/gen/release.lua, composed from
// lua/release.lua.
var scriptRelease = redis.NewScript(luaRelease)

//go:embed lua/gen/release.lua
var luaRelease string

// scriptRetry runs lua/gen/retry.lua, composed from lua/retry.lua.
var scriptRetry = redis.NewScript(luaRetry)

//go:embed lua/gen/retry.lua
var luaRetry string

// scriptKill runs lua/gen/kill.lua, composed from lua/kill.lua.
var scriptKill = redis.NewScript(luaKill)

//go:embed lua/gen/kill.lua
var luaKill string

// scriptExtend runs lua/gen/extend.lua, composed from lua/extend.lua.
var scriptExtend = redis.NewScript(luaExtend)

//go:embed lua/gen/extend.lua
var luaExtend string

// scriptSweep runs lua/gen/sweep.lua, composed from lua/sweep.lua.
var scriptSweep = redis.NewScript(luaSweep)

//go:embed lua/gen/sweep.lua
var luaSweep string

// scriptCancel runs lua/gen/cancel.lua, composed from lua/cancel.lua.
var scriptCancel = redis.NewScript(luaCancel)

//go:embed lua/gen/cancel.lua
var luaCancel string

// scriptReschedule runs lua/gen/reschedule.lua, composed from
// lua/reschedule.lua.
var scriptReschedule = redis.NewScript(luaReschedule)

//go:embed lua/gen/reschedule.lua
var luaReschedule string

// scriptCancelIds runs lua/gen/cancel_ids.lua, composed from
// lua/cancel_ids.lua.
var scriptCancelIds = redis.NewScript(luaCancelIds)

//go:embed lua/gen/cancel_ids.lua
var luaCancelIds string

// scriptRescheduleIds runs lua/gen/reschedule_ids.lua, composed from
// lua/reschedule_ids.lua.
var scriptRescheduleIds = redis.NewScript(luaRescheduleIds)

//go:embed lua/gen/reschedule_ids.lua
var luaRescheduleIds string

// scriptRequeue runs lua/gen/requeue.lua, composed from
// lua/requeue.lua.
var scriptRequeue = redis.NewScript(luaRequeue)

//go:embed lua/gen/requeue.lua
var luaRequeue string

// scriptPurge runs lua/gen/purge.lua, composed from lua/purge.lua.
var scriptPurge = redis.NewScript(luaPurge)

//go:embed lua/gen/purge.lua
var luaPurge string

// scriptRemove runs lua/gen/remove.lua, composed from lua/remove.lua.
var scriptRemove = redis.NewScript(luaRemove)

//go:embed lua/gen/remove.lua
var luaRemove string

// scriptRepair runs lua/gen/repair.lua, composed from lua/repair.lua.
var scriptRepair = redis.NewScript(luaRepair)

//go:embed lua/gen/repair.lua
var luaRepair string

// scriptPause runs lua/gen/pause.lua, composed from lua/pause.lua.
var scriptPause = redis.NewScript(luaPause)

//go:embed lua/gen/pause.lua
var luaPause string

// scriptRate runs lua/gen/rate.lua, composed from lua/rate.lua.
var scriptRate = redis.NewScript(luaRate)

//go:embed lua/gen/rate.lua
var luaRate string

// scriptStats runs lua/gen/stats.lua, composed from lua/stats.lua.
var scriptStats = redis.NewScript(luaStats)

//go:embed lua/gen/stats.lua
var luaStats string

// scriptLookup runs lua/gen/lookup.lua, composed from lua/lookup.lua.
var scriptLookup = redis.NewScript(luaLookup)

//go:embed lua/gen/lookup.lua
var luaLookup string

// scriptEnqueueTick runs lua/gen/enqueue_tick.lua, composed from
// lua/enqueue_tick.lua: one tick of a periodic job: the one-job enqueue
// behind the job's guard, so that a tick makes at most one task ever.
var scriptEnqueueTick = redis.NewScript(luaEnqueueTick)

//go:embed lua/gen/enqueue_tick.lua
var luaEnqueueTick string

// scriptRegistry runs lua/gen/registry.lua, composed from
// lua/registry.lua: a pool's heartbeat in the worker registry, claiming
// its ID with an owner token.
var scriptRegistry = redis.NewScript(luaRegistry)

//go:embed lua/gen/registry.lua
var luaRegistry string

// scriptUnregister runs lua/gen/unregister.lua, composed from
// lua/unregister.lua.
var scriptUnregister = redis.NewScript(luaUnregister)

//go:embed lua/gen/unregister.lua
var luaUnregister string

// scriptWorkers runs lua/gen/workers.lua, composed from
// lua/workers.lua.
var scriptWorkers = redis.NewScript(luaWorkers)

//go:embed lua/gen/workers.lua
var luaWorkers string

// scripts is every script the package runs, by the name of its body in
// lua/, in the order of luacompose.Scripts.
var scripts = [...]struct {
	name   string
	script *redis.Script
}{
	{"enqueue_batch", scriptEnqueueBatch},
	{"enqueue", scriptEnqueue},
	{"take", scriptTake},
	{"ack", scriptAck},
	{"ack_done", scriptAckDone},
	{"release", scriptRelease},
	{"retry", scriptRetry},
	{"kill", scriptKill},
	{"extend", scriptExtend},
	{"sweep", scriptSweep},
	{"cancel", scriptCancel},
	{"reschedule", scriptReschedule},
	{"cancel_ids", scriptCancelIds},
	{"reschedule_ids", scriptRescheduleIds},
	{"requeue", scriptRequeue},
	{"purge", scriptPurge},
	{"remove", scriptRemove},
	{"repair", scriptRepair},
	{"pause", scriptPause},
	{"rate", scriptRate},
	{"stats", scriptStats},
	{"lookup", scriptLookup},
	{"enqueue_tick", scriptEnqueueTick},
	{"registry", scriptRegistry},
	{"unregister", scriptUnregister},
	{"workers", scriptWorkers},
}
