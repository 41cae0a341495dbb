import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { consumers } from '../../functions/consumers/registry';
import { ConsumerBucket, ConsumerTable, ConsumerTopic } from '../../infra/aws/constructs/consumer-resources';
import type { AuroraDatabase } from '../../infra/aws/constructs/database';
import { PipelineStack } from '../../infra/aws/pipeline-stack';
import { parseSettings } from '../../infra/aws/settings';
import { type ConsumerDefinition, defineConsumer } from '../../shared/consumers/define-consumer';
import { bucket, database, table, topic } from '../../shared/consumers/resources';
import { eventTypes } from '../../shared/events/event-types';
import type { Topology } from '../../shared/topology';
import { topologyAdding } from '../support/topology-variants';
import { cdkJsonContext, propertiesOf, resourcesOfType, type Synthesized } from './support/synth';

// A consumer the project does not have, declared with one resource of every kind: the stack
// must make it from its declaration alone.
const fixture = defineConsumer({
  name: 'fixture',
  description: 'Keeps a ledger of approvals',
  subscribes: [eventTypes.approved],
  // Any folder with a handler.ts: the stacks below are synthesized without bundling.
  folder: (consumers[0] as ConsumerDefinition).folder,
  resources: {
    approvalLedger: table({
      description: 'One row per approval',
      partitionKey: 'eventId',
      perEvent: { reads: 0, writes: 1, itemKb: 1 },
    }),
    ledgerAlerts: topic({ description: 'Ledger alerts', displayName: 'Ledger', perEvent: { publishes: 1 } }),
    ledgerExports: bucket({ description: 'Ledger exports', perEvent: { puts: 1 } }),
    tasks: database({ description: 'Reads the approved task', role: 'taskReader', perEvent: { calls: 1 } }),
  },
});

const stackOf = (variant: Topology, id = 'Variant') => {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const settings = parseSettings((k) => app.node.tryGetContext(k));
  return new PipelineStack(app, id, { settings, topology: variant });
};

describe('a consumer added to the registry, on AWS', () => {
  let stack: PipelineStack;
  let s: Pick<Synthesized, 'json'>;
  beforeAll(() => {
    stack = stackOf(topologyAdding(fixture));
    s = { json: Template.fromStack(stack).toJSON() as Synthesized['json'] };
  });
  const logicalId = (c: IConstruct) => stack.getLogicalId(c.node.defaultChild as never);
  const fn = () => stack.pipeline.consumers.get('fixture' as never)?.function as IConstruct;
  const variables = () =>
    (propertiesOf(s, logicalId(fn())).Environment as { Variables: Record<string, unknown> }).Variables;
  const statements = () => {
    const role = logicalId((fn() as unknown as { role: IConstruct }).role);
    return resourcesOfType(s, 'AWS::IAM::Policy')
      .filter(([, p]) => JSON.stringify(p.Properties?.Roles) === JSON.stringify([{ Ref: role }]))
      .flatMap(
        ([, p]) => (p.Properties?.PolicyDocument as { Statement: unknown[] } | undefined)?.Statement ?? [],
      );
  };
  const made = () => {
    const resources = stack.pipeline.consumerResources.get('fixture');
    const ledger = resources?.get('approvalLedger');
    const alerts = resources?.get('ledgerAlerts');
    const exports = resources?.get('ledgerExports');
    if (
      !(
        ledger instanceof ConsumerTable &&
        alerts instanceof ConsumerTopic &&
        exports instanceof ConsumerBucket
      )
    )
      throw new Error('the fixture consumer’s resources were not made as declared');
    return { ledger: ledger.table, alerts: alerts.topic, exports: exports.bucket };
  };

  it('makes each declared table, topic and bucket as a construct named after its key', () => {
    const { ledger, alerts, exports } = made();
    expect(ledger.node.path).toBe('Variant/Default/ApprovalLedger/Table');
    expect(alerts.node.path).toBe('Variant/Default/LedgerAlerts/Topic');
    expect(exports.node.path).toBe('Variant/Default/LedgerExports/Bucket');
    expect(s.json.Resources[logicalId(ledger)]?.Properties).toMatchObject({
      KeySchema: [{ AttributeName: 'eventId', KeyType: 'HASH' }],
    });
    expect(s.json.Resources[logicalId(alerts)]?.Properties).toMatchObject({ DisplayName: 'Ledger' });
  });

  it('names each to the function by its variable, and logs it in as its database role', () => {
    const { ledger, alerts, exports } = made();
    const aurora = stack.pipeline.database as AuroraDatabase;
    expect(variables()).toMatchObject({
      APPROVAL_LEDGER_TABLE_NAME: { Ref: logicalId(ledger) },
      LEDGER_ALERTS_TOPIC_ARN: { Ref: logicalId(alerts) },
      LEDGER_EXPORTS_BUCKET_NAME: { Ref: logicalId(exports) },
      DB_SECRET_ARN: { Ref: logicalId(aurora.roleSecrets.get('taskReader') as unknown as IConstruct) },
    });
  });

  it('grants the function what each kind needs and nothing more', () => {
    const { ledger, alerts, exports } = made();
    const onResources = statements().filter((st) =>
      [ledger, alerts, exports].some((r) => JSON.stringify(st).includes(`"${logicalId(r)}"`)),
    );
    expect(onResources).toEqual([
      {
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        Effect: 'Allow',
        Resource: { 'Fn::GetAtt': [logicalId(ledger), 'Arn'] },
      },
      { Action: 'sns:Publish', Effect: 'Allow', Resource: { Ref: logicalId(alerts) } },
      {
        Action: 's3:PutObject',
        Effect: 'Allow',
        Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalId(exports), 'Arn'] }, '/*']] },
      },
    ]);
  });

  it('exports each with its declared description', () => {
    expect(s.json.Outputs).toMatchObject({
      ApprovalLedgerTableName: { Description: 'One row per approval' },
      LedgerAlertsTopicArn: { Description: 'Ledger alerts' },
      LedgerExportsBucketName: { Description: 'Ledger exports' },
    });
  });

  it('points CDK’s one auto-delete handler at one log group, whichever bucket came first', () => {
    const handlers = resourcesOfType(s, 'AWS::Lambda::Function').filter(([id]) =>
      id.startsWith('CustomS3AutoDeleteObjectsCustomResourceProviderHandler'),
    );
    expect(handlers).toHaveLength(1);
    const logGroups = resourcesOfType(s, 'AWS::Logs::LogGroup').filter(([id]) =>
      id.includes('AutoDeleteLogs'),
    );
    expect(logGroups).toHaveLength(1);
    const [groupId] = logGroups[0] ?? [];
    expect(handlers[0]?.[1].Properties?.LoggingConfig).toEqual({ LogGroup: { Ref: groupId } });
  });
});

describe('consumer resources the stack refuses', () => {
  it('refuses two consumers declaring one resource key, naming both', () => {
    const key = Object.keys(fixture.resources)[0] as string;
    const twin = defineConsumer({
      name: 'twin',
      description: 'Declares the fixture’s table again',
      subscribes: [eventTypes.approved],
      folder: fixture.folder,
      resources: { [key]: fixture.resources.approvalLedger },
    });
    expect(() => stackOf(topologyAdding(fixture, twin))).toThrow(
      /consumers fixture and twin both declare a resource "approvalLedger"/,
    );
  });

  it('refuses a topology whose consumers are not its registry’s', () => {
    const variant = { ...topologyAdding(fixture), registry: consumers } as Topology;
    expect(() => stackOf(variant)).toThrow(/the topology's consumers \(.*fixture\) are not its registry's/);
  });
});
