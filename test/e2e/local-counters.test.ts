import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { converged, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { approvalEffects, approvalsProcessed } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

// The local status reads what the effects did and what each consumer processed from counters
// the runtime keeps (a few items, whatever the history), not from a scan of the stores. A count
// added after the thing it counts can be lost to a SIGKILL in between: the start after an
// unclean stop counts the stores again before any consumer runs.

const dir = tempDataDir();
let runtime: Runtime | undefined;
afterAll(async () => {
  await runtime?.stop();
});

/** Sets a counter of the running runtime to a wrong value, as a lost count would leave it. */
async function corrupt(rt: Runtime, counter: string, n: number): Promise<void> {
  const client = new DynamoDBClient({
    endpoint: rt.consumers.dynamo.endpoint,
    region: 'us-east-1',
    credentials: { ...rt.credentials.aws },
  });
  try {
    await client.send(
      new UpdateItemCommand({
        TableName: 'content-pipeline-local-counts',
        Key: { counter: { S: counter } },
        UpdateExpression: 'SET #n = :n',
        ExpressionAttributeNames: { '#n': 'n' },
        ExpressionAttributeValues: { ':n': { N: String(n) } },
      }),
    );
  } finally {
    client.destroy();
  }
}

describe('the local counters', () => {
  it('count each effect once, are recounted from the stores after an unclean stop, and only then', async () => {
    runtime = await startRuntime({ dataDir: dir, port: 0 });
    await pipelineClient(runtime.url).createAndApprove(6);
    // A consumer's processed count is added once its invocation returned, after its effect's
    // count: converged (by the effects) can be seen before the last processed counts land.
    const first = await waitFor(
      pipelineClient(runtime.url).status,
      (s) =>
        converged(s, 6) &&
        Object.entries(approvalsProcessed(6)).every(([c, n]) => (s.consumers[c]?.processed ?? 0) >= n),
      {
        // The pipeline's own pace: a bound, ten times what it takes here.
        timeoutMs: 120_000,
        intervalMs: 100,
      },
    );
    expect(first.effects).toEqual(approvalEffects(6));
    expect(first.consumers.archive?.processed).toBe(6);

    // Lost counts: the runtime died between effects and their counts.
    await corrupt(runtime, 'effects#archivedObjects', 2);
    await corrupt(runtime, 'processed#notify', 1);
    await runtime.stop();

    // A clean stop left no lock: the next start trusts the counters (no scan at every start).
    runtime = await startRuntime({ dataDir: dir, port: 0 });
    const trusted = await pipelineClient(runtime.url).status();
    expect(trusted.effects?.archivedObjects).toBe(2);
    await runtime.stop();

    // The lock of a process that is gone: the last run did not stop cleanly.
    writeFileSync(join(dir, 'runtime.pid'), '2147483646');
    runtime = await startRuntime({ dataDir: dir, port: 0 });
    const recounted = await pipelineClient(runtime.url).status();
    expect(recounted.effects).toEqual(approvalEffects(6));
    expect(recounted.consumers.notify?.processed).toBe(6);
    expect(await runtime.consumers.countEffects()).toEqual(recounted.effects);
  }, 300_000);
});
