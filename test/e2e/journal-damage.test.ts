import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { noFaults } from '../../infra/local/faults';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { approvalEffects, subscriberNames } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

// A line of the bus journal damaged on the disk while the runtime is stopped (a bad sector, a
// hand edit, a restore of a torn copy), in the middle of the file: before, the start dropped it
// without a word and rewrote the journal, and the records whose retries it held stayed FAILED
// for good. Now it is kept aside, counted in /ops/status, and its deliveries made again from
// the outbox.

const approvals = 3;
/** The consumers an approval goes to: each has a record of every event. */
const consumers = subscriberNames(topology.eventTypes.approved);
let runtime: Runtime | undefined;
const dir = tempDataDir('pipeline-journal-damage-');

afterAll(async () => {
  await runtime?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('a bus journal line damaged while the runtime is stopped', () => {
  it('is kept aside and counted, and its deliveries are made again from the outbox: every record PROCESSED', async () => {
    // Every effect fails for now (transient): each record FAILED, each delivery waiting in the journal.
    runtime = await startRuntime({ dataDir: dir, port: 0, faults: { ...noFaults, effectFailBefore: 1 } });
    const first = runtime;
    await pipelineClient(first.url).createAndApprove(approvals);
    const rows = await waitFor(
      async () =>
        (await first.db.query<{ event_id: string }>("SELECT event_id FROM outbox WHERE status = 'delivered'"))
          .rows,
      (r) => r.length === approvals,
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'every event delivered' },
    );
    const keys = rows.flatMap((r) => consumers.map((consumer) => ({ consumer, eventId: r.event_id })));
    await waitFor(
      () => Promise.all(keys.map((k) => first.consumers.inbox.get(k))),
      (all) => all.every((r) => r?.status === 'FAILED'),
      { timeoutMs: deliveryBoundMs, intervalMs: 100, what: 'every record FAILED' },
    );
    await first.stop();
    runtime = undefined;

    // The middle line of the journal loses a run of its characters (its ids, near its start, stay).
    const journal = join(dir, 'bus', 'journal.jsonl');
    const lines = readFileSync(journal, 'utf8').split('\n');
    expect(lines.filter((l) => l.trim())).toHaveLength(approvals);
    const middle = lines[1] as string;
    const from = Math.floor(middle.length * 0.6);
    const damaged = `${middle.slice(0, from)}${'\u0000'.repeat(16)}${middle.slice(from + 16)}`;
    lines[1] = damaged;
    writeFileSync(journal, lines.join('\n'));

    runtime = await startRuntime({ dataDir: dir, port: 0 });
    const second = runtime;
    await second.bus.idle();
    const after = await Promise.all(keys.map((k) => second.consumers.inbox.get(k)));
    const status = await pipelineClient(second.url).status();

    expect(after.map((r) => r?.status)).toEqual(keys.map(() => 'PROCESSED'));
    expect(status.effects).toEqual(approvalEffects(approvals));
    const keptFile = join(dir, 'bus', 'journal.damaged.jsonl');
    expect(status.journal).toEqual({ linesKeptAside: 1, file: keptFile });
    expect(existsSync(keptFile)).toBe(true);
    const kept = readFileSync(keptFile, 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as { lineNumber: number; torn: boolean; text: string });
    expect(kept).toEqual([expect.objectContaining({ lineNumber: 2, torn: false, text: damaged })]);
  }, 900_000);
});
