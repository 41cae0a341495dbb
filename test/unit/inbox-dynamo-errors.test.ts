import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { openShard } from '../../shared/inbox/dynamo-inbox-table';
import {
  InboxError,
  InboxFencedOutError,
  InboxRecordChangedError,
  InboxRecordExistsError,
} from '../../shared/inbox/errors';

// The adapter sends through the document client it builds over the DynamoDBClient it is given.
const dynamo = mockClient(DynamoDBDocumentClient);
const key = { consumer: 'index', eventId: 'e-1' };
const transient = { kind: 'transient', permanentFailures: 0, firstAttemptAt: 0 } as const;
/** A first delivery's `begin`, `event` and the rest overridable. */
const beginInput = (over: Partial<Parameters<DynamoInboxStore['begin']>[0]> = {}) => ({
  ...key,
  owner: 'me',
  leaseUntil: 2,
  payloadHash: 'h',
  eventType: 't',
  subject: null,
  event: {},
  now: 1,
  ...over,
});
const conditionFailed = () =>
  new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });

describe('DynamoDB inbox adapter: SDK errors become domain errors', () => {
  let store: DynamoInboxStore;

  beforeEach(() => {
    dynamo.reset();
    store = new DynamoInboxStore(new DynamoDBClient({ region: 'us-east-1', maxAttempts: 1 }), {
      tableName: 'inbox',
      openIndexShards: topology.inbox.openIndexShards,
    });
  });

  it('a refused complete, renew or fail is InboxFencedOutError, carrying the SDK error as cause', async () => {
    dynamo.rejects(conditionFailed());
    // The read after a refusal finds the record gone or someone else's.
    dynamo.on(GetCommand).resolves({});
    const complete = await store.complete(key, 'me', { now: 1, expiresAt: 2 }).catch((e: unknown) => e);
    expect(complete).toBeInstanceOf(InboxFencedOutError);
    expect((complete as Error).cause).toBeInstanceOf(ConditionalCheckFailedException);
    await expect(store.renew(key, 'me', 5, 1)).rejects.toBeInstanceOf(InboxFencedOutError);
    await expect(
      store.fail(key, 'me', { now: 1, error: 'x', nextAttemptAt: 2, ...transient }),
    ).rejects.toBeInstanceOf(InboxFencedOutError);
  });

  it('a refused take-over is InboxRecordChangedError; a refused poison write is InboxRecordExistsError', async () => {
    dynamo.rejects(conditionFailed());
    dynamo.on(GetCommand).resolves({});
    await expect(
      store.takeOver(key, { status: 'FAILED', leaseOwner: 'old' }, { owner: 'me', leaseUntil: 9, now: 1 }),
    ).rejects.toBeInstanceOf(InboxRecordChangedError);
    await expect(
      store.recordPoison({
        ...key,
        cloudEventId: null,
        subject: null,
        eventType: 'x',
        payloadHash: 'h',
        reason: 'r',
        event: {},
        now: 1,
        expiresAt: 2,
      }),
    ).rejects.toBeInstanceOf(InboxRecordExistsError);
  });

  it('throttling and other failures are STORE_ERROR with the operation and the cause', async () => {
    const throttled = Object.assign(new Error('Rate exceeded'), {
      name: 'ProvisionedThroughputExceededException',
    });
    dynamo.on(UpdateCommand).rejects(throttled);
    const err = await store.begin(beginInput()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InboxError);
    expect(err).toMatchObject({
      code: 'STORE_ERROR',
      details: { operation: 'begin', errorName: 'ProvisionedThroughputExceededException' },
    });
    expect((err as Error).cause).toBe(throttled);
  });

  it('begin is one UpdateItem that creates the record only if absent and asks for the old item on refusal', async () => {
    dynamo.on(UpdateCommand).resolves({});
    const begun = await store.begin(beginInput({ event: { a: 1 } }));
    expect(begun.created).toBe(true);
    const calls = dynamo.commandCalls(UpdateCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0]?.args[0].input;
    expect(input?.ReturnValuesOnConditionCheckFailure).toBe('ALL_OLD');
    // The whole record lives in one attribute, written only if absent, with the index keys:
    // finding a record changes nothing, not even the index.
    expect(input?.Key).toEqual({ pk: `${key.consumer}#${key.eventId}` });
    expect(input?.ConditionExpression).toBe('attribute_not_exists(#state)');
    expect(input?.UpdateExpression).toBe(
      'SET #state = :state, #consumer = :consumer, #eventId = :eventId, #openKey = :openKey, #openSince = :openSince',
    );
    expect(input?.ExpressionAttributeValues?.[':openKey']).toBe(
      `${key.consumer}#PROCESSING#${openShard(key.eventId, topology.inbox.openIndexShards)}`,
    );
    expect(input?.ExpressionAttributeValues?.[':openSince']).toBe(
      `${new Date(beginInput().now).toISOString()}#${key.eventId}`,
    );
    expect(input?.ExpressionAttributeValues?.[':state']).toMatchObject({
      status: 'PROCESSING',
      attempts: 1,
      leaseOwner: 'me',
      event: '{"a":1}',
    });
  });

  it('begin that finds a record returns the item DynamoDB sent back with the refusal, without a read', async () => {
    dynamo.on(UpdateCommand).rejects(
      Object.assign(new ConditionalCheckFailedException({ message: 'refused', $metadata: {} }), {
        Item: storedItem('PROCESSED', 'other'),
      }),
    );
    const begun = await store.begin(beginInput());
    expect(begun).toMatchObject({ created: false, record: { status: 'PROCESSED', leaseOwner: 'other' } });
    expect(dynamo.commandCalls(GetCommand)).toHaveLength(0);
  });

  it('a refused write that finds its own landed result (an SDK resend) succeeds, without a read', async () => {
    const refusedOn = (status: string) =>
      Object.assign(new ConditionalCheckFailedException({ message: 'refused', $metadata: {} }), {
        Item: storedItem(status, 'me'),
      });
    dynamo.on(UpdateCommand).rejects(refusedOn('PROCESSING'));
    expect(await store.begin(beginInput())).toMatchObject({ created: true, record: { leaseOwner: 'me' } });
    dynamo.on(UpdateCommand).rejects(refusedOn('PROCESSING'));
    const taken = await store.takeOver(
      key,
      { status: 'FAILED', leaseOwner: 'old' },
      { owner: 'me', leaseUntil: 9, now: 1 },
    );
    expect(taken).toMatchObject({ status: 'PROCESSING', leaseOwner: 'me' });
    dynamo.on(UpdateCommand).rejects(refusedOn('PROCESSED'));
    await store.complete(key, 'me', { now: 1, expiresAt: 2 });
    dynamo.on(UpdateCommand).rejects(refusedOn('FAILED'));
    await store.fail(key, 'me', { now: 1, error: 'x', nextAttemptAt: 2, ...transient });
    expect(dynamo.commandCalls(GetCommand)).toHaveLength(0);
  });
});

/** A stored item in DynamoDB JSON, as a refusal returns it. */
function storedItem(status: string, owner: string) {
  return {
    pk: { S: `${key.consumer}#${key.eventId}` },
    consumer: { S: key.consumer },
    eventId: { S: key.eventId },
    state: {
      M: {
        status: { S: status },
        attempts: { N: '1' },
        leaseOwner: { S: owner },
        leaseUntil: { N: '5' },
        nextAttemptAt: { N: '0' },
        payloadHash: { S: 'h' },
        eventType: { S: 't' },
        taskId: { NULL: true },
        event: { S: '{}' },
        eventTruncated: { BOOL: false },
        receivedAt: { N: '1' },
        updatedAt: { N: '2' },
      },
    },
  };
}
