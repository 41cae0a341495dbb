import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalDynamo } from '../../infra/local/dynamo';
import { dynamoDbLocalUnavailable } from '../../infra/local/dynamo';
import { type RestartableDynamo, startRestartableDynamo } from '../support/dynamo-engines';
import { tempDataDir } from '../support/pipeline-client';
import { type Harness, startHarness } from './harness';
import { fullProfile, scenarioTimeoutMs, settleTimeoutMs, sized } from './profile';

const outageMs = sized(1_500, 8_000);

/** One call with no SDK retry: the error the engine's endpoint gives now, or undefined if it answers. */
async function probe(endpoint: string): Promise<string | undefined> {
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'probe', secretAccessKey: 'local' },
    maxAttempts: 1,
  });
  try {
    await client.send(new ListTablesCommand({}));
    return undefined;
  } catch (err) {
    return String((err as { code?: string }).code ?? (err as Error).name);
  } finally {
    client.destroy();
  }
}

const engines: { name: LocalDynamo['engine']; skipReason?: string }[] = [
  { name: 'dynalite' },
  {
    name: 'dynamodb-local',
    skipReason:
      dynamoDbLocalUnavailable() ??
      (fullProfile
        ? undefined
        : 'two JVM starts take ~15 s, so it runs in the full profile (npm run test:guarantees)'),
  },
];

for (const engine of engines) {
  if (engine.skipReason) {
    console.warn(`[guarantees] skipping the ${engine.name} restart scenario: ${engine.skipReason}`);
  }
  describe.skipIf(engine.skipReason !== undefined)(
    `guarantee: the DynamoDB engine stopped and started under running consumers [${engine.name}${
      engine.skipReason ? `: SKIPPED, ${engine.skipReason}` : ''
    }]`,
    () => {
      let dynamo: RestartableDynamo;
      let harness: Harness;
      let outage: Promise<void> | undefined;
      let downProbe: string | undefined = 'not probed';
      let processedBeforeOutage = 0;
      const tasks = sized(20, 300);

      beforeAll(async () => {
        dynamo = await startRestartableDynamo(engine.name, tempDataDir('guarantees-dynamo-'));
        harness = await startHarness({
          dynamoEndpoint: dynamo.endpoint,
          // Some way into the effects, the engine goes away for a while.
          interpose: async (consumer, event, invoke) => {
            if (!outage && harness.observed.effectRuns.size >= tasks / 2) {
              processedBeforeOutage = harness.observed.effectRuns.size;
              outage = (async () => {
                await dynamo.halt();
                downProbe = await probe(dynamo.endpoint);
                await new Promise((r) => setTimeout(r, outageMs));
                await dynamo.resume();
              })();
            }
            return invoke(consumer, event);
          },
        });
      });
      afterAll(async () => {
        await harness?.stop();
        await dynamo?.stop();
      });

      it(
        'processes every event once the engine is back, each effect once',
        async () => {
          await harness.approveTasks(tasks);
          const settled = await harness.settle({ timeoutMs: outageMs + settleTimeoutMs });
          await outage;
          const report = await harness.check();

          // The fault happened under load: records had been written, the endpoint refused
          // connections, and consumers failed on it (not only on each other's leases).
          expect(processedBeforeOutage).toBeGreaterThan(0);
          expect(downProbe).toBe('ECONNREFUSED');
          expect(dynamo.running).toBe(true);
          const engineErrors = Object.values(harness.observed.invocationErrors)
            .flatMap((errors) => [...errors])
            .filter(([name]) => !/IN_PROGRESS|BACKOFF/.test(name))
            .reduce((n, [, count]) => n + count, 0);
          expect(engineErrors).toBeGreaterThan(0);
          // What was written before the stop survived it, and the rest followed.
          expect(report.violations).toEqual([]);
          expect(settled.quiet).toBe(true);
          expect(report.figures.approvedTasks).toBe(tasks);
        },
        scenarioTimeoutMs,
      );
    },
  );
}
