import { afterAll, beforeAll, expect, it } from 'vitest';
import { consumerNames } from '../../functions/topology';
import type { ConsumerEffect } from '../../shared/consumers/effect';
import { TransientError } from '../../shared/inbox/failure-kind';
import type { ConsumerName } from '../../shared/topology';
import { describeEachEngine } from '../support/dynamo';
import { type LostResponse, loseResponsesAfterLanding } from '../support/sdk-faults';
import { at, type Harness, startHarness } from './harness';
import { scenarioTimeoutMs, sized } from './profile';

/** Which inbox or index write a request is, from the request itself. */
function writeKind(commandName: string, input: Readonly<Record<string, unknown>>): string {
  const condition = String(input.ConditionExpression ?? '');
  const update = String(input.UpdateExpression ?? '');
  if (commandName === 'PutItemCommand') return 'index put';
  if (condition.startsWith('attribute_not_exists(#state)')) return 'begin';
  if (update.includes('#attempts + :one')) return 'take-over';
  if (update.includes(':processed')) return 'complete';
  return 'other';
}

/** Every consumer loses the response of its first few writes of each kind... */
const firstOfEachKind = 3;
/**
 * ...and then of one write in this many. A resend its condition refuses costs the SDK's retry
 * quota 10 tokens that no success refunds, and each call that succeeds at once gives 1 back
 * (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html): above about one
 * write in eleven the quota drains in a long run, the SDK stops resending, and the timeout
 * reaches the inbox as a store error, which is the crash path, not this scenario.
 */
const thenOneIn = 16;

describeEachEngine('guarantee: SDK retries of writes that landed', (fixture) => {
  let harness: Harness;
  const lost: LostResponse[] = [];
  const firstTries = new Set<string>();
  const arrivals = new Map<ConsumerName, number>();

  beforeAll(async () => {
    const struck = new WeakSet<object>();
    harness = await startHarness({
      dynamoEndpoint: fixture().endpoint,
      // A write lands and then its response is lost; the SDK sends the same request again (each
      // request at most once, so the resend gets its answer).
      configureConsumerClient: (_consumer, client) => {
        const seen = new Map<string, number>();
        loseResponsesAfterLanding(
          client,
          (commandName, input) => {
            if (commandName !== 'UpdateItemCommand' && commandName !== 'PutItemCommand') return false;
            if (struck.has(input)) return false;
            const kind = writeKind(commandName, input);
            const n = (seen.get(kind) ?? 0) + 1;
            seen.set(kind, n);
            if (n > firstOfEachKind && n % thenOneIn !== 0) return false;
            struck.add(input);
            return true;
          },
          lost,
        );
      },
      // A third of the events fail their first attempt before acting, so take-overs happen too:
      // each consumer's 1st, 4th, 7th... event by arrival. Chosen by order, not by the random
      // event id, which in a short run could choose none (2/3 to the 12th: about 1 run in 130).
      wrapEffect:
        (consumer: ConsumerName, effect: ConsumerEffect): ConsumerEffect =>
        async (event, ctx) => {
          const id = `${consumer}/${event.id}`;
          if (!firstTries.has(id)) {
            firstTries.add(id);
            const nth = (arrivals.get(consumer) ?? 0) + 1;
            arrivals.set(consumer, nth);
            if (nth % 3 === 1) {
              throw new TransientError(`${consumer}: a transient failure before acting on ${event.id}`);
            }
          }
          return effect(event, ctx);
        },
    });
  });
  afterAll(() => harness?.stop());

  it(
    'each effect runs once, no attempt waits on its own lease, every event is processed',
    async () => {
      const tasks = sized(12, 200);
      await harness.approveTasks(tasks);
      const settled = await harness.settle();
      const report = await harness.check();

      // The fault happened on every kind of write the inbox makes, and on the index's put.
      const kinds = new Set(lost.map((l) => writeKind(l.commandName, l.input)));
      for (const kind of ['begin', 'take-over', 'complete', 'index put']) expect(kinds).toContain(kind);
      // No attempt mistook its own landed write for another's: no in-progress refusal, and no
      // effect ran twice (every repeat here would be the inbox's doing).
      for (const consumer of consumerNames) {
        const inProgress = [...at(harness.observed.invocationErrors, consumer)].filter(([name]) =>
          name.includes('IN_PROGRESS'),
        );
        expect(inProgress, `${consumer} refused its own attempts`).toEqual([]);
      }
      expect([...harness.observed.effectRuns].filter(([, runs]) => runs > 1)).toEqual([]);
      expect(report.figures.duplicates.notification).toBe(0);
      expect(report.violations).toEqual([]);
      expect(settled.quiet).toBe(true);
    },
    scenarioTimeoutMs,
  );
});
