import { describe, expect, it } from 'vitest';
import { buildConsumerDeps, parseConsumerConfig } from '../../shared/consumers/consumer-deps';
import { consumerEnv } from '../../shared/consumers/contract';
import { type FileSnapshotArchive, S3SnapshotArchive } from '../../shared/effects/archive';
import { DynamoContentIndex } from '../../shared/effects/content-index';
import { FileNotifier, SnsNotifier } from '../../shared/effects/notify';
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
  it('requires the inbox table, and each consumer its own target unless PIPELINE_DATA_DIR is set', () => {
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
      parseConsumerConfig('notify', { [consumerEnv.inboxTable]: 'inbox', [consumerEnv.dataDir]: '/tmp/x' }),
    ).toMatchObject({ name: 'notify', dataDir: '/tmp/x', notifyTopic: undefined });
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

  it('takes the DynamoDB endpoint from AWS_ENDPOINT_URL_DYNAMODB before AWS_ENDPOINT_URL', () => {
    const base = { [consumerEnv.inboxTable]: 'inbox', [consumerEnv.indexTable]: 'idx' };
    expect(parseConsumerConfig('index', { ...base, AWS_ENDPOINT_URL: 'http://a:1' }).dynamoEndpoint).toBe(
      'http://a:1',
    );
    expect(
      parseConsumerConfig('index', {
        ...base,
        AWS_ENDPOINT_URL: 'http://a:1',
        AWS_ENDPOINT_URL_DYNAMODB: 'http://b:2',
      }).dynamoEndpoint,
    ).toBe('http://b:2');
  });
});

describe('building consumer deps', () => {
  it('on AWS: SNS for notify, S3 and the tasks database for archive, DynamoDB for index and the inbox', async () => {
    const notify = buildConsumerDeps('notify', {
      [consumerEnv.consumerName]: 'notify',
      [consumerEnv.inboxTable]: 'inbox',
      [consumerEnv.notifyTopic]: topic,
    });
    expect(notify.adapters.notifier).toBeInstanceOf(SnsNotifier);
    expect(notify.inbox).toBeInstanceOf(DynamoInboxStore);
    expect(notify.settings).toMatchObject({ maxAttempts: topology.consumers.notify.maxAttempts });

    const archive = buildConsumerDeps('archive', {
      [consumerEnv.inboxTable]: 'inbox',
      [consumerEnv.archiveBucket]: 'snapshots-bucket',
      DATABASE_URL: 'postgres://u:p@127.0.0.1:1/db',
    });
    expect(archive.adapters.archive).toBeInstanceOf(S3SnapshotArchive);

    const index = buildConsumerDeps('index', {
      [consumerEnv.inboxTable]: 'inbox',
      [consumerEnv.indexTable]: 'idx',
    });
    expect(index.adapters.index).toBeInstanceOf(DynamoContentIndex);
    await Promise.all([notify.close(), archive.close(), index.close()]);
  });

  it('archive without a database configuration fails like the other functions do', () => {
    expect(() =>
      buildConsumerDeps('archive', {
        [consumerEnv.inboxTable]: 'inbox',
        [consumerEnv.archiveBucket]: 'bucket-x',
      }),
    ).toThrow(/DATABASE_URL/);
  });

  it('locally (PIPELINE_DATA_DIR): files under the data directory for notify and archive', async () => {
    const env = { [consumerEnv.inboxTable]: 'inbox', [consumerEnv.dataDir]: '/tmp/pipeline-data' };
    const notify = buildConsumerDeps('notify', env);
    expect(notify.adapters.notifier).toBeInstanceOf(FileNotifier);
    expect((notify.adapters.notifier as FileNotifier).path).toBe('/tmp/pipeline-data/notifications.jsonl');
    const archive = buildConsumerDeps('archive', { ...env, DATABASE_URL: 'postgres://u:p@127.0.0.1:1/db' });
    expect((archive.adapters.archive as FileSnapshotArchive).root).toBe('/tmp/pipeline-data/archive');
    await Promise.all([notify.close(), archive.close()]);
  });
});
