import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { consumers } from '../../functions/consumers/registry';
import { topology } from '../../functions/topology';
import { consumerEnv, consumerMetricNames } from '../../shared/consumers/contract';
import { ensureTables } from '../../shared/consumers/ensure-tables';
import { resourceEnvName } from '../../shared/consumers/resources';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { CallRecorder } from '../support/aws/calls';
import { startSnsStandin } from '../support/aws/sns';
import { dynamoClient, dynamoEngines } from '../support/dynamo';
import { approvedRow, busEvent } from '../support/dynamo-consumer-fixtures';
import { lambdaContext } from '../support/lambda-context';
import { startConsumerQueue } from '../support/queue-delivery';

describe('consumer Lambda handlers (module wiring, env from contract.ts)', () => {
  const dynalite = dynamoEngines().find((e) => e.name === 'dynalite');
  const endpoint = dynalite?.endpoint ?? '';
  const tables = { inboxTable: `inbox-h-${randomUUID().slice(0, 8)}`, resourceTables: [] };
  const stops: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    const client = dynamoClient(endpoint);
    await ensureTables(client, tables, { openIndexShards: topology.inbox.openIndexShards });
    // ensureTables is idempotent: a second call over existing tables is a no-op.
    await ensureTables(client, tables, { openIndexShards: topology.inbox.openIndexShards });
    client.destroy();
  });
  afterAll(async () => {
    for (const stop of stops) await stop();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
    vi.resetModules();
  });

  it('the notify handler processes an EventBridge event from its queue through SNS and flushes its metrics as EMF', async () => {
    const topic = 'arn:aws:sns:us-east-1:123456789012:approvals';
    const sns = await startSnsStandin({ recorder: new CallRecorder(), topics: [topic] });
    stops.push(() => sns.close());
    const queue = await startConsumerQueue('notify-queue');
    stops.push(() => queue.close());
    for (const [name, value] of Object.entries(queue.env)) vi.stubEnv(name, value);
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
    vi.stubEnv('AWS_REGION', 'us-east-1');
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'consumer-notify');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local');
    vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const { handler } = await import('../../functions/consumers/notify/handler');
    const row = approvedRow();
    const result = await handler(await queue.deliver([busEvent(row)]), lambdaContext('notify'));
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sns.published.map((m) => JSON.parse(m.message).eventId)).toEqual([row.eventId]);

    const emf = written
      .flatMap((w) => w.split('\n'))
      .filter((l) => l.includes('"_aws"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(emf).toHaveLength(1);
    expect(emf[0]).toMatchObject({ Consumer: 'notify', [consumerMetricNames.processed]: 1 });
  });

  it('each consumer’s handler whose environment is incomplete fails its cold start with every problem listed', async () => {
    for (const consumer of consumers) {
      const variables = Object.entries(consumer.resources).flatMap(([key, spec]) =>
        spec.kind === 'database' ? [] : [resourceEnvName(key, spec.kind)],
      );
      vi.stubEnv(consumerEnv.inboxTable, '');
      vi.stubEnv(consumerEnv.inboxSettings, '');
      for (const variable of variables) vi.stubEnv(variable, '');
      vi.resetModules();
      await expect(
        import(fileURLToPath(new URL('handler.ts', consumer.folder))),
        consumer.name,
      ).rejects.toMatchObject({
        code: 'CONFIG',
        message: expect.stringContaining(
          [consumerEnv.inboxTable, consumerEnv.inboxSettings, ...variables]
            .map((v) => `${v}: required`)
            .join('; '),
        ),
      });
    }
  });
});
