import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalDynamo } from '../../infra/local/dynamo';
import { dynamoDbLocalUnavailable } from '../../infra/local/dynamo';
import { type RestartableDynamo, startRestartableDynamo } from '../support/dynamo-engines';
import { deferred } from '../support/gates';
import { tempDataDir } from '../support/pipeline-client';
import { type Harness, startHarness } from './harness';
import { fullProfile, scenarioTimeoutMs, settleTimeoutMs, sized } from './profile';

/**
 * Consumer invocations that fail on the stopped engine (not on each other's leases): the outage
 * lasts until that many have, more in the full profile.
 */
const engineFailuresDuringOutage = sized(1, 20);

/** Whether a consumer's error is the engine's, not the inbox saying another attempt holds the event. */
const engineFailure = (err: unknown) => !/IN_PROGRESS|BACKOFF/.test(String((err as { code?: unknown }).code));

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
      let halted: Promise<void> | undefined;
      let down = false;
      let engineFailures = 0;
      const enough = deferred();
      let downProbe: string | undefined = 'not probed';
      let processedBeforeOutage = 0;
      const tasks = sized(20, 300);

      beforeAll(async () => {
        dynamo = await startRestartableDynamo(engine.name, tempDataDir('guarantees-dynamo-'));
        harness = await startHarness({
          dynamoEndpoint: dynamo.endpoint,
          // Some way into the effects, the engine goes away: deliveries wait until it is down,
          // then fail on it, and it comes back once enough have (a point, not a time).
          interpose: async (consumer, event, invoke) => {
            if (!outage && harness.observed.effectRuns.size >= tasks / 2) {
              processedBeforeOutage = harness.observed.effectRuns.size;
              halted = (async () => {
                await dynamo.halt();
                downProbe = await probe(dynamo.endpoint);
                down = true;
              })();
              outage = (async () => {
                await halted;
                await enough.promise;
                down = false;
                await dynamo.resume();
              })();
            }
            if (halted) await halted;
            try {
              return await invoke(consumer, event);
            } catch (err) {
              if (down && engineFailure(err) && ++engineFailures >= engineFailuresDuringOutage)
                enough.resolve();
              throw err;
            }
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
          const settled = await harness.settle({ timeoutMs: settleTimeoutMs });
          // Had no consumer failed on the engine, it comes back now: the checks below say what went wrong.
          enough.resolve();
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
