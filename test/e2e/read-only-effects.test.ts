import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import type { InboxRecord } from '../../shared/inbox/inbox-store';
import { consumerPolicyOf } from '../../shared/topology';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { approvalEffects, subscribersOf } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/**
 * Transient I/O is transient: the effects directory made read-only under a running pipeline (a
 * real read-only bind mount, EROFS for every write the topic and bucket effects try) fails
 * their attempts, and once it is writable again every effect happens, once, and nothing is DEAD.
 * The inbox must judge EROFS as a failure that passes (retried until the maximum event age), not
 * as one that needs a person (DEAD after three attempts).
 */

const approvals = 12;
/**
 * The consumers of an approval whose effects write under `<data>/effects`: those with a topic (a
 * file) or a bucket (files); a table lives in the local DynamoDB, a database in PostgreSQL.
 */
const writingConsumers = subscribersOf(topology.eventTypes.approved)
  .filter((c) => Object.values(c.resources).some((r) => r.kind === 'topic' || r.kind === 'bucket'))
  .map((c) => c.name);
/** Failed attempts each record must have seen before the directory is writable again: past the permanent budget. */
const failuresSeen = Math.max(
  ...writingConsumers.map((c) => consumerPolicyOf(topology, c).maxPermanentAttempts),
);

let runtime: Runtime | undefined;
let dir: string;
let effects: string;
let mounted = false;
/** Why the mount could not be made (not root, no mount(8), a kernel that refuses): the test is skipped, saying so. */
let cannotMount: string | undefined;

const mount = (...args: string[]) => execFileSync('mount', args, { stdio: 'pipe' });

beforeAll(async () => {
  dir = tempDataDir('pipeline-erofs-');
  effects = join(dir, 'effects');
  mkdirSync(effects, { recursive: true });
  if (process.getuid?.() !== 0) {
    cannotMount = 'a read-only bind mount needs root';
    return;
  }
  try {
    mount('--bind', effects, effects);
    mounted = true;
    // A bind mount is made read-only by a remount of its own (mount(8): "remount,bind,ro").
    mount('-o', 'remount,bind,ro', effects);
    mount('-o', 'remount,bind,rw', effects);
  } catch (err) {
    cannotMount = `mount refused: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
    return;
  }
  runtime = await startRuntime({ dataDir: dir, port: 0 });
}, 300_000);

afterAll(async () => {
  await runtime?.stop();
  if (mounted) execFileSync('umount', [effects]);
  rmSync(dir, { recursive: true, force: true });
}, 120_000);

describe('effects on a directory that is read-only for a while', () => {
  it('retries their attempts as transient and performs every effect once it is writable, none DEAD', async (ctx) => {
    if (cannotMount !== undefined || !runtime) {
      console.warn(`[read-only-effects] skipped: ${cannotMount}`);
      ctx.skip(cannotMount);
      return;
    }
    const rt = runtime;
    mount('-o', 'remount,bind,ro', effects);
    const client = pipelineClient(rt.url);
    await client.createAndApprove(approvals);
    const { rows } = await rt.db.query<{ event_id: string }>('SELECT event_id FROM outbox');
    expect(rows).toHaveLength(approvals);
    const keys = rows.flatMap((r) => writingConsumers.map((consumer) => ({ consumer, eventId: r.event_id })));
    const records = () => Promise.all(keys.map((k) => rt.consumers.inbox.get(k)));

    // While read-only: every record of the writing consumers has failed as often as a permanent
    // failure may before it is DEAD (or is DEAD already, as EROFS was judged before).
    const during = await waitFor(
      records,
      (all) =>
        all.every((r) => r?.status === 'DEAD' || (r?.status === 'FAILED' && r.attempts >= failuresSeen)),
      { timeoutMs: deliveryBoundMs, intervalMs: 200, what: `every record failed ${failuresSeen} times` },
    );
    mount('-o', 'remount,bind,rw', effects);
    // The bus retries what waits with the consumer's backoff; once nothing waits, it is all done.
    await rt.bus.idle();
    const after = await records();
    const counted = await rt.consumers.countEffects();

    const errors = new Set(during.map((r) => (r as InboxRecord).lastError?.match(/EROFS/)?.[0]));
    expect(errors).toEqual(new Set(['EROFS']));
    expect(during.filter((r) => r?.status === 'DEAD')).toEqual([]);
    expect(after.map((r) => r?.status)).toEqual(keys.map(() => 'PROCESSED'));
    expect(counted).toEqual(approvalEffects(approvals));
  }, 900_000);
});
