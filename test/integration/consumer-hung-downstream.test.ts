import { randomUUID } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { Context } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sdkCallLimits } from '../../shared/aws/sdk-client';
import { consumerEnv } from '../../shared/consumers/contract';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { resourceEnvName } from '../../shared/consumers/resources';
import { itemKey } from '../../shared/inbox/dynamo-inbox-table';
import { dynamoClient, dynamoEngines } from '../support/dynamo';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { type HungServer, startHungServer } from '../support/hung-server';
import { lambdaContext } from '../support/lambda-context';

describe('a consumer whose downstream hangs (notify, SNS never answering)', () => {
  const dynalite = dynamoEngines().find((e) => e.name === 'dynalite');
  const endpoint = dynalite?.endpoint ?? '';
  const tables = { inboxTable: `inbox-hung-${randomUUID().slice(0, 8)}`, resourceTables: [] };
  let sns: HungServer;

  beforeAll(async () => {
    const client = dynamoClient(endpoint);
    await ensureTables(client, tables);
    client.destroy();
    sns = await startHungServer();
  });
  afterAll(async () => {
    await sns.close();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it('fails the invocation before its deadline and records the attempt as FAILED, to be retried', async () => {
    const topic = 'arn:aws:sns:us-east-1:123456789012:approvals';
    vi.stubEnv(consumerEnv.consumerName, 'notify');
    vi.stubEnv(consumerEnv.inboxTable, tables.inboxTable);
    vi.stubEnv(resourceEnvName('notifications', 'topic'), topic);
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', endpoint);
    vi.stubEnv('AWS_ENDPOINT_URL_SNS', sns.endpoint);
    vi.stubEnv('AWS_REGION', 'us-east-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'consumer-notify');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
    vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
    const { handler } = await import('../../functions/consumers/notify/handler');
    const row = approvedRow();
    // Far less time left than SNS's request timeout x attempts: only the deadline ends the publish.
    const deadline = Date.now() + sdkCallLimits.request.reserveMs + 1_500;
    const context: Context = {
      ...lambdaContext('notify'),
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    };

    const outcome = await handler(busEvent(row), context).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    const endedAt = Date.now();

    expect(outcome).toHaveProperty('error');
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
    const record = unmarshall(stored.Item ?? {});
    // Transient: the inbox retries it with backoff, never DEAD for a hung downstream.
    expect(record.state).toMatchObject({ status: 'FAILED', attempts: 1, lastFailure: 'transient' });
  });
});
