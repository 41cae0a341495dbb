import { beforeAll, describe, expect, it } from 'vitest';
import { parseSettings } from '../../infra/aws/settings';
import { resourcesOfType, type Synthesized, synthPipeline } from './support/synth';

describe('the prod stage (-c stage=prod)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthPipeline({ stage: 'prod', dbMinCapacity: '0.5', relayReservedConcurrency: 'none' });
  });

  it('retains the data stores and turns deletion protection on', () => {
    s.template.hasResource('AWS::RDS::DBCluster', {
      DeletionPolicy: 'Retain',
      Properties: { DeletionProtection: true },
    });
    for (const [id, table] of resourcesOfType(s, 'AWS::DynamoDB::Table')) {
      expect(table.DeletionPolicy, id).toBe('Retain');
      expect(table.Properties?.DeletionProtectionEnabled, id).toBe(true);
    }
    s.template.hasResource('AWS::S3::Bucket', { DeletionPolicy: 'Retain' });
    expect(resourcesOfType(s, 'Custom::S3AutoDeleteObjects')).toHaveLength(0);
  });

  it('keeps capacity warm and backups longer, and reserves no relay concurrency when told', () => {
    s.template.hasResourceProperties('AWS::RDS::DBCluster', {
      ServerlessV2ScalingConfiguration: { MinCapacity: 0.5, MaxCapacity: 8 },
      BackupRetentionPeriod: 14,
    });
    const relay = s.stack.getLogicalId(s.stack.relay.function.node.defaultChild as never);
    expect(s.json.Resources[relay]?.Properties?.ReservedConcurrentExecutions).toBeUndefined();
  });
});

describe('context settings', () => {
  const parse = (ctx: Record<string, unknown>) => parseSettings((k) => ctx[k]);

  it('rejects a misspelt stage and a bad email in one error, and min capacity above max', () => {
    expect(() => parse({ stage: 'staging', alarmEmail: 'nope' })).toThrow(/stage:.*alarmEmail:/s);
    expect(() => parse({ dbMinCapacity: 9, dbMaxCapacity: 4 })).toThrow(/dbMinCapacity: .*must not exceed/);
  });

  it('accepts capacity 0 (auto-pause) and numbers given as -c strings', () => {
    expect(parse({ dbMinCapacity: '0', dbMaxCapacity: '4' })).toMatchObject({
      dbMinCapacity: 0,
      dbMaxCapacity: 4,
    });
  });
});
