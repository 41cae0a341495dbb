/**
 * `npm run bench:growth [-- --json] [-- --docs] [-- --rows 1000000,5000000] [-- --effects 100000]`: does
 * what the pipeline does on its hot path, and what an operator reads, cost more as the
 * delivered history grows? One local runtime, measured with 0 delivered rows in the outbox,
 * then with each row count of `--rows` seeded by SQL (rows an hour to six days old, inside the
 * seven days of retention, so no purge takes them), the last one beside `--effects` approvals
 * that went through the whole pipeline (their consumers' effects and inbox records). Seeded
 * rows count as already audited, and the turns start once the delivery audit has walked the
 * approvals: an audit's first walk over made-up history is not what history costs.
 *
 * At each size: one nudged approval to every consumer's effect (request to the last
 * inbox record PROCESSED, median of 20), each relay statement (median of 20, each sample the
 * mean of 10 runs back to back), and `GET /ops/status` and `GET /ops/events?limit=20` (median of
 * 20). Each size has a runtime (and a PostgreSQL) of its own, all seeded first and then measured
 * in turns, five samples of each figure at a time in a rotating order: a load from elsewhere on
 * the machine falls on every size alike, so the ratios hold on a busy machine where one size
 * after the other would compare quiet minutes with busy ones. The JSON line has the figures by
 * row count and `growthRatio`, the largest ratio of a figure at the largest size to the same
 * figure at 0 (goal: at most 1.5). `--docs` writes the result to bench/results/growth.json and
 * its table into docs/performance.md.
 */
import { rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { setTimeout as pause } from 'node:timers/promises';
import { consumerNames, topology } from '../functions/topology';
import { type Runtime, startRuntime } from '../infra/local/runtime';
import { DeliveryAuditStore } from '../shared/audit/audit-store';
import { taskCounts } from '../shared/ops/ops-queries';
import { OutboxStore } from '../shared/outbox/outbox-store';
import { RelayLeaseStore } from '../shared/outbox/relay-lease';
import type { ConsumerName } from '../shared/topology';
import { seedPending } from '../test/support/outbox-fixtures';
import { fullStatus, pipelineClient, tempDataDir } from '../test/support/pipeline-client';
import { waitFor } from '../test/support/wait-for';
import { isMain, progress, writeBenchDocs } from './support/cli';
import { type GrowthFigures, type GrowthResult, growthMarkdown } from './support/growth-report';
import { median, round } from './support/stats';

/** Samples of each figure at one size, in milliseconds. */
type GrowthSamples = Record<string, number[]>;

/** The consumers each approval reaches: every one the registry subscribes to content.approved. */
const approvedConsumers = topology.registry
  .filter((c) => c.subscribes.includes(topology.eventTypes.approved))
  .map((c) => c.name as ConsumerName);

const samples = 20;
const runsPerSample = 10;
/** Samples of each figure a size gives in its turn; 20 / 5 = 4 turns per size. */
const samplesPerTurn = 5;

/**
 * Seeds delivered rows by SQL up to `total`, in statements of a quarter million, as a history
 * the delivery audit has already walked: each statement moves the audit's cursor past its rows
 * (and counts them audited). Seeded rows have no inbox records, so an audit walking them would
 * find every one missing, and walk 5 million rows at 100,000 a run: a first run's catch-up
 * over a history it never saw, not what the pipeline costs once it keeps pace. In the first
 * full run that walk was still going through the largest size's first three turns (its nudged
 * approval 129, 128, 141 ms, then 47 in the fourth).
 */
export async function seedDelivered(runtime: Runtime, from: number, total: number): Promise<void> {
  const chunk = 250_000;
  for (let done = from; done < total; done += chunk) {
    const n = Math.min(chunk, total - done);
    progress(`growth: seeding delivered rows ${done + n} of ${total} (${new Date().toISOString()})`);
    await runtime.db.query(
      `WITH t AS (SELECT g, gen_random_uuid() AS id,
                         now() - interval '1 hour' - make_interval(secs => random() * 5 * 86400) AS at
                    FROM generate_series(1, :n) AS g),
            ins AS (
       INSERT INTO outbox (event_id, event_type, aggregate_id, aggregate_version, payload, status,
                           created_at, next_attempt_at, attempts, delivered_at, bus_event_id)
       SELECT gen_random_uuid(), 'content.approved', t.id, 2,
              jsonb_build_object('taskId', t.id, 'version', 2, 'title', 'seeded task ' || t.g, 'assignee', 'ana',
                                 'reviewer', 'rita', 'approvedAt', to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
              'delivered', t.at, t.at, 1, t.at + interval '50 milliseconds', gen_random_uuid()::text
         FROM t
       RETURNING delivered_at, event_id),
            newest AS (
       SELECT at, id FROM (SELECT delivered_at AS at, event_id AS id FROM ins
                           UNION ALL
                           SELECT cursor_delivered_at, cursor_event_id FROM delivery_audit
                            WHERE cursor_delivered_at IS NOT NULL) AS c
        ORDER BY at DESC, id DESC LIMIT 1)
       UPDATE delivery_audit AS d
          SET cursor_delivered_at = newest.at, cursor_event_id = newest.id,
              audited = d.audited + (SELECT count(*) FROM ins)
         FROM newest`,
      { n },
    );
  }
  await runtime.db.query('VACUUM ANALYZE outbox');
}

/** Approves `count` tasks through the API, as fast as the runtime takes them, and waits for every effect. */
async function runApprovals(runtime: Runtime, count: number): Promise<void> {
  const client = pipelineClient(runtime.url);
  const { rows } = await runtime.db.query<{ task_id: string }>(
    `INSERT INTO tasks (task_id, title, assignee)
     SELECT gen_random_uuid(), 'effects task ' || g, 'ana' FROM generate_series(1, :count) AS g
     RETURNING task_id`,
    { count },
  );
  const ids = rows.map((r) => r.task_id);
  const before = fullStatus(await runtime.status());
  // Twenty approvals in flight at a time: two hundred at once left some unanswered for a minute
  // on a busy machine, the runtime sharing this process's event loop.
  let next = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++] as string;
      if (next % 1_000 === 0) progress(`growth: approving ${next} of ${count} (effects)`);
      const res = await client.call('POST', `/tasks/${id}/approve`, {});
      if (res.status !== 200) throw new Error(`approve answered ${res.status}: ${JSON.stringify(res.body)}`);
    }
  };
  await Promise.all(Array.from({ length: 20 }, worker));
  await waitFor(
    async () => fullStatus(await runtime.status()),
    (s) =>
      approvedConsumers.every(
        (c) => (s.consumers[c]?.processed ?? 0) >= (before.consumers[c]?.processed ?? 0) + count,
      ),
    // The pipeline's own pace decides this: a bound, not a measurement.
    { timeoutMs: 3_600_000, intervalMs: 2_000, what: `${count} approvals' effects` },
  );
}

/**
 * Waits until the delivery audit has walked every row delivered so far (the approvals' rows,
 * once past its grace period), so that its catch-up over the burst of approvals is not in the
 * turns: once it keeps pace, a run walks only what was delivered since the last.
 */
export async function auditCaughtUp(runtime: Runtime): Promise<void> {
  const { rows } = await runtime.db.query<{ at: string }>(
    `SELECT max(delivered_at)::text AS at FROM outbox WHERE status = 'delivered'`,
  );
  const newest = rows[0]?.at;
  if (!newest) return;
  progress(
    `growth: waiting for the delivery audit to walk the approvals (past its ${topology.audit.graceSeconds} s grace)`,
  );
  await waitFor(
    async () => {
      await runtime.audit.run();
      const { rows: done } = await runtime.db.query<{ walked: boolean }>(
        'SELECT coalesce(cursor_delivered_at >= :newest::timestamptz, false) AS walked FROM delivery_audit',
        { newest },
      );
      return done[0]?.walked === true;
    },
    (walked) => walked,
    // The grace period decides this: a bound, not a measurement.
    { timeoutMs: 1_800_000, intervalMs: 5_000, what: 'the delivery audit to walk the approvals' },
  );
}

/** Request -> every consumer PROCESSED, for `n` approvals one after the other. */
async function approvalToEffects(runtime: Runtime, n: number): Promise<number[]> {
  const client = pipelineClient(runtime.url);
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const created = await client.call<{ taskId: string }>('POST', '/tasks', {
      title: `growth ${i}`,
      assignee: 'ana',
    });
    const sent = Date.now();
    const approved = await client.call<{ eventId: string }>(
      'POST',
      `/tasks/${created.body.taskId}/approve`,
      {},
    );
    const eventId = approved.body.eventId;
    const records = await waitFor(
      () =>
        Promise.all(approvedConsumers.map((consumer) => runtime.consumers.inbox.get({ consumer, eventId }))),
      (rs) => rs.every((r) => r?.status === 'PROCESSED'),
      // Polled (the consumers are another part of this process's runtime): 5 ms between reads.
      { timeoutMs: 120_000, intervalMs: 5, what: `approval ${i}'s effects` },
    );
    times.push(Math.max(...records.map((r) => r?.updatedAt ?? Number.NaN)) - sent);
  }
  return times;
}

/** Runs `fn` and returns how long it took, in ms. */
async function clocked(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/**
 * Each statement of the relay's path and of the ops status's outbox figures, on the outbox as
 * it is now: `n` samples, each the mean of `runsPerSample` cycles of 50 rows committed,
 * claimed, half marked delivered, a quarter failed, a quarter released, the rest delivered
 * (untimed), so every cycle starts from the same outbox.
 */
async function relayStatements(runtime: Runtime, n: number): Promise<GrowthSamples> {
  // The runtime's relay is idle (only its hourly sweep would run): the statements run alone.
  const outbox = new OutboxStore(runtime.db);
  const lease = new RelayLeaseStore(runtime.db);
  const s = topology.relay;
  const limits = {
    rows: 50,
    leaseSeconds: s.leaseSeconds,
    bytes: s.claimBytes,
    maxUnsettledClaims: s.maxUnsettledClaims,
  };
  const names = [
    'claim',
    'markDelivered',
    'markFailed',
    'release',
    'stats',
    'purge',
    'leaseAcquireRelease',
    'writersInFlight',
    'deliveredCount',
  ] as const;
  const sampled = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<
    (typeof names)[number],
    number[]
  >;
  for (let i = 0; i < n; i++) {
    const sum = Object.fromEntries(names.map((n) => [n, 0])) as Record<(typeof names)[number], number>;
    for (let r = 0; r < runsPerSample; r++) {
      await seedPending(runtime.db, 50);
      let claimed: Awaited<ReturnType<OutboxStore['claim']>>['claimed'] = [];
      sum.claim += await clocked(async () => {
        claimed = (await outbox.claim('growth', limits)).claimed;
      });
      const [half, quarter, rest] = [claimed.slice(0, 25), claimed.slice(25, 37), claimed.slice(37)];
      sum.markDelivered += await clocked(() =>
        outbox.markDelivered(half.map((c) => ({ eventId: c.eventId, busEventId: 'growth' }))),
      );
      sum.markFailed += await clocked(() =>
        outbox.markFailed(
          'growth',
          quarter.map((c) => ({ ...c, error: 'growth', dead: false, retryInMs: 0 })),
        ),
      );
      sum.release += await clocked(() => outbox.release('growth', rest));
      sum.stats += await clocked(() => outbox.stats());
      sum.purge += await clocked(() => outbox.purgeDelivered(s.purge.retentionHours, s.purge.batchSize));
      sum.leaseAcquireRelease += await clocked(async () => {
        const slot = await lease.acquire('growth', 'primary', s.runLeaseSeconds, s.maxRuns);
        if (slot !== null) await lease.release('growth', slot);
      });
      sum.writersInFlight += await clocked(() => lease.writersInFlight());
      sum.deliveredCount += await clocked(() => outbox.deliveredCount());
      await runtime.db.query(
        "UPDATE outbox SET status = 'delivered', delivered_at = now(), lease_until = NULL WHERE status = 'pending'",
      );
    }
    for (const n of names) sampled[n].push(sum[n] / runsPerSample);
  }
  return sampled;
}

async function opsReads(runtime: Runtime, n: number): Promise<GrowthSamples> {
  const time = async (path: string) => {
    const sampled: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      const res = await fetch(`${runtime.url}${path}`);
      await res.text();
      if (!res.ok) throw new Error(`${path} answered ${res.status}`);
      sampled.push(performance.now() - started);
    }
    return sampled;
  };
  return {
    opsStatus: await time('/ops/status'),
    opsEvents: await time('/ops/events?limit=20'),
    ...(await statusParts(runtime, n)),
  };
}

/**
 * Each source `GET /ops/status` reads (shared/ops/ops-status.ts), timed alone: when the status
 * grows with history, these say which read does.
 */
async function statusParts(runtime: Runtime, n: number): Promise<GrowthSamples> {
  const outbox = new OutboxStore(runtime.db);
  const audits = new DeliveryAuditStore(runtime.db);
  const { inbox } = runtime.consumers;
  const parts: Record<string, () => Promise<unknown>> = {
    statusTasks: () => taskCounts(runtime.db),
    statusOutbox: () => Promise.all([outbox.stats(), outbox.deliveredCount()]),
    statusInbox: () => Promise.all(consumerNames.map((c) => inbox.openFigures(c))),
    statusProcessed: () => Promise.all(consumerNames.map((c) => runtime.consumers.processedCount(c))),
    statusEffects: () => runtime.consumers.effectCounts(),
    statusAudit: () =>
      Promise.all([audits.undeliveredCounts(consumerNames), audits.state(topology.audit.graceSeconds)]),
  };
  const sampled: GrowthSamples = Object.fromEntries(Object.keys(parts).map((name) => [name, []]));
  for (let i = 0; i < n; i++) {
    for (const [name, read] of Object.entries(parts)) sampled[name]?.push(await clocked(read));
  }
  return sampled;
}

/** One turn of a size: `n` samples of every figure. */
async function measureAt(runtime: Runtime, label: string, n: number): Promise<GrowthSamples> {
  progress(`growth: ${label}: a nudged approval to every effect`);
  const approval = await approvalToEffects(runtime, n);
  // Nothing left for the relay: the statements below run on an idle outbox.
  await waitFor(
    () => runtime.db.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE status = 'pending'"),
    ({ rows }) => rows[0]?.n === 0,
    { timeoutMs: 120_000, intervalMs: 50, what: 'the relay idle' },
  );
  await pause(100);
  progress(`growth: ${label}: relay statements`);
  const statements = await relayStatements(runtime, n);
  progress(`growth: ${label}: ops reads`);
  const ops = await opsReads(runtime, n);
  const figures = { approvalToEffects: approval, ...statements, ...ops };
  progress(
    `growth: ${label}: ${JSON.stringify(Object.fromEntries(Object.entries(figures).map(([k, v]) => [k, round(median(v), 2)])))}`,
  );
  return figures;
}

export async function measureGrowth(options: {
  rows: readonly number[];
  effects: number;
}): Promise<GrowthResult> {
  const loadAtStart = loadavg()[0] ?? 0;
  const sizes = [0, ...[...options.rows].sort((a, b) => a - b)];
  const largestSize = sizes.at(-1) ?? 0;
  const sites: { size: number; label: string; runtime: Runtime; dir: string }[] = [];
  try {
    for (const size of sizes) {
      const dir = tempDataDir('pipeline-growth-');
      const runtime = await startRuntime({ dataDir: dir, port: 0, log: () => {} });
      const last = size === largestSize && size > 0;
      sites.push({
        size,
        label: `${size} rows${last && options.effects > 0 ? ` and ${options.effects} approvals' effects` : ''}`,
        runtime,
        dir,
      });
    }
    // Each size seeds its own database, side by side.
    await Promise.all(
      sites.map(async ({ size, runtime }) => {
        const last = size === largestSize && size > 0;
        // The effects' approvals add delivered rows too: the largest size counts them.
        const seeded = last ? Math.max(0, size - options.effects) : size;
        if (seeded > 0) await seedDelivered(runtime, 0, seeded);
        if (last && options.effects > 0) {
          await runApprovals(runtime, options.effects);
          await auditCaughtUp(runtime);
          // Settled as the seeded sizes are (their seeding ends with the same): an autovacuum
          // of the approvals' updates would otherwise fall into this size's turns only.
          await runtime.db.query('VACUUM ANALYZE');
        }
      }),
    );
    const collected = new Map<number, GrowthSamples>(sizes.map((size) => [size, {}]));
    const turns = Math.ceil(samples / samplesPerTurn);
    for (let turn = 0; turn < turns; turn++) {
      // A rotating order: no size always goes first (or right after the effects' approvals).
      for (let k = 0; k < sites.length; k++) {
        const site = sites[(turn + k) % sites.length] as (typeof sites)[number];
        const got = await measureAt(
          site.runtime,
          `${site.label}, turn ${turn + 1} of ${turns}`,
          samplesPerTurn,
        );
        const into = collected.get(site.size) as GrowthSamples;
        for (const [name, values] of Object.entries(got)) into[name] = [...(into[name] ?? []), ...values];
      }
    }
    const medians = (keep: (name: string) => boolean): Record<string, GrowthFigures> =>
      Object.fromEntries(
        sizes.map((size) => [
          size,
          Object.fromEntries(
            Object.entries(collected.get(size) ?? {})
              .filter(([k]) => keep(k))
              .map(([k, v]) => [k, median(v)]),
          ),
        ]),
      );
    const rows = medians((name) => !name.startsWith('status'));
    const sources = medians((name) => name.startsWith('status'));
    const largest = rows[largestSize] ?? {};
    let growthRatio = 0;
    let growthRatioOf = '';
    for (const [name, value] of Object.entries(largest)) {
      const base = rows[0]?.[name] ?? Number.NaN;
      const ratio = value / base;
      if (ratio > growthRatio) {
        growthRatio = ratio;
        growthRatioOf = name;
      }
    }
    const rounded = (by: Record<string, GrowthFigures>) =>
      Object.fromEntries(
        Object.entries(by).map(([n, f]) => [
          n,
          Object.fromEntries(Object.entries(f).map(([k, v]) => [k, round(v, 3)])),
        ]),
      );
    return {
      rows: rounded(rows),
      statusSources: rounded(sources),
      effects: options.effects,
      growthRatio: round(growthRatio, 2),
      growthRatioOf,
      measuredAt: new Date().toISOString(),
      machine: {
        node: process.versions.node,
        cores: cpus().length,
        load1: [round(loadAtStart, 1), round(loadavg()[0] ?? 0, 1)],
      },
    };
  } finally {
    for (const site of sites) {
      await site.runtime.stop();
      rmSync(site.dir, { recursive: true, force: true });
    }
  }
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const listArg = (name: string, fallback: number[]) => {
    const at = args.indexOf(name);
    return at < 0
      ? fallback
      : String(args[at + 1])
          .split(',')
          .map(Number);
  };
  const rows = listArg('--rows', [1_000_000, 5_000_000]);
  const effects = listArg('--effects', [100_000])[0] ?? 100_000;
  let finished = false;
  // A measurement whose event loop ran dry (every handle closed, a promise never settled) would
  // end the process with 0 and print nothing: say so and fail instead.
  process.on('exit', () => {
    if (finished) return;
    console.error('growth: the process ended before the measurement finished');
    process.exitCode = 1;
  });
  measureGrowth({ rows, effects })
    .then((result) => {
      finished = true;
      if (args.includes('--json')) console.log(JSON.stringify(result));
      else console.log(JSON.stringify(result, null, 2));
      if (args.includes('--docs')) {
        writeBenchDocs('growth.json', result, 'docs/performance.md', 'growth', growthMarkdown(result));
      }
    })
    .catch((err) => {
      finished = true;
      console.error(err);
      process.exitCode = 1;
    });
}
