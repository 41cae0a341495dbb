import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { type InboxEvent, processOnce } from '../../shared/inbox/process-once';
import { describeEachEngine, dynamoClient } from '../support/dynamo';
import { inboxEvent, TestClock, testInboxSettings } from '../support/dynamo-consumer-fixtures';

/**
 * Lets the first request that `matches` reach the engine (the write lands), then throws the
 * TimeoutError a lost response gives: the SDK's standard retry sends the same request again,
 * exactly as it does when a socket times out after DynamoDB applied the write.
 */
function loseFirstResponse(
  client: DynamoDBClient,
  matches: (operation: string, input: Record<string, unknown>) => boolean,
): { readonly lost: () => number; readonly sent: () => number } {
  let lost = 0;
  let sent = 0;
  client.middlewareStack.add(
    (next) => async (args) => {
      const request = args.request as { headers: Record<string, string>; body?: string };
      const operation = String(request.headers['x-amz-target']).replace('DynamoDB_20120810.', '');
      const input = JSON.parse(request.body ?? '{}') as Record<string, unknown>;
      const output = await next(args);
      if (!matches(operation, input)) return output;
      sent++;
      if (lost > 0) return output;
      lost++;
      throw Object.assign(new Error('socket timed out after the write landed'), { name: 'TimeoutError' });
    },
    { step: 'deserialize', name: 'loseFirstResponse' },
  );
  return { lost: () => lost, sent: () => sent };
}

const conditionMentions = (input: Record<string, unknown>, text: string) =>
  String(input.ConditionExpression ?? '').includes(text) ||
  String(input.UpdateExpression ?? '').includes(text);

describeEachEngine('inbox writes the AWS SDK resends after they landed', (fixture) => {
  let client: DynamoDBClient;
  let clock: TestClock;
  let runs: number;
  const settings = testInboxSettings();

  beforeEach(() => {
    client = dynamoClient(fixture().endpoint);
    clock = new TestClock();
    runs = 0;
  });
  afterEach(() => client.destroy());

  const store = () => new DynamoInboxStore(client, fixture().inbox);
  const plain = () => new DynamoInboxStore(dynamoClient(fixture().endpoint), fixture().inbox);
  const plainOps = () => new DynamoInboxOps(dynamoClient(fixture().endpoint), fixture().inbox);
  const work = async () => {
    runs++;
    return 'done';
  };
  const run = (event: InboxEvent, owner: string, inbox = store()) =>
    processOnce(event, work, { inbox, settings, clock: clock.read, owner, random: () => 0.5 });

  it('a resent begin finds its own lease and runs the effect once', async () => {
    const event = inboxEvent('index');
    const wire = loseFirstResponse(
      client,
      (op, input) => op === 'UpdateItem' && conditionMentions(input, 'attribute_not_exists'),
    );

    const outcome = await run(event, 'a');

    expect(wire.lost()).toBe(1);
    expect(wire.sent()).toBe(2);
    expect(outcome).toMatchObject({ kind: 'processed', attempt: 1, takenOver: false });
    expect(runs).toBe(1);
    expect(await plainOps().get(event)).toMatchObject({ status: 'PROCESSED', attempts: 1, leaseOwner: 'a' });
  });

  it('a resent take-over finds its own lease and runs the effect once', async () => {
    const event = inboxEvent('index');
    await expect(
      processOnce(
        event,
        async () => {
          throw Object.assign(new Error('index throttled'), { name: 'ThrottlingException' });
        },
        { inbox: plain(), settings, clock: clock.read, owner: 'a', random: () => 0.5 },
      ),
    ).rejects.toThrow('index throttled');
    clock.advance(settings.backoff.maxMs);
    const wire = loseFirstResponse(
      client,
      (op, input) => op === 'UpdateItem' && conditionMentions(input, '#nextAttemptAt <= :now'),
    );

    const outcome = await run(event, 'b');

    expect(wire.lost()).toBe(1);
    expect(wire.sent()).toBe(2);
    expect(outcome).toMatchObject({ kind: 'processed', attempt: 2, takenOver: true });
    expect(runs).toBe(1);
    expect(await plainOps().get(event)).toMatchObject({ status: 'PROCESSED', attempts: 2, leaseOwner: 'b' });
  });

  it('a resent completion finds the record already PROCESSED by this attempt and succeeds', async () => {
    const event = inboxEvent('index');
    const wire = loseFirstResponse(
      client,
      (op, input) => op === 'UpdateItem' && conditionMentions(input, ':processed'),
    );

    const outcome = await run(event, 'a');

    expect(wire.lost()).toBe(1);
    expect(outcome).toMatchObject({ kind: 'processed', attempt: 1 });
    expect(runs).toBe(1);
    expect(await plainOps().get(event)).toMatchObject({ status: 'PROCESSED', leaseOwner: 'a' });
  });

  it('a resent failure record finds the record already FAILED by this attempt and rethrows the work error', async () => {
    const event = inboxEvent('index');
    const wire = loseFirstResponse(
      client,
      (op, input) => op === 'UpdateItem' && conditionMentions(input, ':failed'),
    );

    const err = await processOnce(
      event,
      async () => {
        throw Object.assign(new Error('index throttled'), { name: 'ThrottlingException' });
      },
      { inbox: store(), settings, clock: clock.read, owner: 'a', random: () => 0.5 },
    ).catch((e: unknown) => e);

    expect(wire.lost()).toBe(1);
    expect((err as Error).name).toBe('ThrottlingException');
    expect(await plainOps().get(event)).toMatchObject({ status: 'FAILED', attempts: 1, leaseOwner: 'a' });
  });
});
