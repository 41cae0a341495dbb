import { describe, expect, it } from 'vitest';
import {
  allows,
  type CfnTemplate,
  conditionsHold,
  roleStatements,
  TemplateResolver,
} from '../rehearsal/template';

// A hand-made template in the shapes CDK writes: a table, a function's role and its policy.
const template: CfnTemplate = {
  Resources: {
    Inbox: { Type: 'AWS::DynamoDB::Table', Properties: {} },
    Bus: { Type: 'AWS::Events::EventBus', Properties: { Name: 'content-pipeline-sandbox' } },
    Secret: { Type: 'AWS::SecretsManager::Secret', Properties: {} },
    FnRole: { Type: 'AWS::IAM::Role', Properties: {} },
    Fn: {
      Type: 'AWS::Lambda::Function',
      Properties: { Role: { 'Fn::GetAtt': ['FnRole', 'Arn'] } },
    },
    FnPolicy: {
      Type: 'AWS::IAM::Policy',
      Properties: {
        Roles: [{ Ref: 'FnRole' }],
        PolicyDocument: {
          Statement: [
            {
              Effect: 'Allow',
              Action: ['dynamodb:GetItem', 'dynamodb:PutItem'],
              Resource: { 'Fn::GetAtt': ['Inbox', 'Arn'] },
            },
            {
              Effect: 'Allow',
              Action: 'dynamodb:Query',
              Resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': ['Inbox', 'Arn'] }, '/index/open-records']] },
            },
            { Effect: 'Allow', Action: 'events:PutEvents', Resource: { 'Fn::GetAtt': ['Bus', 'Arn'] } },
            {
              Effect: 'Allow',
              Action: 'dynamodb:UpdateItem',
              Resource: { 'Fn::GetAtt': ['Inbox', 'Arn'] },
              Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['index#*'] } },
            },
            { Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: { Ref: 'Secret' } },
            { Effect: 'Allow', Action: 'xray:PutTraceSegments', Resource: '*' },
            { Effect: 'Allow', Action: 's3:PutObject', Resource: { 'Fn::GetAtt': ['Unknown', 'Arn'] } },
          ],
        },
      },
    },
  },
};

const resolver = new TemplateResolver(template, {
  stackName: 'ContentPipeline-sandbox',
  region: 'us-east-1',
  account: '123456789012',
  queueUrl: (n) => `http://127.0.0.1:1/123456789012/${n}`,
});
const statements = roleStatements(resolver, 'FnRole');

describe('the rehearsal’s template reading', () => {
  it('resolves Ref, GetAtt and Join to the ARNs a deployment would have', () => {
    expect(resolver.getAtt('Inbox', 'Arn')).toBe('arn:aws:dynamodb:us-east-1:123456789012:table/Inbox');
    expect(resolver.ref('Bus')).toBe('content-pipeline-sandbox');
    expect(resolver.resolve({ 'Fn::Join': ['-', [{ Ref: 'AWS::StackName' }, 'x']] })).toBe(
      'ContentPipeline-sandbox-x',
    );
    expect(resolver.ref('Secret')).toMatch(/^arn:aws:secretsmanager:us-east-1:123456789012:secret:Secret-/);
  });

  it('allows exactly what the role’s statements allow, action and resource', () => {
    const table = 'arn:aws:dynamodb:us-east-1:123456789012:table/Inbox';
    expect(allows(statements, 'dynamodb:PutItem', table)).toBe(true);
    expect(allows(statements, 'dynamodb:DeleteItem', table)).toBe(false);
    expect(allows(statements, 'dynamodb:Query', table)).toBe(false);
    expect(allows(statements, 'dynamodb:Query', `${table}/index/open-records`)).toBe(true);
    expect(
      allows(statements, 'dynamodb:GetItem', 'arn:aws:dynamodb:us-east-1:123456789012:table/Other'),
    ).toBe(false);
    expect(
      allows(statements, 'events:PutEvents', 'arn:aws:events:us-east-1:123456789012:event-bus/default'),
    ).toBe(false);
    expect(allows(statements, 'xray:PutTraceSegments', '*')).toBe(true);
  });

  it('applies a conditioned statement only where every leading key matches its pattern', () => {
    const table = 'arn:aws:dynamodb:us-east-1:123456789012:table/Inbox';
    const keys = (...values: string[]) => ({ 'dynamodb:LeadingKeys': values });
    expect(allows(statements, 'dynamodb:UpdateItem', table, keys('index#e-1'))).toBe(true);
    expect(allows(statements, 'dynamodb:UpdateItem', table, keys('archive#e-1'))).toBe(false);
    expect(allows(statements, 'dynamodb:UpdateItem', table, keys('index#e-1', 'notify#e-2'))).toBe(false);
    // `index#*` is not `indexer#...`: the separator is part of the pattern.
    expect(allows(statements, 'dynamodb:UpdateItem', table, keys('indexer#e-1'))).toBe(false);
    // ForAllValues over no values holds, as in IAM (why consumers get no Query or Scan).
    expect(allows(statements, 'dynamodb:UpdateItem', table)).toBe(true);
  });

  it('refuses to judge a condition operator it does not know, rather than pass it', () => {
    expect(() => conditionsHold({ NumericLessThan: { 'aws:MultiFactorAuthAge': ['3600'] } }, {})).toThrow(
      /cannot evaluate the condition operator NumericLessThan/,
    );
  });

  it('judges the single-valued operators a bus policy uses, the negated ones holding for an absent key', () => {
    const relay = 'arn:aws:iam::123456789012:role/RelayRole';
    const onlyOthers = {
      StringLike: { 'events:source': ['content.*'] },
      ArnNotEquals: { 'aws:PrincipalArn': [relay] },
    };

    expect(
      conditionsHold(onlyOthers, {
        'events:source': ['content.pipeline'],
        'aws:PrincipalArn': ['arn:aws:iam::123456789012:role/admin'],
      }),
    ).toBe(true);
    expect(
      conditionsHold(onlyOthers, { 'events:source': ['content.pipeline'], 'aws:PrincipalArn': [relay] }),
    ).toBe(false);
    expect(
      conditionsHold(onlyOthers, { 'events:source': ['billing.invoices'], 'aws:PrincipalArn': ['x'] }),
    ).toBe(false);
    expect(conditionsHold({ StringNotEquals: { 'aws:SourceAccount': ['1'] } }, {})).toBe(true);
    expect(conditionsHold({ StringEquals: { 'aws:SourceAccount': ['1'] } }, {})).toBe(false);
  });

  it('never counts a statement whose resource it cannot resolve as a match', () => {
    expect(allows(statements, 's3:PutObject', 'arn:aws:s3:::bucket/key')).toBe(false);
  });
});
