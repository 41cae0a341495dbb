import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { consumers } from '../../functions/consumers/registry';
import { PipelineStack } from '../../infra/aws/pipeline-stack';
import { parseSettings } from '../../infra/aws/settings';
import { queueMaxReceiveCount } from '../../shared/consumers/queue-delivery';
import { translate } from '../fixtures/consumers/translate/consumer';
import { topologyAdding } from '../support/topology-variants';
import { type CfnResourceJson, cdkJsonContext, resourcesOfType, type Synthesized } from './support/synth';

// Issue 19: a consumer added through the registry alone (its folder is test/fixtures/consumers/
// translate; nothing else of the project knows it) is realized on AWS like the project's own:
// its function, its table, topic, bucket and database login and their grants, a target of the rule of each event it subscribes to
// with its dead-letter queue, its own queue in front of its function (the event source mapping
// its policy sizes, the queue's DLQ), its alarms, and a stack output naming its table.

let json: Synthesized['json'];
let fnId: string;

const resource = (id: string): CfnResourceJson => {
  const r = json.Resources[id];
  if (!r) throw new Error(`no resource ${id}`);
  return r;
};
const props = (r: CfnResourceJson): Record<string, unknown> => r.Properties ?? {};
const variablesOf = (id: string) =>
  (props(resource(id)).Environment as { Variables: Record<string, unknown> }).Variables;
const refOf = (value: unknown): string | undefined =>
  (value as { Ref?: string } | undefined)?.Ref ??
  (value as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt']?.[0];

/** Every statement of the policies attached to the fixture's function's role. */
const policyStatements = (): Record<string, unknown>[] => {
  const role = refOf(resource(fnId).Properties?.Role) as string;
  return resourcesOfType({ json }, 'AWS::IAM::Policy')
    .filter(([, p]) => (props(p).Roles as unknown[]).some((r) => refOf(r) === role))
    .flatMap(([, p]) => (props(p).PolicyDocument as { Statement: Record<string, unknown>[] }).Statement);
};

beforeAll(() => {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const settings = parseSettings((k) => app.node.tryGetContext(k));
  const stack = new PipelineStack(app, 'WithFixture', {
    settings,
    topology: topologyAdding(translate),
  });
  json = Template.fromStack(stack).toJSON() as Synthesized['json'];
  const fns = resourcesOfType({ json }, 'AWS::Lambda::Function').filter(
    ([, r]) =>
      (r.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables
        ?.CONSUMER_NAME === 'translate',
  );
  expect(fns).toHaveLength(1);
  fnId = (fns[0] as [string, CfnResourceJson])[0];
});

describe('a fixture consumer added through the registry alone, on AWS', () => {
  it('gets a function of its own, with its table named in its environment', () => {
    const fn = resource(fnId).Properties ?? {};
    expect(fn.Description).toBe(translate.description);
    const env = (fn.Environment as { Variables: Record<string, unknown> }).Variables;
    const tableId = refOf(env.TRANSLATIONS_TABLE_NAME) as string;
    expect(resource(tableId).Type).toBe('AWS::DynamoDB::Table');
    expect(resource(tableId).Properties?.KeySchema).toEqual([{ AttributeName: 'taskId', KeyType: 'HASH' }]);
    expect(refOf((json.Outputs?.TranslationsTableName as { Value?: unknown } | undefined)?.Value)).toBe(
      tableId,
    );
  });

  it('may read and put items of its table and its own inbox records, and nothing of another consumer’s', () => {
    const statements = policyStatements();
    const text = JSON.stringify(statements);
    const tableId = refOf(variablesOf(fnId).TRANSLATIONS_TABLE_NAME) as string;
    const onTable = statements.filter((s) => JSON.stringify(s.Resource).includes(tableId));
    expect(onTable.flatMap((s) => [s.Action].flat()).sort()).toEqual([
      'dynamodb:GetItem',
      'dynamodb:PutItem',
    ]);
    expect(text).toContain('translate#*');
    for (const other of consumers.filter((c) => c.name !== (translate.name as string))) {
      expect(text).not.toContain(`${other.name}#*`);
      for (const key of Object.keys(other.resources))
        expect(text).not.toContain(`${key[0]?.toUpperCase()}${key.slice(1)}`);
    }
  });

  it('gets its topic, bucket and database as it declares them, named in its environment and granted', () => {
    const statements = policyStatements();
    const actionsOn = (id: string) =>
      statements
        .filter((s) => JSON.stringify(s.Resource).includes(id))
        .flatMap((s) => [s.Action].flat())
        .sort();
    const env = variablesOf(fnId);
    const topicId = refOf(env.TRANSLATED_TOPIC_ARN) as string;
    expect(resource(topicId).Type).toBe('AWS::SNS::Topic');
    expect(resource(topicId).Properties?.DisplayName).toBe('Translations');
    expect(actionsOn(topicId)).toContain('sns:Publish');
    const bucketId = refOf(env.RENDITIONS_BUCKET_NAME) as string;
    expect(resource(bucketId).Type).toBe('AWS::S3::Bucket');
    expect(actionsOn(bucketId)).toContain('s3:PutObject');
    // Its database resource logs in as the role it names: that role's secret, and the Data API.
    const secretId = refOf(env.DB_SECRET_ARN) as string;
    expect(resource(secretId).Type).toBe('AWS::SecretsManager::Secret');
    expect(actionsOn(secretId)).toContain('secretsmanager:GetSecretValue');
    expect(statements.flatMap((s) => [s.Action].flat())).toContain('rds-data:ExecuteStatement');
  });

  it('has its queue be a target of the rule of each event type it subscribes to, with a dead-letter queue and the policy’s retries', () => {
    const queueId = refOf(variablesOf(fnId).CONSUMER_QUEUE_ARN) as string;
    const targets = resourcesOfType({ json }, 'AWS::Events::Rule').flatMap(([, r]) =>
      ((r.Properties?.Targets ?? []) as Record<string, unknown>[])
        .filter((t) => refOf(t.Arn) === queueId)
        .map((t) => ({ rule: r.Properties?.Name as string, target: t })),
    );
    expect(targets.map((t) => t.rule)).toEqual([expect.stringMatching(/-content-approved$/)]);
    const target = (targets[0] as { target: Record<string, unknown> }).target;
    expect(target.RetryPolicy).toEqual({
      MaximumRetryAttempts: translate.policy.targetRetry.maximumRetryAttempts,
      MaximumEventAgeInSeconds: translate.policy.targetRetry.maximumEventAgeSeconds,
    });
    const dlq = refOf((target.DeadLetterConfig as { Arn: unknown }).Arn) as string;
    expect(resource(dlq).Type).toBe('AWS::SQS::Queue');
    const alarms = resourcesOfType({ json }, 'AWS::CloudWatch::Alarm').filter(([, a]) =>
      JSON.stringify(a.Properties?.Dimensions ?? a.Properties?.Metrics).includes(dlq),
    );
    expect(alarms.length).toBeGreaterThanOrEqual(1);
  });

  it('is fed by its own queue as its policy says, and what it never handles goes to the queue’s DLQ', () => {
    const queueId = refOf(variablesOf(fnId).CONSUMER_QUEUE_ARN) as string;
    const queue = props(resource(queueId));
    expect(resource(queueId).Type).toBe('AWS::SQS::Queue');
    expect(queue.MessageRetentionPeriod).toBe(translate.policy.queue.retentionSeconds);
    const redrive = queue.RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number };
    expect(redrive.maxReceiveCount).toBe(queueMaxReceiveCount(translate.policy));
    expect(resource(refOf(redrive.deadLetterTargetArn) as string).Type).toBe('AWS::SQS::Queue');
    const mappings = resourcesOfType({ json }, 'AWS::Lambda::EventSourceMapping').filter(
      ([, m]) => refOf(m.Properties?.FunctionName) === fnId,
    );
    expect(mappings.map(([, m]) => props(m))).toEqual([
      expect.objectContaining({
        BatchSize: translate.policy.queue.batchSize,
        ScalingConfig: { MaximumConcurrency: translate.policy.queue.maxConcurrency },
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      }),
    ]);
    expect(refOf((mappings[0] as [string, CfnResourceJson])[1].Properties?.EventSourceArn)).toBe(queueId);
    // Nothing invokes it but its mapping: no invoke configuration, no resource policy.
    for (const type of ['AWS::Lambda::EventInvokeConfig', 'AWS::Lambda::Permission'])
      expect(
        resourcesOfType({ json }, type).filter(([, r]) => refOf(r.Properties?.FunctionName) === fnId),
      ).toEqual([]);
  });
});

describe('the project’s consumers’ stateful resources, now built from their declarations', () => {
  // Their logical ids before the declarations (8c115cb): a new id would make CloudFormation
  // replace the content index, the snapshots bucket, the notification topic (and its
  // subscriptions) or the task reader's secret, losing what they hold.
  it.each([
    ['AWS::DynamoDB::Table', 'ContentIndexTable12A72E1A'],
    ['AWS::S3::Bucket', 'ArchiveBucket49F1AC64'],
    ['AWS::SNS::Topic', 'NotificationsTopicAE679CBD'],
    ['AWS::SecretsManager::Secret', 'DatabaseSecretarchive4B859CF0'],
  ])('keeps its %s as %s', (type, id) => {
    expect(resource(id).Type).toBe(type);
  });
});
