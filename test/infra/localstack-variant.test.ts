import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import type { Consumer } from '../../infra/aws/constructs/consumer';
import { defaultLocalStackDatabaseUrl, parseSettings } from '../../infra/aws/settings';
import { propertiesOf, resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

describe('the LocalStack variant (-c target=localstack)', () => {
  const url = 'postgres://pipeline:secret@db.internal:5432/pipeline';
  let s: Synthesized;
  beforeAll(() => {
    s = synthPipeline({ target: 'localstack', databaseUrl: url });
  });
  const envOf = (fn: CfnFunction | undefined) =>
    (
      propertiesOf(s, s.stack.getLogicalId(fn as CfnFunction)).Environment as {
        Variables: Record<string, unknown>;
      }
    ).Variables;
  // Consumers that declare the database resource, and those that do not.
  const declaresDatabase = (c: Consumer) =>
    Object.values(topology.registry.find((d) => d.name === c.name)?.resources ?? {}).some(
      (r) => r.kind === 'database',
    );
  const consumers = () => [...s.stack.pipeline.consumers.values()];
  const dbFunctions = () => [
    s.stack.pipeline.tasksApi.function,
    s.stack.pipeline.relay.function,
    s.stack.pipeline.migration.function,
    ...consumers()
      .filter(declaresDatabase)
      .map((c) => c.function),
  ];

  it('replaces Aurora, its VPC and the Data API with the PostgreSQL URL', () => {
    for (const type of ['AWS::RDS::DBCluster', 'AWS::EC2::VPC', 'AWS::SecretsManager::Secret']) {
      expect(resourcesOfType(s, type), type).toHaveLength(0);
    }
    expect(JSON.stringify(s.json)).not.toContain('rds-data:');
    expect(Object.keys(s.json.Outputs ?? {})).not.toContain('ClusterArn');
  });

  it('gives DATABASE_URL (the pg adapter) to every function that reads PostgreSQL, and nothing else', () => {
    expect(dbFunctions().length).toBeGreaterThan(3);
    for (const fn of dbFunctions()) {
      const env = envOf(fn?.node.defaultChild as CfnFunction);
      expect(env.DATABASE_URL).toBe(url);
      for (const key of ['DB_CLUSTER_ARN', 'DB_SECRET_ARN', 'DB_NAME']) expect(env).not.toHaveProperty(key);
    }
    const others = consumers().filter((c) => !declaresDatabase(c));
    expect(others).not.toEqual([]);
    for (const consumer of others) {
      const env = envOf(consumer.function.node.defaultChild as CfnFunction);
      expect(env, consumer.name).not.toHaveProperty('DATABASE_URL');
    }
  });

  it('keeps the rest of the pipeline: API, bus, rules, consumers, migration, alarms', () => {
    for (const type of [
      'AWS::ApiGateway::RestApi',
      'AWS::Events::EventBus',
      'AWS::Lambda::EventInvokeConfig',
      'Custom::PipelineSchema',
      'AWS::CloudWatch::Alarm',
    ]) {
      expect(resourcesOfType(s, type).length, type).toBeGreaterThan(0);
    }
  });

  it('defaults the URL to the docker-compose PostgreSQL as LocalStack Lambdas see it', () => {
    const settings = parseSettings((key) => ({ target: 'localstack' })[key as 'target']);
    expect(settings.databaseUrl).toBe(defaultLocalStackDatabaseUrl);
    expect(defaultLocalStackDatabaseUrl).toMatch(/@postgres:5432\//); // the compose service name
  });
});
