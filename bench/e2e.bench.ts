/**
 * `npm run bench:e2e [-- --json] [-- --approvals N] [-- --rate R] [-- --no-model]`: runs the
 * whole local pipeline in this process and approves N tasks (default 1,000) at a steady R per
 * second (default 20).
 *
 * Locally (no model): per approval, commit -> every consumer of content.approved processed, from
 * the outbox row's commit-time stamp to the latest of their inbox records' PROCESSED time; with the
 * nudge after each approve, and with the relay's schedule alone.
 *
 * Under the latency model (bench/support/latency-model.ts), at 20 and 100 approvals/s: every
 * hop of the AWS path delayed at its seam (API Gateway, Lambda invokes and cold starts, each
 * Data API, DynamoDB, S3, SNS and PutEvents call, the relay nudge's Invoke and queue, EventBridge's
 * delivery), measured from the approve request's send to (a) the approve API's answer and
 * (b) the end of the last of the consumer invocations (each ends once its inbox record
 * is PROCESSED). The first two seconds of approvals warm the functions up and are left out of
 * the figures (the cold starts of that ramp are reported).
 *
 * `bench/run.ts` also runs it at other rates. A benchmark, not a test: nothing asserts.
 */

import { rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { topology } from '../functions/topology';
import { type Runtime, startRuntime } from '../infra/local/runtime';
import type { ConsumerName } from '../shared/topology';
import { pipelineClient, tempDataDir } from '../test/support/pipeline-client';
import { waitFor } from '../test/support/wait-for';
import { isMain, numberArg, progress } from './support/cli';
import { latencyGoals } from './support/latency-model';
import { HopDelays, latencySeams } from './support/latency-seams';
import { type SimulatedLatency, simulateLatency } from './support/latency-simulation';
import { type LatencySummary, round, summarize } from './support/stats';

/** The consumers each approval reaches: every one the registry subscribes to content.approved. */
const approvedConsumers = topology.registry
  .filter((c) => c.subscribes.includes(topology.eventTypes.approved))
  .map((c) => c.name as ConsumerName);

export interface E2eOptions {
  /** Approvals measured. */
  readonly approvals: number;
  /** Approvals per second, started on a steady schedule whatever the answers take. */
  readonly rate: number;
  /** Nudge the relay after each approve; without, the sweep alone delivers. */
  readonly nudge: boolean;
  /** The sweep period without the nudge. @default 60,000 (prod's one minute, not the sandbox's hour) */
  readonly sweepMs?: number;
  /** Delay every hop by the latency model (bench/support/latency-model.ts). */
  readonly model?: boolean;
  /** Approvals sent first at the same rate and left out of the figures. @default 2 s of the rate under the model, else 0 */
  readonly warmup?: number;
  /** How long the consumers may take to catch up before the run is abandoned. */
  readonly timeoutMs?: number;
}

/** One run's latencies (ms, ascending) over the measured approvals. */
export interface E2eRun {
  /** Commit -> every approved consumer's inbox record PROCESSED (local runs only; empty under the model). */
  readonly commitToProcessedMs: number[];
  /** The approve request's send -> its answer. */
  readonly approveMs: number[];
  /** The approve request's send -> the last of the consumers done. */
  readonly requestToEffectsMs: number[];
  /**
   * How late the process's event loop ran its callbacks while approving (p50, p99 ms): every
   * modeled wait is a timer, so this is what the machine's own load added to each of them.
   */
  readonly eventLoopDelayMs: { readonly p50: number; readonly p99: number };
  /** Under the model: environments started per function, in the whole run and after the warm-up. */
  readonly coldStarts?: Readonly<Record<string, { readonly total: number; readonly afterWarmup: number }>>;
}

interface Approval {
  readonly sentAt: number;
  answeredAt: number;
  eventId?: string;
}

/** Runs the pipeline once as `options` say and measures every approval. */
export async function measureE2e(options: E2eOptions): Promise<E2eRun> {
  const { approvals, rate, nudge } = options;
  const warmup = options.warmup ?? (options.model ? Math.round(rate * 2) : 0);
  const label = `e2e ${rate}/s${nudge ? '' : ' schedule only'}${options.model ? ' latency model' : ''}`;
  const dir = tempDataDir('pipeline-bench-');
  const delays = options.model ? new HopDelays() : undefined;
  const model = delays && latencySeams(delays);
  let runtime: Runtime | undefined;
  try {
    runtime = await startRuntime({
      dataDir: dir,
      port: 0,
      nudge,
      ...(nudge ? {} : { sweepMs: options.sweepMs ?? 60_000 }),
      ...(model ? { seams: model.seams } : {}),
    });
    const client = pipelineClient(runtime.url);
    const total = warmup + approvals;
    progress(`${label}: creating ${total} tasks`);
    if (delays) delays.active = false;
    const ids: string[] = [];
    for (let i = 0; i < total; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, total - i) }, (_, j) =>
          client.call<{ taskId: string }>('POST', '/tasks', { title: `bench ${i + j}`, assignee: 'ana' }),
        ),
      );
      ids.push(...batch.map((r) => r.body.taskId));
    }
    if (delays) delays.active = true;
    progress(`${label}: approving ${total} at ${rate}/s (${warmup} to warm up)`);
    const sent: Approval[] = [];
    const inFlight: Promise<unknown>[] = [];
    let createdAtWarmupEnd: Map<string, number> | undefined;
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const started = Date.now();
    for (let i = 0; i < ids.length; i++) {
      const due = started + (i * 1_000) / rate;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (i === warmup && model)
        createdAtWarmupEnd = new Map([...model.observed.containers].map(([n, p]) => [n, p.created]));
      const approval: Approval = { sentAt: Date.now(), answeredAt: Number.NaN };
      sent.push(approval);
      inFlight.push(
        client.call<{ eventId?: string }>('POST', `/tasks/${ids[i]}/approve`, {}).then((r) => {
          approval.answeredAt = Date.now();
          if (r.status !== 200) throw new Error(`approve answered ${r.status}: ${JSON.stringify(r.body)}`);
          approval.eventId = r.body.eventId;
        }),
      );
    }
    await Promise.all(inFlight);
    const waitOptions = {
      timeoutMs: options.timeoutMs ?? 300_000,
      intervalMs: 500,
      what: `${label}: every consumer processed`,
    };
    if (model) {
      // In-process, so that waiting costs the runtime nothing (GET /ops/status counts every effect).
      const allDone = () =>
        sent.filter(
          (a) => (model.observed.consumerDone.get(a.eventId ?? '')?.size ?? 0) === approvedConsumers.length,
        ).length;
      await waitFor(
        () => Promise.resolve(allDone()),
        (done) => done === total,
        waitOptions,
      );
    } else {
      await waitFor(
        client.status,
        (s) => approvedConsumers.every((c) => (s.consumers[c]?.processed ?? 0) >= total),
        waitOptions,
      );
    }
    loopDelay.disable();
    if (delays) delays.active = false;
    const measured = sent.slice(warmup);
    const approveMs = measured.map((a) => a.answeredAt - a.sentAt);
    const requestToEffectsMs: number[] = [];
    const commitToProcessedMs: number[] = [];
    if (model) {
      for (const a of measured) {
        const done = model.observed.consumerDone.get(a.eventId ?? '');
        if (!done || done.size < approvedConsumers.length)
          throw new Error(`${label}: event ${a.eventId} did not reach every consumer`);
        requestToEffectsMs.push(Math.max(...done.values()) - a.sentAt);
      }
    } else {
      const created = new Map(
        (
          await runtime.db.query<{ event_id: string; created_at: Date }>(
            'SELECT event_id, created_at FROM outbox',
          )
        ).rows.map((r) => [r.event_id, r.created_at.getTime()]),
      );
      for (const a of measured) {
        const eventId = a.eventId ?? '';
        const records = await Promise.all(
          approvedConsumers.map((consumer) => runtime?.consumers.inbox.get({ consumer, eventId })),
        );
        const processedAt = Math.max(...records.map((r) => r?.updatedAt ?? Number.NaN));
        commitToProcessedMs.push(processedAt - (created.get(eventId) ?? Number.NaN));
        requestToEffectsMs.push(processedAt - a.sentAt);
      }
    }
    const run: E2eRun = {
      commitToProcessedMs: ascending(commitToProcessedMs),
      approveMs: ascending(approveMs),
      requestToEffectsMs: ascending(requestToEffectsMs),
      eventLoopDelayMs: {
        p50: round(loopDelay.percentile(50) / 1e6, 1),
        p99: round(loopDelay.percentile(99) / 1e6, 1),
      },
      ...(model && {
        coldStarts: Object.fromEntries(
          [...model.observed.containers].map(([name, pool]) => [
            name,
            { total: pool.created, afterWarmup: pool.created - (createdAtWarmupEnd?.get(name) ?? 0) },
          ]),
        ),
      }),
    };
    const a = summarize(run.approveMs);
    const e = summarize(run.requestToEffectsMs);
    progress(
      `${label}: approve p50 ${a.p50Ms} ms, p99 ${a.p99Ms} ms; request -> all effects p50 ${e.p50Ms} ms, p99 ${e.p99Ms} ms; event loop delay p50 ${run.eventLoopDelayMs.p50} ms, p99 ${run.eventLoopDelayMs.p99} ms; load ${loadavg()[0]?.toFixed(1)}`,
    );
    return run;
  } finally {
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const ascending = (values: number[]) => values.sort((a, b) => a - b);

/** The model's figures at one rate, as the JSON line and the report carry them. */
export interface ModelFigures {
  readonly approveP50Ms: number;
  readonly approveP99Ms: number;
  readonly effectsP50Ms: number;
  readonly effectsP99Ms: number;
  readonly coldStarts: Readonly<Record<string, { readonly total: number; readonly afterWarmup: number }>>;
  readonly eventLoopDelayMs: { readonly p50: number; readonly p99: number };
}

/** The figures of one run under the model. */
export function modelFigures(run: E2eRun): ModelFigures {
  const a: LatencySummary = summarize(run.approveMs);
  const e: LatencySummary = summarize(run.requestToEffectsMs);
  return {
    approveP50Ms: a.p50Ms,
    approveP99Ms: a.p99Ms,
    effectsP50Ms: e.p50Ms,
    effectsP99Ms: e.p99Ms,
    coldStarts: run.coldStarts ?? {},
    eventLoopDelayMs: run.eventLoopDelayMs,
  };
}

/** The goals of the model judged on its runs at 20 and 100 approvals/s. */
export function judgeModel(
  at20: Pick<ModelFigures, 'approveP99Ms' | 'effectsP99Ms'>,
  at100: Pick<ModelFigures, 'approveP99Ms' | 'effectsP99Ms'>,
) {
  const bounds = latencyGoals();
  return {
    approveP99BoundMs: bounds.approveP99BoundMs,
    approveP99Met:
      at20.approveP99Ms <= bounds.approveP99BoundMs && at100.approveP99Ms <= bounds.approveP99BoundMs,
    effectsP99At100BoundMs: bounds.effectsP99At100BoundMs,
    effectsP99At100Met: at100.effectsP99Ms < bounds.effectsP99At100BoundMs,
  };
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const approvals = numberArg(args, '--approvals', 1_000);
  const rate = numberArg(args, '--rate', 20);
  (async () => {
    const nudged = await measureE2e({ approvals, rate, nudge: true });
    const scheduled = await measureE2e({ approvals, rate, nudge: false });
    const at20 = args.includes('--no-model')
      ? undefined
      : modelFigures(await measureE2e({ approvals, rate: 20, nudge: true, model: true }));
    const at100 = args.includes('--no-model')
      ? undefined
      : modelFigures(await measureE2e({ approvals, rate: 100, nudge: true, model: true }));
    // The same hops with no local runtime in the way: every function on cores of its own, as on AWS.
    const [sim20, sim100] = [20, 100].map((r) => simulateLatency({ approvals: r * 300, rate: r }));
    const result = {
      approvals,
      ...summarize(nudged.commitToProcessedMs),
      p99NoNudgeMs: summarize(scheduled.commitToProcessedMs).p99Ms,
      ...(at20 && at100 && { model: { '20': at20, '100': at100, goals: judgeModel(at20, at100) } }),
      simulated: {
        '20': sim20,
        '100': sim100,
        goals: judgeModel(sim20 as SimulatedLatency, sim100 as SimulatedLatency),
      },
    };
    if (args.includes('--json')) console.log(JSON.stringify(result));
    else {
      console.log(JSON.stringify(result, null, 2));
      const s = summarize(scheduled.commitToProcessedMs);
      console.log(
        `schedule only: p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms; approvals at ${rate}/s, ${round(approvals / rate, 1)} s`,
      );
    }
  })().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
