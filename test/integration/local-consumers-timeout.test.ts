import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import type { BusEvent } from '../../infra/local/local-bus';
import {
  InvocationTimeoutError,
  type LocalConsumers,
  startLocalConsumers,
} from '../../infra/local/local-consumers';
import type { SqlClient } from '../../shared/db/sql-client';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { deferred } from '../support/gates';
import { tempDataDir } from '../support/pipeline-client';
import { waitFor } from '../support/wait-for';

// The notify consumer never reaches the database.
const noDatabase = {} as SqlClient;

/**
 * A consumer invocation that runs past its timeout is ended for the bus (a failed attempt it
 * retries) but not killed: when its effect finishes, the record it completed is counted once,
 * and the retry that finds it done counts nothing. The effect is held at a gate the test opens;
 * the first invocation's timeout is the one real timer here (200 ms: what is under test). The
 * retry's is a minute: its inbox reads take what the machine gives them (over 200 ms on a
 * loaded one), and it is not about its timeout.
 */
describe('a local consumer invocation past its timeout', () => {
  let dir: string;
  let consumers: LocalConsumers;
  const gate = deferred();
  const sent = deferred();
  let held = true;
  let timeoutMs = 200;

  beforeAll(async () => {
    dir = tempDataDir('local-consumers-timeout-');
    consumers = await startLocalConsumers({
      dataDir: dir,
      dbAs: () => noDatabase,
      engine: 'dynalite',
      faults: new FaultInjector(noFaults),
      log: () => undefined,
      invocationTimeoutMs: () => timeoutMs,
      // notify's topic, held at the gate until the test opens it.
      wrapPort: (consumer, _key, built) =>
        consumer === 'notify' && built.kind === 'topic'
          ? {
              kind: 'topic',
              port: {
                publish: async (message) => {
                  if (held) await gate.promise;
                  const out = await built.port.publish(message);
                  sent.resolve();
                  return out;
                },
              },
            }
          : built,
    });
  });

  afterAll(async () => {
    await consumers?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails the attempt at its timeout, and the effect that finishes later is counted once', async () => {
    const event = busEvent(approvedRow()) as unknown as BusEvent;
    await expect(consumers.invoke('notify', event)).rejects.toBeInstanceOf(InvocationTimeoutError);
    expect(await consumers.processedCount('notify')).toBe(0);

    held = false;
    gate.resolve();
    await sent.promise;
    // The abandoned invocation completes its record and counts it after its notification.
    await waitFor(
      () => consumers.processedCount('notify'),
      (n) => n === 1,
      { timeoutMs: 30_000, intervalMs: 20, what: 'the late invocation counted' },
    );
    // The bus's retry finds the record done: a duplicate, nothing more counted.
    timeoutMs = 60_000;
    await expect(consumers.invoke('notify', event)).resolves.toMatchObject({ status: 'duplicate' });
    expect(await consumers.processedCount('notify')).toBe(1);
    expect((await consumers.effectCounts()).notificationsSent).toBe(1);
  });
});
