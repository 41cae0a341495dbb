/**
 * `npm run bench:e2e [-- --json] [-- --approvals N] [-- --rate R]`: runs the whole local
 * pipeline in this process, approves N tasks (default 1,000) at a steady R per second (default
 * 20), and measures, per approval, commit -> all three consumers processed: from the outbox
 * row's commit-time stamp to the latest of the three inbox records' PROCESSED time. Twice: with
 * the nudge after each approve, and with the relay's schedule alone. A benchmark, not a test.
 */
import { rmSync } from 'node:fs';
import { type Runtime, startRuntime } from '../infra/local/runtime';
import { pipelineClient, tempDataDir } from '../test/support/pipeline-client';
import { waitFor } from '../test/support/wait-for';

const args = process.argv.slice(2);
const json = args.includes('--json');
const numberArg = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const approvals = numberArg('--approvals', 1_000);
const rate = numberArg('--rate', 20);
const log = (msg: string) => {
  if (!json) console.error(msg);
};

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;

async function measure(nudge: boolean): Promise<number[]> {
  const dir = tempDataDir('pipeline-bench-');
  let runtime: Runtime | undefined;
  try {
    // Without the nudge the sweeps alone deliver: a one-minute sweep (prod's), not the sandbox's hour.
    runtime = await startRuntime({ dataDir: dir, port: 0, nudge, ...(nudge ? {} : { sweepMs: 60_000 }) });
    const client = pipelineClient(runtime.url);
    log(`${nudge ? 'with nudge' : 'schedule only'}: creating ${approvals} tasks`);
    const ids: string[] = [];
    for (let i = 0; i < approvals; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, approvals - i) }, (_, j) =>
          client.call<{ taskId: string }>('POST', '/tasks', { title: `bench ${i + j}`, assignee: 'ana' }),
        ),
      );
      ids.push(...batch.map((r) => r.body.taskId));
    }
    log(`approving ${approvals} at ${rate}/s`);
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
      { timeoutMs: 300_000, intervalMs: 500 },
    );
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
    return latencies.sort((a, b) => a - b);
  } finally {
    await runtime?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const nudged = await measure(true);
  const scheduled = await measure(false);
  const result = {
    approvals,
    p50Ms: Math.round(percentile(nudged, 50)),
    p95Ms: Math.round(percentile(nudged, 95)),
    p99Ms: Math.round(percentile(nudged, 99)),
    p99NoNudgeMs: Math.round(percentile(scheduled, 99)),
  };
  if (json) console.log(JSON.stringify(result));
  else {
    console.log(result);
    console.log(
      `schedule only: p50 ${Math.round(percentile(scheduled, 50))} ms, p95 ${Math.round(percentile(scheduled, 95))} ms; ` +
        `approvals at ${rate}/s`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
