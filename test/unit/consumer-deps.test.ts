import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { consumers } from '../../functions/consumers/registry';
import { consumerNames, topology } from '../../functions/topology';
import { consumerDeps, parseConsumerConfig } from '../../shared/consumers/consumer-deps';
import { consumerEnv, consumerQueueEnv } from '../../shared/consumers/contract';
import { defineConsumer } from '../../shared/consumers/define-consumer';
import { bucket, database, resourceEnvName, table, topic } from '../../shared/consumers/resources';
import { isPipelineError } from '../../shared/errors';
import { eventTypes } from '../../shared/events/event-types';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { inboxSettingsFor } from '../../shared/inbox/settings';
import { consumerPolicyOf } from '../../shared/topology';

const topicArn = 'arn:aws:sns:eu-west-1:123456789012:approvals';

// One resource of every kind: what a consumer's environment must name is what it declares.
const ledger = defineConsumer({
  name: 'ledger',
  description: 'Keeps a ledger of approvals',
  subscribes: [eventTypes.approved],
  folder: new URL('.', import.meta.url),
  resources: {
    entries: table({
      description: 'Ledger entries',
      partitionKey: 'eventId',
      perEvent: { reads: 0, writes: 1, itemKb: 1 },
    }),
    alerts: topic({ description: 'Ledger alerts', displayName: 'Ledger', perEvent: { publishes: 1 } }),
    exports: bucket({ description: 'Ledger exports', perEvent: { puts: 1 } }),
    tasks: database({ description: 'Reads tasks', role: 'taskReader', perEvent: { calls: 1 } }),
  },
});
const entriesVar = resourceEnvName('entries', 'table');
const alertsVar = resourceEnvName('alerts', 'topic');
const exportsVar = resourceEnvName('exports', 'bucket');
const queueVars = Object.values(consumerQueueEnv);
/** The consumer's queue as the stack names it in the function's environment. */
const queueEnv = {
  [consumerQueueEnv.url]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/ledger',
  [consumerQueueEnv.arn]: 'arn:aws:sqs:eu-west-1:123456789012:ledger',
  [consumerQueueEnv.visibilityTimeoutSeconds]: '360',
};

/** The inbox settings as the stack writes them from the project's topology (here notify's). */
const inbox = { ...inboxSettingsFor(topology, 'notify'), openIndexShards: topology.inbox.openIndexShards };
const inboxEnv = { [consumerEnv.inboxSettings]: JSON.stringify(inbox) };

function configError(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (err) {
    if (isPipelineError(err, 'CONFIG')) return err.details.fields as { path: string; message: string }[];
    throw err;
  }
  throw new Error('expected a CONFIG error');
}

describe('consumer configuration from the environment (contract.ts and resourceEnvName names)', () => {
  it('requires the inbox table, the variable of each table, topic and bucket the consumer declares, and its queue', () => {
    expect(configError(() => parseConsumerConfig(ledger, {})).map((f) => f.path)).toEqual([
      consumerEnv.inboxTable,
      consumerEnv.inboxSettings,
      entriesVar,
      alertsVar,
      exportsVar,
      ...queueVars,
    ]);
    expect(
      configError(() =>
        parseConsumerConfig(ledger, { [consumerEnv.inboxTable]: 'inbox', ...inboxEnv, ...queueEnv }),
      ),
    ).toEqual([
      { path: entriesVar, message: 'required' },
      { path: alertsVar, message: 'required' },
      { path: exportsVar, message: 'required' },
    ]);
    expect(
      parseConsumerConfig(ledger, {
        [consumerEnv.inboxTable]: 'inbox',
        [entriesVar]: 'ledger-entries',
        [alertsVar]: topicArn,
        [exportsVar]: 'ledger-exports',
        ...inboxEnv,
        ...queueEnv,
      }),
    ).toEqual({
      name: 'ledger',
      inboxTable: 'inbox',
      inbox,
      // The database has no variable of its own: the function's database settings log in as its role.
      resources: { entries: 'ledger-entries', alerts: topicArn, exports: 'ledger-exports' },
      queue: {
        url: 'https://sqs.eu-west-1.amazonaws.com/123456789012/ledger',
        arn: 'arn:aws:sqs:eu-west-1:123456789012:ledger',
        visibilityTimeoutSeconds: 360,
      },
    });
  });

  it('lists a missing or malformed queue variable with the rest, as one CONFIG error', () => {
    const complete = {
      [consumerEnv.inboxTable]: 'inbox',
      ...inboxEnv,
      [entriesVar]: 'ledger-entries',
      [alertsVar]: topicArn,
      [exportsVar]: 'ledger-exports',
    };
    expect(
      configError(() =>
        parseConsumerConfig(ledger, { ...complete, [consumerQueueEnv.url]: queueEnv[consumerQueueEnv.url] }),
      ),
    ).toEqual([
      { path: consumerQueueEnv.arn, message: 'required' },
      { path: consumerQueueEnv.visibilityTimeoutSeconds, message: 'required' },
    ]);
    const fields = configError(() =>
      parseConsumerConfig(ledger, {
        ...complete,
        [consumerQueueEnv.url]: 'ledger',
        [consumerQueueEnv.arn]: 'arn:aws:sns:eu-west-1:123456789012:ledger',
        [consumerQueueEnv.visibilityTimeoutSeconds]: '0',
      }),
    );
    expect(fields.map((f) => f.path).sort()).toEqual([...queueVars].sort());
    expect(fields.find((f) => f.path === consumerQueueEnv.arn)?.message).toMatch(/SQS queue ARN/);
  });

  it('requires of each consumer of the registry the variables of its own resources, and no other', () => {
    for (const consumer of consumers) {
      const declared = Object.entries(consumer.resources).flatMap(([key, spec]) =>
        spec.kind === 'database' ? [] : [resourceEnvName(key, spec.kind)],
      );
      expect(
        configError(() => parseConsumerConfig(consumer, {})).map((f) => f.path),
        consumer.name,
      ).toEqual([consumerEnv.inboxTable, consumerEnv.inboxSettings, ...declared, ...queueVars]);
    }
  });

  it('refuses a CONSUMER_NAME that names another consumer, and malformed values, naming each variable', () => {
    const fields = configError(() =>
      parseConsumerConfig(ledger, {
        [consumerEnv.consumerName]: 'other',
        [consumerEnv.inboxTable]: 'x',
        [entriesVar]: 'a table?',
        [alertsVar]: 'not-an-arn',
        [exportsVar]: 'Not_A_Bucket',
        // A setting left out: the stack writes every one, so this is a bad deploy.
        [consumerEnv.inboxSettings]: JSON.stringify({ ...inbox, leaseMs: undefined }),
        ...queueEnv,
      }),
    );
    expect(fields.map((f) => f.path).sort()).toEqual(
      [
        consumerEnv.inboxTable,
        `${consumerEnv.inboxSettings}.leaseMs`,
        entriesVar,
        alertsVar,
        exportsVar,
      ].sort(),
    );
    expect(fields.find((f) => f.path === alertsVar)?.message).toMatch(/SNS topic ARN/);
    expect(fields.find((f) => f.path === exportsVar)?.message).toMatch(/S3 bucket name/);
    expect(fields.find((f) => f.path === entriesVar)?.message).toMatch(/DynamoDB table name/);
    expect(
      configError(() =>
        parseConsumerConfig(ledger, {
          [consumerEnv.consumerName]: 'other',
          [consumerEnv.inboxTable]: 'inbox',
          [entriesVar]: 'ledger-entries',
          [alertsVar]: topicArn,
          [exportsVar]: 'ledger-exports',
          ...inboxEnv,
          ...queueEnv,
        }),
      ),
    ).toEqual([{ path: consumerEnv.consumerName, message: 'is other, but this is the ledger consumer' }]);
  });
});

describe('the parts every consumer shares', () => {
  it('an inbox on the given client, the topology settings, and metrics with the consumer dimension', () => {
    const client = new DynamoDBClient({ region: 'us-east-1' });
    for (const name of consumerNames) {
      const deps = consumerDeps(
        name,
        { inboxTable: 'inbox' },
        client,
        { openIndexShards: topology.inbox.openIndexShards },
        inboxSettingsFor(topology, name),
        topology,
      );
      expect(deps.inbox).toBeInstanceOf(DynamoInboxStore);
      expect(deps.settings).toMatchObject({
        maxPermanentAttempts: consumerPolicyOf(topology, name).maxPermanentAttempts,
        maxEventAgeMs: consumerPolicyOf(topology, name).maxEventAgeSeconds * 1000,
      });
      deps.metrics.addMetric('X', 'Count', 1);
      expect(deps.metrics.serializeMetrics()).toMatchObject({ Consumer: name, service: `consumer-${name}` });
    }
    client.destroy();
  });
});
