import { randomUUID } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Context } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { topology } from '../../functions/topology';
import { sdkCallLimits } from '../../shared/aws/sdk-client';
import { consumerEnv, consumerQueueEnv } from '../../shared/consumers/contract';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { resourceEnvName } from '../../shared/consumers/resources';
import { itemKey } from '../../shared/inbox/dynamo-inbox-table';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { consumerPolicyOf } from '../../shared/topology';
import { CallRecorder } from '../support/aws/calls';
import { type SqsStandin, startSqsStandin } from '../support/aws/sqs';
import { sendAndReceive, sqsEvent } from '../support/consumer-queue';
import { dynamoClient, dynamoEngines } from '../support/dynamo';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { type HungServer, startHungServer } from '../support/hung-server';
import { lambdaContext } from '../support/lambda-context';

describe('a consumer whose downstream hangs (notify, SNS never answering)', () => {
  const dynalite = dynamoEngines().find((e) => e.name === 'dynalite');
  const endpoint = dynalite?.endpoint ?? '';
  const tables = { inboxTable: `inbox-hung-${randomUUID().slice(0, 8)}`, resourceTables: [] };
  let sns: HungServer;
  let sqs: SqsStandin;
  let clock = Date.now();
  const queueName = 'content-pipeline-notify';
  const visibilityTimeoutSeconds = 360;

  beforeAll(async () => {
    const client = dynamoClient(endpoint);
    await ensureTables(client, tables, { openIndexShards: topology.inbox.openIndexShards });
    client.destroy();
    sns = await startHungServer();
    // Its clock moves only when the test says: what comes back when is read, not waited for.
    sqs = await startSqsStandin({
      recorder: new CallRecorder(),
      queues: [{ name: queueName, visibilityTimeoutSeconds }],
      now: () => clock,
      sentClock: Date.now,
    });
  });
  afterAll(async () => {
    await sns.close();
    await sqs.close();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it('reports the message failed before its deadline, records the attempt as FAILED and hides the message for its backoff', async () => {
    const topic = 'arn:aws:sns:us-east-1:123456789012:approvals';
    vi.stubEnv(consumerEnv.consumerName, 'notify');
    vi.stubEnv(consumerEnv.inboxTable, tables.inboxTable);
    vi.stubEnv(
      consumerEnv.inboxSettings,
      JSON.stringify({
        ...inboxSettingsFor(topology, 'notify'),
        openIndexShards: topology.inbox.openIndexShards,
      }),
    );
    vi.stubEnv(resourceEnvName('notifications', 'topic'), topic);
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', endpoint);
    vi.stubEnv('AWS_ENDPOINT_URL_SNS', sns.endpoint);
    vi.stubEnv('AWS_ENDPOINT_URL_SQS', sqs.endpoint);
    vi.stubEnv(consumerQueueEnv.url, sqs.queueUrl(queueName));
    vi.stubEnv(consumerQueueEnv.arn, sqs.queueArn(queueName));
    vi.stubEnv(consumerQueueEnv.visibilityTimeoutSeconds, String(visibilityTimeoutSeconds));
    vi.stubEnv('AWS_REGION', 'us-east-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'consumer-notify');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
    vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
    const { handler } = await import('../../functions/consumers/notify/handler');
    const row = approvedRow();
    const record = await sendAndReceive(sqs, queueName, busEvent(row));
    // Far less time left than SNS's request timeout x attempts: only the deadline ends the publish.
    const deadline = Date.now() + sdkCallLimits.request.reserveMs + 1_500;
    const context: Context = {
      ...lambdaContext('notify'),
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    };

    const result = await handler(sqsEvent(record), context);
    const endedAt = Date.now();

    // Only this message comes back: the batch answer names it, the invocation itself succeeds.
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: record.messageId }] });
    expect(endedAt).toBeLessThan(deadline);
    expect(sns.requests()).toBeGreaterThanOrEqual(1);
    const client = dynamoClient(endpoint);
    const stored = await client.send(
      new GetItemCommand({
        TableName: tables.inboxTable,
        Key: { pk: { S: itemKey({ consumer: 'notify', eventId: row.eventId }).pk } },
        ConsistentRead: true,
      }),
    );
    client.destroy();
    const inboxRecord = unmarshall(stored.Item ?? {});
    // Transient: the inbox retries it with backoff, never DEAD for a hung downstream.
    expect(inboxRecord.state).toMatchObject({ status: 'FAILED', attempts: 1, lastFailure: 'transient' });
    // Hidden for the backoff of a first failure (the inbox's, at most its cap), not the queue's
    // 360 s visibility timeout: the queue hands it over again once the backoff has passed.
    clock += consumerPolicyOf(topology, 'notify').backoff.maxMs + 1_000;
    expect(sqs.messages(queueName)[0]).toMatchObject({ messageId: record.messageId, inFlight: false });
  });
});
