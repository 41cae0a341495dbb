import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { consumerDeps, parseConsumerConfig } from '../../shared/consumers/consumer-deps';
import { consumerEnv } from '../../shared/consumers/contract';
import { isPipelineError } from '../../shared/errors';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { topology } from '../../shared/topology';

const topic = 'arn:aws:sns:eu-west-1:123456789012:approvals';

function configError(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (err) {
    if (isPipelineError(err, 'CONFIG')) return err.details.fields as { path: string; message: string }[];
    throw err;
  }
  throw new Error('expected a CONFIG error');
}

describe('consumer configuration from the environment (contract.ts names)', () => {
  it('requires the inbox table, and each consumer the store its effect writes to', () => {
    expect(configError(() => parseConsumerConfig('index', {})).map((f) => f.path)).toEqual([
      consumerEnv.inboxTable,
      consumerEnv.indexTable,
    ]);
    expect(configError(() => parseConsumerConfig('notify', { [consumerEnv.inboxTable]: 'inbox' }))).toEqual([
      { path: consumerEnv.notifyTopic, message: 'required' },
    ]);
    expect(configError(() => parseConsumerConfig('archive', { [consumerEnv.inboxTable]: 'inbox' }))).toEqual([
      { path: consumerEnv.archiveBucket, message: 'required' },
    ]);
    expect(
      parseConsumerConfig('notify', { [consumerEnv.inboxTable]: 'inbox', [consumerEnv.notifyTopic]: topic }),
    ).toMatchObject({ name: 'notify', inboxTable: 'inbox', notifyTopic: topic });
  });

  it('refuses a CONSUMER_NAME that names another consumer, and malformed values', () => {
    const fields = configError(() =>
      parseConsumerConfig('index', {
        [consumerEnv.consumerName]: 'notify',
        [consumerEnv.inboxTable]: 'x',
        [consumerEnv.indexTable]: 'idx',
        [consumerEnv.notifyTopic]: 'not-an-arn',
      }),
    );
    expect(fields.map((f) => f.path).sort()).toEqual(
      [consumerEnv.inboxTable, consumerEnv.notifyTopic].sort(),
    );
    expect(
      configError(() =>
        parseConsumerConfig('index', {
          [consumerEnv.consumerName]: 'notify',
          [consumerEnv.inboxTable]: 'inbox',
          [consumerEnv.indexTable]: 'idx',
        }),
      ),
    ).toEqual([{ path: consumerEnv.consumerName, message: 'is notify, but this is the index consumer' }]);
  });
});

describe('the parts every consumer shares', () => {
  it('an inbox on the given client, the topology settings, and metrics with the consumer dimension', () => {
    const client = new DynamoDBClient({ region: 'us-east-1' });
    const deps = consumerDeps('notify', { inboxTable: 'inbox' }, client);
    expect(deps.inbox).toBeInstanceOf(DynamoInboxStore);
    expect(deps.settings).toMatchObject({
      maxPermanentAttempts: topology.consumers.notify.maxPermanentAttempts,
      maxEventAgeMs: topology.consumers.notify.maxEventAgeSeconds * 1000,
    });
    deps.metrics.addMetric('X', 'Count', 1);
    expect(deps.metrics.serializeMetrics()).toMatchObject({ Consumer: 'notify', service: 'consumer-notify' });
    client.destroy();
  });
});
