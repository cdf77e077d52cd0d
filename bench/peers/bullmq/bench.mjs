// bench.mjs: the BullMQ side of bench/peers. bench/peers (Go) runs one
// workload per process:
//
//   node bench.mjs '<json>'
//
// with {redis, prefix, queue, run, phase, first, n, rate, durationMs, leadMs,
// waitMs, concurrency, removeOnComplete}, and reads one JSON object from
// stdout. phase is
//
//   burst:  a Worker runs; n jobs due at one instant leadMs ahead are
//           added with addBulk (1,000 a call);
//   steady: a Worker runs; jobs are added one add() each at rate/s for
//           durationMs, each due leadMs after its add;
//   fill:   n jobs due in an hour, added with addBulk, no worker (the Go
//           side reads INFO used_memory around this process).
//
// Each job carries its number and its intended due time (ms since the Unix
// epoch, fractional); the handler is a no-op that records
// [number, lateness µs, handled at µs since the Unix epoch] for the Go side,
// which checks every number was handled once. Keys are all under prefix.
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const cfg = JSON.parse(process.argv[2]);
const nowMs = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function connection() {
  // Workers need maxRetriesPerRequest: null (BullMQ's production guide).
  return new IORedis(cfg.redis, { maxRetriesPerRequest: null });
}

function jobOpts(key, dueMs) {
  const ts = Date.now();
  return { jobId: key, timestamp: ts, delay: Math.max(0, Math.ceil(dueMs) - ts) };
}

function businessKey(n) {
  return `order:${cfg.run}:${String(n).padStart(12, '0')}`;
}

const queueOpts = { connection: connection(), prefix: cfg.prefix };
if (cfg.removeOnComplete) {
  queueOpts.defaultJobOptions = { removeOnComplete: true, removeOnFail: true };
}
const queue = new Queue(cfg.queue, queueOpts);
await queue.waitUntilReady();

const handled = [];
let want = 0;
let done = null;
const allDone = new Promise((r) => { done = r; });

function startWorker() {
  const opts = { connection: connection(), prefix: cfg.prefix, concurrency: cfg.concurrency };
  const w = new Worker(cfg.queue, async (job) => {
    const at = nowMs();
    handled.push([job.data.n, Math.round((at - job.data.due) * 1000), Math.round(at * 1000)]);
    if (handled.length === want) done();
  }, opts);
  w.on('error', (err) => process.stderr.write(`bullmq worker: ${err}\n`));
  return w;
}

async function waitAll(deadlineMs) {
  await Promise.race([allDone, sleep(Math.max(0, deadlineMs - nowMs()))]);
}

const out = { enqueued: 0 };
if (cfg.phase === 'burst') {
  want = cfg.n;
  const w = startWorker();
  await w.waitUntilReady();
  const t0 = nowMs();
  const due = Math.ceil(t0 + cfg.leadMs);
  for (let i = 0; i < cfg.n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(cfg.n, i + 1000); j++) {
      const n = cfg.first + j;
      jobs.push({ name: 'noop', data: { n, due }, opts: jobOpts(businessKey(n), due) });
    }
    await queue.addBulk(jobs);
    out.enqueued += jobs.length;
  }
  out.enqueueUs = Math.round((nowMs() - t0) * 1000);
  out.enqueueLate = nowMs() > due;
  await waitAll(Math.max(due, nowMs()) + cfg.waitMs);
  await w.close();
} else if (cfg.phase === 'steady') {
  want = Math.round(cfg.rate * cfg.durationMs / 1000);
  const w = startWorker();
  await w.waitUntilReady();
  const interval = 1000 / cfg.rate;
  const t0 = nowMs();
  const pending = [];
  for (let i = 0; i < want; i++) {
    const wait = t0 + i * interval - nowMs();
    if (wait >= 1) await sleep(wait);
    const n = cfg.first + i;
    const due = nowMs() + cfg.leadMs;
    // Not awaited one by one: the producer keeps its pace and the adds
    // pipeline on the connection, as a busy Node service's would.
    pending.push(queue.add('noop', { n, due }, jobOpts(businessKey(n), due)));
  }
  await Promise.all(pending);
  out.enqueued = want;
  out.offeredRate = want / ((nowMs() - t0) / 1000);
  await waitAll(nowMs() + cfg.leadMs + cfg.waitMs);
  await w.close();
} else if (cfg.phase === 'fill') {
  const due = nowMs() + 3600e3;
  for (let i = 0; i < cfg.n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(cfg.n, i + 1000); j++) {
      jobs.push({ name: 'noop', data: { n: cfg.first + j, due }, opts: jobOpts(businessKey(cfg.first + j), due) });
    }
    await queue.addBulk(jobs);
    out.enqueued += jobs.length;
  }
} else {
  throw new Error(`unknown phase ${cfg.phase}`);
}
await queue.close();
out.handled = handled;
// A pipe's write is asynchronous: exit only once it is flushed.
process.stdout.write(JSON.stringify(out), () => process.exit(0));
