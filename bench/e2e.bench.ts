/**
 * `npm run bench:e2e [-- --json] [-- --approvals N] [-- --rate R]`: runs the whole local
 * pipeline in this process, approves N tasks (default 1,000) at a steady R per second (default
 * 20), and measures, per approval, commit -> all three consumers processed: from the outbox
 * row's commit-time stamp to the latest of the three inbox records' PROCESSED time. Twice: with
 * the nudge after each approve, and with the relay's schedule alone. `bench/run.ts` also runs it
 * at other rates and under the AWS-like latency profile. A benchmark, not a test.
 */
import { rmSync } from 'node:fs';
import { type Runtime, startRuntime } from '../infra/local/runtime';
import { pipelineClient, tempDataDir } from '../test/support/pipeline-client';
import { waitFor } from '../test/support/wait-for';
import { installAwsLatency, latencySamplers } from './support/aws-latency';
import { isMain, numberArg, progress } from './support/cli';
import { round, summarize } from './support/stats';

export interface E2eOptions {
  readonly approvals: number;
  /** Approvals per second, started on a steady schedule whatever the answers take. */
  readonly rate: number;
  /** Nudge the relay after each approve; without, the sweep alone delivers. */
  readonly nudge: boolean;
  /** The sweep period without the nudge. @default 60,000 (prod's one minute, not the sandbox's hour) */
  readonly sweepMs?: number;
  /** Put the AWS-like latency profile on every Data API and PutEvents call. */
  readonly awsLatency?: boolean;
  /** How long the consumers may take to catch up before the run is abandoned. */
  readonly timeoutMs?: number;
}

/** Every approval's commit -> all consumers processed, in milliseconds, ascending. */
export async function measureE2e(options: E2eOptions): Promise<number[]> {
  const { approvals, rate, nudge } = options;
  const label = `e2e ${rate}/s${nudge ? '' : ' schedule only'}${options.awsLatency ? ' aws profile' : ''}`;
  const dir = tempDataDir('pipeline-bench-');
  let runtime: Runtime | undefined;
  let uninstall: (() => void) | undefined;
  try {
    runtime = await startRuntime({
      dataDir: dir,
      port: 0,
      nudge,
      ...(nudge ? {} : { sweepMs: options.sweepMs ?? 60_000 }),
    });
    if (options.awsLatency) uninstall = installAwsLatency(latencySamplers());
    const client = pipelineClient(runtime.url);
    progress(`${label}: creating ${approvals} tasks`);
    const ids: string[] = [];
    for (let i = 0; i < approvals; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, approvals - i) }, (_, j) =>
          client.call<{ taskId: string }>('POST', '/tasks', { title: `bench ${i + j}`, assignee: 'ana' }),
        ),
      );
      ids.push(...batch.map((r) => r.body.taskId));
    }
    progress(`${label}: approving ${approvals} at ${rate}/s`);
    const inFlight: Promise<unknown>[] = [];
    const started = Date.now();
    for (let i = 0; i < ids.length; i++) {
      const due = started + (i * 1_000) / rate;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      inFlight.push(client.call('POST', `/tasks/${ids[i]}/approve`, { approvedBy: 'rita' }));
    }
    await Promise.all(inFlight);
    await waitFor(
      client.status,
      (s) =>
        (s.consumers.index.processed ?? 0) >= approvals &&
        (s.consumers.notify.processed ?? 0) >= approvals &&
        (s.consumers.archive.processed ?? 0) >= approvals,
      {
        timeoutMs: options.timeoutMs ?? 300_000,
        intervalMs: 500,
        what: `${label}: every consumer processed`,
      },
    );
    uninstall?.();
    uninstall = undefined;
    const { rows } = await runtime.db.query<{ event_id: string; created_at: Date }>(
      'SELECT event_id, created_at FROM outbox',
    );
    const latencies: number[] = [];
    for (const row of rows) {
      const records = await Promise.all(
        (['index', 'notify', 'archive'] as const).map((consumer) =>
          runtime?.consumers.inbox.get({ consumer, eventId: row.event_id }),
        ),
      );
      const done = records.map((r) => r?.updatedAt ?? Number.NaN);
      latencies.push(Math.max(...done) - row.created_at.getTime());
    }
    const sorted = latencies.sort((a, b) => a - b);
    const s = summarize(sorted);
    progress(`${label}: p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms, p99 ${s.p99Ms} ms`);
    return sorted;
  } finally {
    uninstall?.();
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const args = process.argv.slice(2);
  const approvals = numberArg(args, '--approvals', 1_000);
  const rate = numberArg(args, '--rate', 20);
  (async () => {
    const nudged = await measureE2e({ approvals, rate, nudge: true });
    const scheduled = await measureE2e({ approvals, rate, nudge: false });
    const result = { approvals, ...summarize(nudged), p99NoNudgeMs: summarize(scheduled).p99Ms };
    if (args.includes('--json')) console.log(JSON.stringify(result));
    else {
      console.log(result);
      const s = summarize(scheduled);
      console.log(
        `schedule only: p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms; approvals at ${rate}/s, ${round(approvals / rate, 1)} s`,
      );
    }
  })().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
