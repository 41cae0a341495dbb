import { App, Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AttributeType, BillingMode, ProjectionType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { EventBus } from 'aws-cdk-lib/aws-events';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { ContentPipeline, type ContentPipelineProps } from '../../infra/aws/content-pipeline';
import { consumerEnv } from '../../shared/consumers/contract';
import { cdkJsonContext } from './support/synth';

// A user's own app and stack, not PipelineStack: the construct alone, with what the user brings.
const env = { account: '123456789012', region: 'eu-west-1' };
const userStack = () =>
  new Stack(new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } }), 'TheirStack', {
    env,
  });

/** A table shaped as the inbox needs, in the user's stack; `change` may spoil it. */
function theirInbox(
  stack: Stack,
  change: { sortKey?: boolean; index?: boolean; ttl?: boolean; key?: boolean } = {},
) {
  const table = new Table(stack, 'TheirInbox', {
    partitionKey: { name: 'pk', type: AttributeType.STRING },
    sortKey: change.sortKey ? { name: 'sk', type: AttributeType.STRING } : undefined,
    timeToLiveAttribute: change.ttl === false ? undefined : 'expiresAt',
    billingMode: BillingMode.PAY_PER_REQUEST,
    encryption: change.key ? TableEncryption.CUSTOMER_MANAGED : TableEncryption.DEFAULT,
    encryptionKey: change.key ? new Key(stack, 'TheirKey') : undefined,
  });
  if (change.index !== false) {
    table.addGlobalSecondaryIndex({
      indexName: 'open-records',
      partitionKey: { name: 'openKey', type: AttributeType.STRING },
      sortKey: { name: 'openSince', type: AttributeType.STRING },
      projectionType: ProjectionType.KEYS_ONLY,
    });
  }
  return table;
}

const variablesOf = (template: Template, stack: Stack, fn: { node: { defaultChild?: unknown } }) =>
  (
    template.toJSON().Resources[stack.getLogicalId(fn.node.defaultChild as never)].Properties.Environment as {
      Variables: Record<string, unknown>;
    }
  ).Variables;

describe('the pipeline in a user’s own stack, on their bus', () => {
  let stack: Stack;
  let pipeline: ContentPipeline;
  let template: Template;
  beforeAll(() => {
    stack = userStack();
    const bus = EventBus.fromEventBusName(stack, 'TheirBus', 'their-bus');
    pipeline = new ContentPipeline(stack, 'Pipeline', {
      topology,
      existingEventBus: bus,
    });
    template = Template.fromStack(stack);
  });

  it('creates no bus, and puts the archive and every topology rule on theirs', () => {
    template.resourceCountIs('AWS::Events::EventBus', 0);
    template.resourcePropertiesCountIs(
      'AWS::Events::Rule',
      { EventBusName: 'their-bus' },
      topology.rules.length,
    );
    template.hasResourceProperties('AWS::Events::Archive', {
      SourceArn: stack.resolve(pipeline.fanout.bus.eventBusArn),
      EventPattern: { source: [topology.source] },
    });
    expect(pipeline.fanout.archive.node.scope?.node.path).toBe(pipeline.fanout.node.path);
  });

  it('adds the statement that lets only the relay put pipeline events to their bus’s policy', () => {
    const relayRole = stack.resolve(pipeline.relay.function.role?.roleArn);
    template.hasResourceProperties('AWS::Events::EventBusPolicy', {
      EventBusName: 'their-bus',
      Statement: Match.objectLike({
        Effect: 'Deny',
        Action: 'events:PutEvents',
        Principal: { AWS: '*' },
        Condition: {
          StringLike: { 'events:source': ['content.*'] },
          ArnNotEquals: { 'aws:PrincipalArn': relayRole },
        },
      }),
    });
  });

  it('has the relay publish to their bus, allowed to', () => {
    expect(variablesOf(template, stack, pipeline.relay.function).EVENT_BUS_NAME).toBe('their-bus');
    template.hasResourceProperties('AWS::IAM::Policy', {
      Roles: [stack.resolve(pipeline.relay.function.role?.roleName)],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: 'events:PutEvents',
            Resource: stack.resolve(pipeline.fanout.bus.eventBusArn),
          }),
        ]),
      },
    });
  });

  it('builds the rest as PipelineStack does, with the sandbox defaults and none of the stack’s outputs', () => {
    expect([...pipeline.consumers.keys()].sort()).toEqual(Object.keys(topology.consumers).sort());
    template.resourceCountIs('AWS::RDS::DBCluster', 1);
    template.hasResourceProperties('AWS::RDS::DBCluster', {
      ServerlessV2ScalingConfiguration: { MinCapacity: 0, MaxCapacity: 2 },
    });
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 0);
    // Only API Gateway's own (a RestApi's `Endpoint`): the outputs the ops CLI reads are the stack's to add.
    const outputs = Object.keys(template.toJSON().Outputs ?? {});
    expect(outputs.filter((id) => !id.startsWith('PipelineTasksApiEndpoint'))).toEqual([]);
    expect(pipeline.settings.stage).toBe('sandbox');
  });
});

describe('the pipeline on a user’s inbox table and alarm topic', () => {
  it('grants and points every inbox user at their table, and sends every alarm to their topic', () => {
    const stack = userStack();
    const table = theirInbox(stack);
    const topic = new Topic(stack, 'TheirAlarms');
    const pipeline = new ContentPipeline(stack, 'Pipeline', {
      topology,
      existingInboxTable: table,
      existingAlarmTopic: topic,
      alarmEmail: 'ops@example.com',
    });
    const template = Template.fromStack(stack);

    // Theirs and the tables the consumers declare: no inbox table of ours.
    const declaredTables = topology.registry.flatMap((c) =>
      Object.values(c.resources).filter((r) => r.kind === 'table'),
    );
    template.resourceCountIs('AWS::DynamoDB::Table', 1 + declaredTables.length);
    const theirTable = stack.resolve(table.tableName);
    for (const consumer of pipeline.consumers.values()) {
      expect(variablesOf(template, stack, consumer.function)[consumerEnv.inboxTable]).toEqual(theirTable);
    }
    expect(variablesOf(template, stack, pipeline.audit.function)[consumerEnv.inboxTable]).toEqual(theirTable);

    const theirTopic = stack.resolve(topic.topicArn);
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms.length).toBe(pipeline.alarms.all.length);
    for (const alarm of alarms) {
      expect(alarm.Properties.AlarmActions).toEqual([theirTopic]);
      expect(alarm.Properties.OKActions).toEqual([theirTopic]);
    }
    // Theirs and the topics the consumers declare: no alarm topic or key of ours.
    const declaredTopics = topology.registry.flatMap((c) =>
      Object.values(c.resources).filter((r) => r.kind === 'topic'),
    );
    template.resourceCountIs('AWS::SNS::Topic', 1 + declaredTopics.length);
    template.resourceCountIs('AWS::KMS::Key', 0);
    template.hasResourceProperties('AWS::SNS::Subscription', {
      TopicArn: theirTopic,
      Protocol: 'email',
      Endpoint: 'ops@example.com',
    });
  });
});

describe('props checked when the construct is built', () => {
  const build =
    (props: Omit<ContentPipelineProps, 'topology'>, stack = userStack()) =>
    () =>
      new ContentPipeline(stack, 'Pipeline', { topology, ...props });

  it('rejects a minimum capacity above the maximum, the stage’s default maximum included', () => {
    expect(build({ dbMinCapacity: 8, dbMaxCapacity: 4 })).toThrow(
      'invalid ContentPipeline props: dbMinCapacity: must not exceed dbMaxCapacity (8 > 4)',
    );
    expect(build({ dbMinCapacity: 4 })).toThrow(/dbMinCapacity: must not exceed dbMaxCapacity \(4 > 2\)/);
  });

  it('names every bad setting in one error', () => {
    expect(
      build({ relaySweepMinutes: 0, apiRatePerSecond: -5, relayReservedConcurrency: 1.5, alarmEmail: 'ops' }),
    ).toThrow(
      /^invalid ContentPipeline props: alarmEmail: must be an email address; relayReservedConcurrency: .*; relaySweepMinutes: .*; apiRatePerSecond: .*$/,
    );
  });

  it('says what an inbox table of theirs lacks', () => {
    for (const [change, lack] of [
      [{ sortKey: true }, 'it must have partition key "pk" and no sort key'],
      [{ index: false }, 'it must have a global secondary index "open-records" with partition key "openKey"'],
      [{ ttl: false }, 'it must have time to live on "expiresAt"'],
      [{ key: true }, 'it is encrypted with a customer managed KMS key'],
    ] as const) {
      const stack = userStack();
      expect(build({ existingInboxTable: theirInbox(stack, change) }, stack), lack).toThrow(
        `the existing inbox table TheirStack/TheirInbox does not fit the inbox: ${lack}`,
      );
    }
  });

  it('takes an imported table on trust', () => {
    const stack = userStack();
    expect(
      build({ existingInboxTable: Table.fromTableName(stack, 'Imported', 'their-inbox') }, stack),
    ).not.toThrow();
  });

  it('rejects a bus in another Region than the stack', () => {
    const stack = userStack();
    const bus = EventBus.fromEventBusArn(stack, 'Far', 'arn:aws:events:us-west-2:123456789012:event-bus/far');
    expect(build({ existingEventBus: bus }, stack)).toThrow(
      "invalid ContentPipeline props: existingEventBus: is in region us-west-2, the pipeline's stack in eu-west-1",
    );
  });
});
