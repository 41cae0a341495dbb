import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CloudWatchClient,
  DescribeAlarmsCommand,
  GetMetricDataCommand,
  PutMetricDataCommand,
  SetAlarmStateCommand,
} from '@aws-sdk/client-cloudwatch';
import {
  BatchWriteItemCommand,
  CreateTableCommand,
  DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import {
  DisableRuleCommand,
  EnableRuleCommand,
  EventBridgeClient,
  PutEventsCommand,
} from '@aws-sdk/client-eventbridge';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import {
  BeginTransactionCommand,
  CommitTransactionCommand,
  ExecuteStatementCommand,
  RDSDataClient,
} from '@aws-sdk/client-rds-data';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import {
  DescribeSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDynalite } from '../../infra/local/dynamo';
import { FaultInjector, noFaults } from '../../infra/local/faults';
import { LocalBus } from '../../infra/local/local-bus';
import { snsSubject as topicSubject } from '../../shared/consumers/topic-subject';

/** The subject as notify makes it for an approval: its prefix, then the title. */
const snsSubject = (title: string) => topicSubject(title, 'Approved: ');

import { topology } from '../../functions/topology';
import {
  anonymousCaller,
  CallRecorder,
  endpointEnvNames,
  parseSigV4Authorization,
  type RecordedCall,
  startAwsStandins,
  startS3rver,
} from '../support/aws';
import { type CloudWatchStandin, startCloudWatchStandin } from '../support/aws/cloudwatch';
import { startDynamoDbProxy } from '../support/aws/dynamodb';
import { describeEventBridgeRequest, startEventBridgeProxy } from '../support/aws/eventbridge';
import type { LocalEndpoint } from '../support/aws/http';
import { type LambdaStandin, startLambdaStandin } from '../support/aws/lambda';
import type { ProxiedRequest } from '../support/aws/proxy';
import { startRdsDataProxy } from '../support/aws/rds-data';
import { startS3Proxy } from '../support/aws/s3';
import { type SecretsManagerStandin, startSecretsManagerStandin } from '../support/aws/secrets-manager';
import { type SnsStandin, startSnsStandin } from '../support/aws/sns';
import { type SqsStandin, startSqsStandin } from '../support/aws/sqs';
import { startDataApiServer } from '../support/data-api-server';
import { createTestDatabase } from '../support/database';

const region = 'us-east-1';
const account = '123456789012';

/** A client config that signs as `caller` (the rehearsal's per-function access key id). */
const as = (caller: string, endpoint: string) => ({
  endpoint,
  region,
  credentials: { accessKeyId: caller, secretAccessKey: 'rehearsal' },
  maxAttempts: 1,
});

type SdkError = Error & { $metadata?: { httpStatusCode?: number } };

/** The rejection of `promise`, failing the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<SdkError> {
  try {
    await promise;
  } catch (err) {
    return err as SdkError;
  }
  return expect.fail('expected the call to be rejected');
}

/** The recorded calls without their timestamps, for whole-list comparisons. */
const shape = (calls: readonly RecordedCall[]) =>
  calls.map(({ caller, service, action, resources }) => ({ caller, service, action, resources }));

const closing: LocalEndpoint[] = [];
afterAll(async () => {
  for (const e of closing.splice(0).reverse()) await e.close();
});
const keep = <T extends LocalEndpoint>(e: T): T => {
  closing.push(e);
  return e;
};

describe('SigV4 caller', () => {
  it('parses the access key id and scope from an SDK Authorization header', () => {
    const header =
      'AWS4-HMAC-SHA256 Credential=NotifyFn/20261201/us-east-1/sns/aws4_request, ' +
      'SignedHeaders=content-type;host;x-amz-date, Signature=f22795755d841ec5037c703f307c0003548309308d48990f807ac9b08c1da9a7';
    expect(parseSigV4Authorization(header)).toEqual({
      accessKeyId: 'NotifyFn',
      date: '20261201',
      region: 'us-east-1',
      service: 'sns',
      signedHeaders: ['content-type', 'host', 'x-amz-date'],
      signature: 'f22795755d841ec5037c703f307c0003548309308d48990f807ac9b08c1da9a7',
    });
  });

  it('is undefined for a missing or non-SigV4 header', () => {
    expect(parseSigV4Authorization(undefined)).toBeUndefined();
    expect(parseSigV4Authorization('AWS S3RVER:abc')).toBeUndefined();
    expect(parseSigV4Authorization('AWS4-HMAC-SHA256 SignedHeaders=host, Signature=00')).toBeUndefined();
  });
});

describe('SNS stand-in', () => {
  const topicArn = `arn:aws:sns:${region}:${account}:notifications`;
  const fifoArn = `arn:aws:sns:${region}:${account}:notifications.fifo`;
  let recorder: CallRecorder;
  let sns: SnsStandin;
  let client: SNSClient;

  beforeAll(async () => {
    recorder = new CallRecorder();
    sns = keep(await startSnsStandin({ recorder, topics: [topicArn, fifoArn] }));
    client = new SNSClient(as('NotifyFn', sns.endpoint));
  });
  afterEach(() => recorder.clear());

  it('publishes to a registered topic, keeps the message and records sns:Publish on the topic', async () => {
    const out = await client.send(
      new PublishCommand({
        TopicArn: topicArn,
        Message: '{"taskId":"t-1"}',
        Subject: 'Approved: Spring launch – café',
        MessageAttributes: {
          eventId: { DataType: 'String', StringValue: 'e-1' },
          blob: { DataType: 'Binary', BinaryValue: new Uint8Array([1, 2, 3]) },
        },
      }),
    );

    const message = sns.published.find((m) => m.messageId === out.MessageId);
    expect(message).toMatchObject({
      topicArn,
      message: '{"taskId":"t-1"}',
      subject: 'Approved: Spring launch – café',
      caller: 'NotifyFn',
      messageAttributes: {
        eventId: { DataType: 'String', StringValue: 'e-1' },
        blob: { DataType: 'Binary', BinaryValue: Buffer.from([1, 2, 3]).toString('base64') },
      },
    });
    expect(shape(recorder.calls())).toEqual([
      { caller: 'NotifyFn', service: 'sns', action: 'sns:Publish', resources: [topicArn] },
    ]);
  });

  it('answers NotFound for an unknown topic, which the SDK raises as NotFoundException', async () => {
    const missing = `arn:aws:sns:${region}:${account}:missing`;
    const err = await rejection(client.send(new PublishCommand({ TopicArn: missing, Message: 'm' })));
    expect(err.name).toBe('NotFoundException');
    expect(err.$metadata?.httpStatusCode).toBe(404);
    expect(shape(recorder.calls())).toEqual([
      { caller: 'NotifyFn', service: 'sns', action: 'sns:Publish', resources: [missing] },
    ]);
  });

  it.each([
    ['a line break', 'Approved:\nSpring'],
    ['a tab (a control character)', 'Approved:\tSpring'],
    ['U+2028 (a line separator)', 'Approved:\u2028Spring'],
    ['100 characters', 'a'.repeat(100)],
    ['nothing', ''],
  ])('refuses a subject with %s as InvalidParameterException', async (_, subject) => {
    const err = await rejection(
      client.send(new PublishCommand({ TopicArn: topicArn, Message: 'm', Subject: subject })),
    );
    expect(err.name).toBe('InvalidParameterException');
    expect(err.message).toBe('Invalid parameter: Subject');
  });

  it('accepts a 99-character subject and every subject the notifier builds', async () => {
    const nasty = `line one\nline two\t\u0007${'é'.repeat(300)}\u2028end`;
    for (const subject of ['a'.repeat(99), snsSubject(nasty), snsSubject('')]) {
      await expect(
        client.send(new PublishCommand({ TopicArn: topicArn, Message: 'm', Subject: subject })),
      ).resolves.toHaveProperty('MessageId');
    }
  });

  it('refuses an empty attribute value as InvalidParameterValueException', async () => {
    const err = await rejection(
      client.send(
        new PublishCommand({
          TopicArn: topicArn,
          Message: 'm',
          MessageAttributes: { assignee: { DataType: 'String', StringValue: '' } },
        }),
      ),
    );
    expect(err.name).toBe('InvalidParameterValueException');
  });

  it('answers a FIFO duplicate with the first message id and keeps one copy', async () => {
    const publish = () =>
      client.send(
        new PublishCommand({
          TopicArn: fifoArn,
          Message: 'm',
          MessageGroupId: 't-1',
          MessageDeduplicationId: 'e-9',
        }),
      );
    const first = await publish();
    const second = await publish();
    expect(second.MessageId).toBe(first.MessageId);
    expect(sns.published.filter((m) => m.messageDeduplicationId === 'e-9')).toHaveLength(1);
  });

  it('records an unsigned request as anonymous', async () => {
    const body = new URLSearchParams({ Action: 'Publish', TopicArn: topicArn, Message: 'm' });
    const res = await fetch(sns.endpoint, { method: 'POST', body });
    expect(res.status).toBe(200);
    expect(recorder.calls()[0]?.caller).toBe(anonymousCaller);
  });
});

describe('SQS stand-in', () => {
  let recorder: CallRecorder;
  let sqs: SqsStandin;
  let client: SQSClient;
  let clock = Date.parse('2026-12-01T10:00:00Z');
  const jobsArn = `arn:aws:sqs:${region}:${account}:jobs`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    sqs = keep(
      // A long poll waits as long as AWS lets it (20 s): the send that ends it may be slow to come.
      await startSqsStandin({ recorder, queues: ['jobs', 'purged'], now: () => clock, maxWaitMs: 20_000 }),
    );
    client = new SQSClient(as('WorkerFn', sqs.endpoint));
  });
  afterEach(() => recorder.clear());

  const jobsUrl = () => sqs.queueUrl('jobs');
  /** Deletes what earlier tests left: every message visible (a day later), received, deleted. */
  const drain = async () => {
    clock += 24 * 3_600_000;
    for (;;) {
      const got = await client.send(
        new ReceiveMessageCommand({ QueueUrl: jobsUrl(), MaxNumberOfMessages: 10 }),
      );
      if (!got.Messages) return;
      for (const m of got.Messages) {
        await client.send(new DeleteMessageCommand({ QueueUrl: jobsUrl(), ReceiptHandle: m.ReceiptHandle }));
      }
    }
  };

  it('resolves a queue url as http://<host>/<account>/<name> and records it on the queue ARN', async () => {
    const out = await client.send(new GetQueueUrlCommand({ QueueName: 'jobs' }));
    expect(out.QueueUrl).toBe(`${sqs.endpoint}/${account}/jobs`);
    expect(shape(recorder.calls())).toEqual([
      { caller: 'WorkerFn', service: 'sqs', action: 'sqs:GetQueueUrl', resources: [jobsArn] },
    ]);
  });

  it('creates a queue, returns the same url again and refuses a different visibility timeout', async () => {
    const created = await client.send(
      new CreateQueueCommand({ QueueName: 'created', Attributes: { VisibilityTimeout: '45' } }),
    );
    const again = await client.send(new CreateQueueCommand({ QueueName: 'created' }));
    const conflict = await rejection(
      client.send(new CreateQueueCommand({ QueueName: 'created', Attributes: { VisibilityTimeout: '10' } })),
    );

    expect(created.QueueUrl).toBe(`${sqs.endpoint}/${account}/created`);
    expect(again.QueueUrl).toBe(created.QueueUrl);
    expect(conflict.name).toBe('QueueNameExists');
    expect(recorder.calls().map((c) => [c.action, c.resources])).toEqual(
      Array(3).fill(['sqs:CreateQueue', [`arn:aws:sqs:${region}:${account}:created`]]),
    );
  });

  it('answers an unknown queue as QueueDoesNotExist', async () => {
    const byName = await rejection(client.send(new GetQueueUrlCommand({ QueueName: 'nope' })));
    expect(byName.name).toBe('QueueDoesNotExist');
    const byUrl = await rejection(
      client.send(new SendMessageCommand({ QueueUrl: `${sqs.endpoint}/${account}/nope`, MessageBody: 'x' })),
    );
    expect(byUrl.name).toBe('QueueDoesNotExist');
  });

  it('delivers a message with its attributes, system attributes and checksums', async () => {
    await drain();
    const sent = await client.send(
      new SendMessageCommand({
        QueueUrl: jobsUrl(),
        MessageBody: '{"eventId":"e-1"}',
        MessageAttributes: {
          eventId: { DataType: 'String', StringValue: 'e-1' },
          n: { DataType: 'Number', StringValue: '7' },
        },
      }),
    );
    expect(sent.MD5OfMessageAttributes).toMatch(/^[0-9a-f]{32}$/);

    // The SDK checks MD5OfBody itself: a wrong digest would reject this call.
    const got = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: jobsUrl(),
        MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp'],
        MessageAttributeNames: ['event*', 'eventId'],
      }),
    );

    expect(got.Messages).toHaveLength(1);
    const [message] = got.Messages ?? [];
    expect(message).toMatchObject({
      MessageId: sent.MessageId,
      Body: '{"eventId":"e-1"}',
      Attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(clock) },
      MessageAttributes: { eventId: { DataType: 'String', StringValue: 'e-1' } },
    });
    expect(message?.MessageAttributes?.n).toBeUndefined();
    await client.send(
      new DeleteMessageCommand({ QueueUrl: jobsUrl(), ReceiptHandle: message?.ReceiptHandle }),
    );
  });

  it('hides a received message for its visibility timeout and counts it not visible', async () => {
    await drain();
    await client.send(new SendMessageCommand({ QueueUrl: jobsUrl(), MessageBody: 'a' }));
    await client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl(), VisibilityTimeout: 30 }));

    const hidden = await client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl() }));
    const attributes = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: jobsUrl(), AttributeNames: ['All'] }),
    );
    clock += 31_000;
    const again = await client.send(
      new ReceiveMessageCommand({ QueueUrl: jobsUrl(), MessageSystemAttributeNames: ['All'] }),
    );

    expect(hidden.Messages).toBeUndefined();
    expect(attributes.Attributes).toMatchObject({
      ApproximateNumberOfMessages: '0',
      ApproximateNumberOfMessagesNotVisible: '1',
      QueueArn: jobsArn,
    });
    expect(again.Messages?.[0]?.Attributes?.ApproximateReceiveCount).toBe('2');
  });

  it('ignores a stale receipt handle on delete, as AWS may, and deletes with the latest', async () => {
    await drain();
    await client.send(new SendMessageCommand({ QueueUrl: jobsUrl(), MessageBody: 'b' }));
    const first = await client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl(), VisibilityTimeout: 5 }));
    clock += 6_000;
    const second = await client.send(
      new ReceiveMessageCommand({ QueueUrl: jobsUrl(), VisibilityTimeout: 5 }),
    );
    const stale = first.Messages?.[0]?.ReceiptHandle;
    const latest = second.Messages?.[0]?.ReceiptHandle;
    expect(latest).not.toBe(stale);

    await client.send(new DeleteMessageCommand({ QueueUrl: jobsUrl(), ReceiptHandle: stale }));
    expect(sqs.messages('jobs').map((m) => m.body)).toEqual(['b']);
    await client.send(new DeleteMessageCommand({ QueueUrl: jobsUrl(), ReceiptHandle: latest }));
    expect(sqs.messages('jobs')).toEqual([]);
  });

  it('answers a receipt handle it never issued as ReceiptHandleIsInvalid', async () => {
    const err = await rejection(
      client.send(new DeleteMessageCommand({ QueueUrl: jobsUrl(), ReceiptHandle: 'made-up' })),
    );
    expect(err.name).toBe('ReceiptHandleIsInvalid');
  });

  it('changes the visibility of an in-flight message and refuses one not in flight', async () => {
    await drain();
    await client.send(new SendMessageCommand({ QueueUrl: jobsUrl(), MessageBody: 'c' }));
    const got = await client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl(), VisibilityTimeout: 60 }));
    const handle = got.Messages?.[0]?.ReceiptHandle;

    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: jobsUrl(),
        ReceiptHandle: handle,
        VisibilityTimeout: 0,
      }),
    );
    const err = await rejection(
      client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: jobsUrl(),
          ReceiptHandle: handle,
          VisibilityTimeout: 0,
        }),
      ),
    );

    expect(err.name).toBe('MessageNotInflight');
    expect(sqs.messages('jobs')[0]?.inFlight).toBe(false);
  });

  it('returns a message sent while a long poll waits', async () => {
    await drain();
    const waiting = sqs.nextLongPoll('jobs');
    const polling = client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl(), WaitTimeSeconds: 20 }));
    await waiting;
    await client.send(new SendMessageCommand({ QueueUrl: jobsUrl(), MessageBody: 'late' }));
    expect((await polling).Messages?.map((m) => m.Body)).toEqual(['late']);
  });

  it('refuses more than 10 messages per receive', async () => {
    const err = await rejection(
      client.send(new ReceiveMessageCommand({ QueueUrl: jobsUrl(), MaxNumberOfMessages: 11 })),
    );
    expect(err.name).toBe('InvalidParameterValue');
  });

  it('purges a queue once per 60 seconds (PurgeQueueInProgress)', async () => {
    const url = sqs.queueUrl('purged');
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' }));
    await client.send(new PurgeQueueCommand({ QueueUrl: url }));
    const err = await rejection(client.send(new PurgeQueueCommand({ QueueUrl: url })));
    expect(sqs.messages('purged')).toEqual([]);
    expect(err.name).toBe('PurgeQueueInProgress');
  });
});

describe('Lambda stand-in', () => {
  let recorder: CallRecorder;
  let lambda: LambdaStandin;
  let client: LambdaClient;
  const dispatched: { name: string; payload: unknown; type: string }[] = [];
  const relayArn = `arn:aws:lambda:${region}:${account}:function:relay`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    lambda = keep(
      await startLambdaStandin({
        recorder,
        functions: ['relay', 'broken'],
        dispatch: async (name, payload, type) => {
          dispatched.push({ name, payload, type });
          if (name === 'broken') throw new TypeError('boom');
          return { ok: true, echo: payload };
        },
      }),
    );
    client = new LambdaClient(as('TasksApiFn', lambda.endpoint));
  });
  afterEach(() => {
    recorder.clear();
    dispatched.length = 0;
  });

  it('answers RequestResponse with the JSON result and records lambda:InvokeFunction', async () => {
    const out = await client.send(
      new InvokeCommand({ FunctionName: 'relay', Payload: JSON.stringify({ n: 1 }) }),
    );

    expect(out.StatusCode).toBe(200);
    expect(out.FunctionError).toBeUndefined();
    expect(JSON.parse(Buffer.from(out.Payload ?? []).toString())).toEqual({ ok: true, echo: { n: 1 } });
    expect(dispatched).toEqual([{ name: 'relay', payload: { n: 1 }, type: 'RequestResponse' }]);
    expect(shape(recorder.calls())).toEqual([
      { caller: 'TasksApiFn', service: 'lambda', action: 'lambda:InvokeFunction', resources: [relayArn] },
    ]);
  });

  it('resolves a full ARN with a qualifier and records the qualified ARN', async () => {
    await client.send(new InvokeCommand({ FunctionName: `${relayArn}:live` }));
    expect(recorder.calls()[0]?.resources).toEqual([`${relayArn}:live`]);
    expect(dispatched[0]?.payload).toEqual({});
  });

  it('reports a throwing function as FunctionError Unhandled with errorType and errorMessage', async () => {
    const out = await client.send(new InvokeCommand({ FunctionName: 'broken', Payload: '{}' }));
    expect(out.StatusCode).toBe(200);
    expect(out.FunctionError).toBe('Unhandled');
    expect(JSON.parse(Buffer.from(out.Payload ?? []).toString())).toMatchObject({
      errorType: 'TypeError',
      errorMessage: 'boom',
    });
  });

  it('answers Event with 202 at once and keeps a failed background dispatch', async () => {
    const accepted = await client.send(
      new InvokeCommand({ FunctionName: 'relay', InvocationType: 'Event', Payload: '{}' }),
    );
    const failed = await client.send(
      new InvokeCommand({ FunctionName: 'broken', InvocationType: 'Event', Payload: '{}' }),
    );
    await lambda.settled();

    expect([accepted.StatusCode, failed.StatusCode]).toEqual([202, 202]);
    expect(dispatched.map((d) => [d.name, d.type])).toEqual([
      ['relay', 'Event'],
      ['broken', 'Event'],
    ]);
    expect(lambda.asyncErrors.map((e) => [e.functionName, (e.error as Error).message])).toEqual([
      ['broken', 'boom'],
    ]);
  });

  it('answers DryRun with 204 without running the function', async () => {
    const out = await client.send(new InvokeCommand({ FunctionName: 'relay', InvocationType: 'DryRun' }));
    expect(out.StatusCode).toBe(204);
    expect(dispatched).toEqual([]);
  });

  it('answers an unknown function as ResourceNotFoundException (404)', async () => {
    const err = await rejection(client.send(new InvokeCommand({ FunctionName: 'missing' })));
    expect(err.name).toBe('ResourceNotFoundException');
    expect(err.$metadata?.httpStatusCode).toBe(404);
    expect(err.message).toContain(`arn:aws:lambda:${region}:${account}:function:missing`);
  });
});

describe('Secrets Manager stand-in', () => {
  let recorder: CallRecorder;
  let secrets: SecretsManagerStandin;
  let client: SecretsManagerClient;
  const arn = `arn:aws:secretsmanager:${region}:${account}:secret:pipeline/db-AbCdEf`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    secrets = keep(
      await startSecretsManagerStandin({
        recorder,
        secrets: [{ arn, name: 'pipeline/db', secretString: '{"v":1}' }],
      }),
    );
    client = new SecretsManagerClient(as('MigrateFn', secrets.endpoint));
  });
  afterEach(() => recorder.clear());

  it('reads a secret by ARN, by name and by partial ARN, recording its full ARN each time', async () => {
    for (const SecretId of [arn, 'pipeline/db', arn.replace(/-AbCdEf$/, '')]) {
      const out = await client.send(new GetSecretValueCommand({ SecretId }));
      expect(out).toMatchObject({
        ARN: arn,
        Name: 'pipeline/db',
        SecretString: '{"v":1}',
        VersionStages: ['AWSCURRENT'],
      });
    }
    expect(shape(recorder.calls())).toEqual(
      Array.from({ length: 3 }, () => ({
        caller: 'MigrateFn',
        service: 'secretsmanager',
        action: 'secretsmanager:GetSecretValue',
        resources: [arn],
      })),
    );
  });

  it('makes a new value AWSCURRENT and the old one AWSPREVIOUS', async () => {
    const before = await client.send(new GetSecretValueCommand({ SecretId: arn }));
    const put = await client.send(
      new PutSecretValueCommand({ SecretId: 'pipeline/db', SecretString: '{"v":2}' }),
    );
    const now = await client.send(new GetSecretValueCommand({ SecretId: arn }));
    const previous = await client.send(
      new GetSecretValueCommand({ SecretId: arn, VersionStage: 'AWSPREVIOUS' }),
    );
    const described = await client.send(new DescribeSecretCommand({ SecretId: arn }));

    expect(now).toMatchObject({ SecretString: '{"v":2}', VersionId: put.VersionId });
    expect(previous.VersionId).toBe(before.VersionId);
    expect(described.VersionIdsToStages).toEqual({
      [before.VersionId as string]: ['AWSPREVIOUS'],
      [put.VersionId as string]: ['AWSCURRENT'],
    });
    expect(secrets.currentValue('pipeline/db')).toBe('{"v":2}');
  });

  it('answers an unknown secret as ResourceNotFoundException', async () => {
    const err = await rejection(client.send(new GetSecretValueCommand({ SecretId: 'nope' })));
    expect(err.name).toBe('ResourceNotFoundException');
    expect(recorder.calls()[0]?.resources).toEqual(['nope']);
  });
});

describe('CloudWatch stand-in', () => {
  let recorder: CallRecorder;
  let cloudwatch: CloudWatchStandin;
  let client: CloudWatchClient;
  const alarmArn = (name: string) => `arn:aws:cloudwatch:${region}:${account}:alarm:${name}`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    cloudwatch = keep(
      await startCloudWatchStandin({
        recorder,
        alarms: [
          {
            name: 'pipeline-outbox-dead',
            state: 'OK',
            namespace: 'ContentPipeline',
            metricName: 'OutboxDead',
          },
          { name: 'pipeline-relay-errors', state: 'OK' },
          { name: 'pipeline-relay-silent', state: 'ALARM' },
          { name: 'other-alarm' },
        ],
      }),
    );
    client = new CloudWatchClient(as('OpsFn', cloudwatch.endpoint));
  });
  afterEach(() => recorder.clear());

  it('describes alarms by name, by prefix and by state, recording the alarm ARNs', async () => {
    const byName = await client.send(new DescribeAlarmsCommand({ AlarmNames: ['pipeline-outbox-dead'] }));
    const byPrefix = await client.send(new DescribeAlarmsCommand({ AlarmNamePrefix: 'pipeline-' }));
    const inAlarm = await client.send(new DescribeAlarmsCommand({ StateValue: 'ALARM' }));

    expect(byName.MetricAlarms).toEqual([
      expect.objectContaining({
        AlarmName: 'pipeline-outbox-dead',
        AlarmArn: alarmArn('pipeline-outbox-dead'),
        StateValue: 'OK',
        MetricName: 'OutboxDead',
        Namespace: 'ContentPipeline',
      }),
    ]);
    expect(byName.MetricAlarms?.[0]?.StateUpdatedTimestamp).toBeInstanceOf(Date);
    expect(byPrefix.MetricAlarms?.map((a) => a.AlarmName)).toEqual([
      'pipeline-outbox-dead',
      'pipeline-relay-errors',
      'pipeline-relay-silent',
    ]);
    expect(inAlarm.MetricAlarms?.map((a) => a.AlarmName)).toEqual(['pipeline-relay-silent']);
    expect(recorder.calls().map((c) => c.resources)).toEqual([
      [alarmArn('pipeline-outbox-dead')],
      // A prefix narrows the answer, not what IAM checks: every alarm.
      [alarmArn('*')],
      [alarmArn('*')],
    ]);
  });

  it('pages with MaxRecords and NextToken', async () => {
    const first = await client.send(new DescribeAlarmsCommand({ MaxRecords: 3 }));
    const second = await client.send(
      new DescribeAlarmsCommand({ MaxRecords: 3, NextToken: first.NextToken }),
    );
    expect(first.MetricAlarms).toHaveLength(3);
    expect(second.MetricAlarms?.map((a) => a.AlarmName)).toEqual(['pipeline-relay-silent']);
    expect(second.NextToken).toBeUndefined();
    const err = await rejection(client.send(new DescribeAlarmsCommand({ NextToken: 'garbage' })));
    expect(err.name).toBe('InvalidNextToken');
  });

  it('sets an alarm state and answers an unknown alarm as ResourceNotFound', async () => {
    await client.send(
      new SetAlarmStateCommand({
        AlarmName: 'pipeline-relay-errors',
        StateValue: 'ALARM',
        StateReason: 'rehearsal',
      }),
    );
    const err = await rejection(
      client.send(new SetAlarmStateCommand({ AlarmName: 'nope', StateValue: 'OK', StateReason: 'x' })),
    );

    expect(cloudwatch.alarm('pipeline-relay-errors')).toMatchObject({
      state: 'ALARM',
      stateReason: 'rehearsal',
    });
    expect(err.name).toBe('ResourceNotFound');
    expect(err.$metadata?.httpStatusCode).toBe(404);
    expect(recorder.calls().map((c) => [c.action, c.resources])).toEqual([
      ['cloudwatch:SetAlarmState', [alarmArn('pipeline-relay-errors')]],
      ['cloudwatch:SetAlarmState', [alarmArn('nope')]],
    ]);
  });

  it('answers GetMetricData from PutMetricData points and registered series, per minute', async () => {
    const at = (s: string) => new Date(`2026-12-01T10:${s}Z`);
    const metric = {
      Namespace: 'ContentPipeline',
      MetricName: 'RelayErrors',
      Dimensions: [{ Name: 'Fn', Value: 'relay' }],
    };
    await client.send(
      new PutMetricDataCommand({
        Namespace: 'ContentPipeline',
        MetricData: [
          { ...metric, Timestamp: at('00:05'), Value: 2 },
          { ...metric, Timestamp: at('00:50'), Values: [1, 5], Counts: [1, 2] },
          {
            ...metric,
            Timestamp: at('01:10'),
            StatisticValues: { SampleCount: 4, Sum: 8, Minimum: 1, Maximum: 3 },
          },
          { ...metric, Dimensions: [{ Name: 'Fn', Value: 'other' }], Timestamp: at('00:10'), Value: 100 },
        ],
      }),
    );
    cloudwatch.addDatapoints(
      {
        namespace: 'ContentPipeline',
        metricName: 'RelayErrors',
        dimensions: [{ name: 'Fn', value: 'relay' }],
      },
      [{ timestamp: at('02:30'), value: 4 }],
    );

    const query = (Id: string, Stat: string) => ({ Id, MetricStat: { Metric: metric, Period: 60, Stat } });
    const out = await client.send(
      new GetMetricDataCommand({
        StartTime: at('00:00'),
        EndTime: at('05:00'),
        ScanBy: 'TimestampAscending',
        MetricDataQueries: [query('sum', 'Sum'), query('max', 'Maximum'), query('n', 'SampleCount')],
      }),
    );

    const minutes = [at('00:00'), at('01:00'), at('02:00')];
    expect(out.MetricDataResults).toEqual([
      expect.objectContaining({ Id: 'sum', Timestamps: minutes, Values: [13, 8, 4], StatusCode: 'Complete' }),
      expect.objectContaining({ Id: 'max', Timestamps: minutes, Values: [5, 3, 4] }),
      expect.objectContaining({ Id: 'n', Timestamps: minutes, Values: [4, 4, 1] }),
    ]);
    expect(recorder.calls().map((c) => [c.action, c.resources])).toEqual([
      ['cloudwatch:PutMetricData', ['*']],
      ['cloudwatch:GetMetricData', ['*']],
    ]);
  });

  it('reads a PutMetricData body the SDK gzipped', async () => {
    const before = cloudwatch.samples.length;
    await client.send(
      new PutMetricDataCommand({
        Namespace: 'Bulk',
        MetricData: Array.from({ length: 400 }, (_, i) => ({ MetricName: `Metric${i}`, Value: i })),
      }),
    );
    expect(cloudwatch.samples.length - before).toBe(400);
  });
});

describe('DynamoDB proxy over dynalite', () => {
  let recorder: CallRecorder;
  let client: DynamoDBClient;
  const tableArn = (t: string) => `arn:aws:dynamodb:${region}:${account}:table/${t}`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    const dynalite = await startDynalite();
    closing.push({ endpoint: dynalite.endpoint, close: () => dynalite.stop() });
    const proxy = keep(await startDynamoDbProxy({ backend: dynalite.endpoint, recorder }));
    client = new DynamoDBClient(as('IndexFn', proxy.endpoint));
    for (const TableName of ['inbox', 'content-index']) {
      await client.send(
        new CreateTableCommand({
          TableName,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [
            { AttributeName: 'pk', AttributeType: 'S' },
            { AttributeName: 'status', AttributeType: 'S' },
          ],
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          GlobalSecondaryIndexes: [
            {
              IndexName: 'by-status',
              KeySchema: [{ AttributeName: 'status', KeyType: 'HASH' }],
              Projection: { ProjectionType: 'ALL' },
            },
          ],
        }),
      );
    }
    recorder.clear();
  });
  afterEach(() => recorder.clear());

  it('forwards calls unchanged and records the table, and the index a query names', async () => {
    await client.send(
      new PutItemCommand({ TableName: 'inbox', Item: { pk: { S: 'a' }, status: { S: 'DONE' } } }),
    );
    const out = await client.send(
      new QueryCommand({
        TableName: 'inbox',
        IndexName: 'by-status',
        KeyConditionExpression: '#s = :s',
        ExpressionAttributeNames: { '#s': 'status' },
        ExpressionAttributeValues: { ':s': { S: 'DONE' } },
      }),
    );

    expect(out.Items).toEqual([{ pk: { S: 'a' }, status: { S: 'DONE' } }]);
    expect(shape(recorder.calls())).toEqual([
      { caller: 'IndexFn', service: 'dynamodb', action: 'dynamodb:PutItem', resources: [tableArn('inbox')] },
      {
        caller: 'IndexFn',
        service: 'dynamodb',
        action: 'dynamodb:Query',
        resources: [`${tableArn('inbox')}/index/by-status`],
      },
    ]);
  });

  it('passes a conditional failure through as ConditionalCheckFailedException', async () => {
    const put = () =>
      client.send(
        new PutItemCommand({
          TableName: 'inbox',
          Item: { pk: { S: 'once' }, status: { S: 'NEW' } },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    await put();
    expect((await rejection(put())).name).toBe('ConditionalCheckFailedException');
  });

  it('records a transaction as its per-item actions and a batch write on every table', async () => {
    // dynalite has no transactions (UnknownOperationException); the call is recorded all the same.
    const transaction = await rejection(
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: 'inbox', Item: { pk: { S: 't1' }, status: { S: 'NEW' } } } },
            {
              ConditionCheck: {
                TableName: 'content-index',
                Key: { pk: { S: 'x' } },
                ConditionExpression: 'attribute_not_exists(pk)',
              },
            },
            {
              Update: {
                TableName: 'inbox',
                Key: { pk: { S: 'a' } },
                UpdateExpression: 'SET #s = :s',
                ExpressionAttributeNames: { '#s': 'status' },
                ExpressionAttributeValues: { ':s': { S: 'X' } },
              },
            },
          ],
        }),
      ),
    );
    await client.send(
      new BatchWriteItemCommand({
        RequestItems: {
          inbox: [{ PutRequest: { Item: { pk: { S: 'b1' }, status: { S: 'NEW' } } } }],
          'content-index': [{ PutRequest: { Item: { pk: { S: 'b2' }, status: { S: 'NEW' } } } }],
        },
      }),
    );

    expect(transaction.name).toBe('UnknownOperationException');
    expect(recorder.calls().map((c) => [c.action, c.resources])).toEqual([
      ['dynamodb:PutItem', [tableArn('inbox')]],
      ['dynamodb:ConditionCheckItem', [tableArn('content-index')]],
      ['dynamodb:UpdateItem', [tableArn('inbox')]],
      ['dynamodb:BatchWriteItem', [tableArn('inbox'), tableArn('content-index')]],
    ]);
  });
});

describe('S3 proxy over s3rver', () => {
  const bucket = 'pipeline-archive';
  let recorder: CallRecorder;
  let client: S3Client;
  let proxyEndpoint: string;

  beforeAll(async () => {
    recorder = new CallRecorder();
    const s3rver = keep(await startS3rver({ buckets: [bucket] }));
    const proxy = keep(await startS3Proxy({ backend: s3rver.endpoint, recorder }));
    proxyEndpoint = proxy.endpoint;
    client = new S3Client({ ...as('ArchiveFn', proxy.endpoint), forcePathStyle: true });
  });
  afterEach(() => recorder.clear());

  const objectArn = (key: string) => `arn:aws:s3:::${bucket}/${key}`;

  it('stores and reads objects for a caller s3rver does not know, recording object and bucket ARNs', async () => {
    const Key = 'snapshots/t-1 v2.json';
    await client.send(
      new PutObjectCommand({ Bucket: bucket, Key, Body: '{"v":2}', ContentType: 'application/json' }),
    );
    const read = await client.send(new GetObjectCommand({ Bucket: bucket, Key }));
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key }));
    const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'snapshots/' }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }));

    expect(await read.Body?.transformToString()).toBe('{"v":2}');
    expect(head.ContentLength).toBe(7);
    expect(listed.Contents?.map((o) => o.Key)).toEqual([Key]);
    expect(shape(recorder.calls())).toEqual([
      { caller: 'ArchiveFn', service: 's3', action: 's3:PutObject', resources: [objectArn(Key)] },
      { caller: 'ArchiveFn', service: 's3', action: 's3:GetObject', resources: [objectArn(Key)] },
      { caller: 'ArchiveFn', service: 's3', action: 's3:GetObject', resources: [objectArn(Key)] },
      { caller: 'ArchiveFn', service: 's3', action: 's3:ListBucket', resources: [`arn:aws:s3:::${bucket}`] },
      { caller: 'ArchiveFn', service: 's3', action: 's3:DeleteObject', resources: [objectArn(Key)] },
    ]);
  });

  it('refuses a second If-None-Match: * write as PreconditionFailed (412) and keeps the first', async () => {
    const Key = 'snapshots/once.json';
    await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'first', IfNoneMatch: '*' }));
    const err = await rejection(
      client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: 'second', IfNoneMatch: '*' })),
    );
    const read = await client.send(new GetObjectCommand({ Bucket: bucket, Key }));

    expect(err.name).toBe('PreconditionFailed');
    expect(err.$metadata?.httpStatusCode).toBe(412);
    expect(await read.Body?.transformToString()).toBe('first');
    expect(recorder.calls().map((c) => c.action)).toEqual(['s3:PutObject', 's3:PutObject', 's3:GetObject']);
  });

  it('lets exactly one of racing If-None-Match: * writes win', async () => {
    const Key = 'snapshots/raced.json';
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) =>
        client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: `writer ${i}`, IfNoneMatch: '*' })),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(
      results
        .filter((r) => r.status === 'rejected')
        .map((r) => ((r as PromiseRejectedResult).reason as Error).name),
    ).toEqual(Array(4).fill('PreconditionFailed'));
  });

  it('is reached path-style without forcePathStyle, because 127.0.0.1 is an IP endpoint', async () => {
    const plain = new S3Client(as('ArchiveFn', proxyEndpoint));
    await plain.send(new PutObjectCommand({ Bucket: bucket, Key: 'plain.txt', Body: 'x' }));
    expect(recorder.calls()[0]?.resources).toEqual([objectArn('plain.txt')]);
  });
});

describe('EventBridge proxy over the local bus', () => {
  let recorder: CallRecorder;
  let client: EventBridgeClient;
  let dir: string;
  const busArn = (name: string) => `arn:aws:events:${region}:${account}:event-bus/${name}`;

  beforeAll(async () => {
    recorder = new CallRecorder();
    dir = mkdtempSync(join(tmpdir(), 'aws-standins-bus-'));
    const bus = new LocalBus({
      busName: topology.busName,
      rules: topology.rules,
      invoke: async () => undefined,
      retry: () => ({ maxAttempts: 1, baseMs: 1, maxMs: 1, maxAgeMs: 1_000 }),
      dir,
      maxRequestBytes: topology.relay.maxRequestBytes,
      faults: new FaultInjector(noFaults, 1),
    });
    await bus.start();
    closing.push({
      endpoint: bus.endpoint,
      close: async () => {
        await bus.stop(50);
        rmSync(dir, { recursive: true, force: true });
      },
    });
    const proxy = keep(await startEventBridgeProxy({ backend: bus.endpoint, recorder }));
    client = new EventBridgeClient(as('RelayFn', proxy.endpoint));
  });
  afterEach(() => recorder.clear());

  it('forwards PutEvents to the bus and records each entry bus (default when unnamed)', async () => {
    const entry = {
      Source: topology.source,
      DetailType: topology.eventTypes.approved,
      Detail: '{"taskId":"t-1"}',
    };
    const out = await client.send(
      new PutEventsCommand({
        Entries: [
          { ...entry, EventBusName: topology.busName },
          { ...entry, EventBusName: busArn(topology.busName) },
          entry,
        ],
      }),
    );

    expect(out.Entries?.[0]?.EventId).toBeTruthy();
    expect(shape(recorder.calls())).toEqual([
      {
        caller: 'RelayFn',
        service: 'events',
        action: 'events:PutEvents',
        resources: [busArn(topology.busName), busArn('default')],
      },
    ]);
  });

  it('records rule operations on the rule ARN of their bus, even when the backend refuses them', async () => {
    const enable = await rejection(
      client.send(new EnableRuleCommand({ Name: 'notify', EventBusName: topology.busName })),
    );
    await rejection(client.send(new DisableRuleCommand({ Name: 'nightly' })));

    expect(enable.name).toBe('UnknownOperationException');
    expect(recorder.calls().map((c) => [c.action, c.resources])).toEqual([
      ['events:EnableRule', [`arn:aws:events:${region}:${account}:rule/${topology.busName}/notify`]],
      ['events:DisableRule', [`arn:aws:events:${region}:${account}:rule/nightly`]],
    ]);
  });

  it('names the rule of a bus given by ARN', () => {
    const request: ProxiedRequest = {
      method: 'POST',
      url: new URL('http://127.0.0.1/'),
      headers: { 'x-amz-target': 'AWSEvents.DescribeRule' },
      body: Buffer.from(JSON.stringify({ Name: 'r', EventBusName: busArn('custom') })),
      caller: 'x',
    };
    expect(describeEventBridgeRequest(request, recorder)).toEqual([
      {
        action: 'events:DescribeRule',
        resources: [`arn:aws:events:${region}:${account}:rule/custom/r`],
        operation: 'DescribeRule',
      },
    ]);
  });
});

describe('RDS Data API proxy over the local Data API', () => {
  let recorder: CallRecorder;
  let client: RDSDataClient;
  let arns: { resourceArn: string; secretArn: string };

  beforeAll(async () => {
    recorder = new CallRecorder();
    const db = await createTestDatabase({ migrated: false });
    const dataApi = await startDataApiServer(db.url);
    closing.push({
      endpoint: dataApi.endpoint,
      close: async () => {
        await dataApi.close();
        await db.drop();
      },
    });
    arns = { resourceArn: dataApi.resourceArn, secretArn: dataApi.secretArn };
    const proxy = keep(await startRdsDataProxy({ backend: dataApi.endpoint, recorder }));
    client = new RDSDataClient(as('RelayFn', proxy.endpoint));
  });

  it('records each statement on the cluster and a GetSecretValue on the secret for the same caller', async () => {
    const { transactionId } = await client.send(new BeginTransactionCommand(arns));
    const out = await client.send(
      new ExecuteStatementCommand({ ...arns, sql: 'SELECT 1 AS one', transactionId }),
    );
    await client.send(new CommitTransactionCommand({ ...arns, transactionId }));

    expect(out.records).toEqual([[{ longValue: 1 }]]);
    const expected = (action: string) => [
      { caller: 'RelayFn', service: 'rds-data', action, resources: [arns.resourceArn] },
      {
        caller: 'RelayFn',
        service: 'rds-data',
        action: 'secretsmanager:GetSecretValue',
        resources: [arns.secretArn],
      },
    ];
    expect(shape(recorder.calls())).toEqual([
      ...expected('rds-data:BeginTransaction'),
      ...expected('rds-data:ExecuteStatement'),
      ...expected('rds-data:CommitTransaction'),
    ]);
  });
});

/** Runs an ES module in a child Node process with `env` (the rehearsal's way of running a bundle). */
function runChild(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

describe('startAwsStandins', () => {
  it('gives an env map under which a child process reaches every stand-in as its own caller', async () => {
    const dynalite = await startDynalite();
    const s3rver = await startS3rver({ buckets: ['pipeline-archive'] });
    const topicArn = `arn:aws:sns:${region}:${account}:notifications`;
    const secretArn = `arn:aws:secretsmanager:${region}:${account}:secret:db-AbCdEf`;
    const standins = await startAwsStandins({
      backends: { dynamodb: dynalite.endpoint, s3: s3rver.endpoint },
      sns: { topics: [topicArn] },
      sqs: { queues: ['jobs'] },
      lambda: { functions: ['relay'], dispatch: async () => 'ok' },
      secretsManager: { secrets: [{ arn: secretArn, name: 'db', secretString: 's' }] },
      cloudwatch: { alarms: [{ name: 'a' }] },
    });
    try {
      expect(Object.keys(standins.env).sort()).toEqual(
        ['SNS', 'SQS', 'LAMBDA', 'SECRETS_MANAGER', 'CLOUDWATCH', 'DYNAMODB', 'S3']
          .map((s) => `AWS_ENDPOINT_URL_${s}`)
          .sort(),
      );
      expect(standins.env[endpointEnvNames.sqs]).toBe(standins.sqs.endpoint);

      // No endpoint and no forcePathStyle in the code: only the environment points it here.
      const script = `
        import { SNSClient, PublishCommand } from '@aws-sdk/client-sns';
        import { SQSClient, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
        import { LambdaClient, InvokeCommand } from '@aws-sdk/client-lambda';
        import { SecretsManagerClient, GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
        import { CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
        import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
        import { S3Client, PutObjectCommand } from '@aws-sdk/client-s3';
        await new SNSClient({}).send(new PublishCommand({ TopicArn: '${topicArn}', Message: 'm' }));
        await new SQSClient({}).send(new GetQueueUrlCommand({ QueueName: 'jobs' }));
        await new LambdaClient({}).send(new InvokeCommand({ FunctionName: 'relay' }));
        await new SecretsManagerClient({}).send(new GetSecretValueCommand({ SecretId: 'db' }));
        await new CloudWatchClient({}).send(new DescribeAlarmsCommand({ AlarmNames: ['a'] }));
        await new DynamoDBClient({}).send(new ListTablesCommand({}));
        await new S3Client({}).send(new PutObjectCommand({ Bucket: 'pipeline-archive', Key: 'k', Body: 'b' }));
        console.log('child done');
      `;
      const child = await runChild(script, {
        ...standins.env,
        AWS_REGION: region,
        AWS_ACCESS_KEY_ID: 'ChildFn',
        AWS_SECRET_ACCESS_KEY: 'rehearsal',
      });

      expect(child.output).toContain('child done');
      expect(child.code).toBe(0);
      expect(standins.recorder.calls().map((c) => [c.caller, c.action])).toEqual([
        ['ChildFn', 'sns:Publish'],
        ['ChildFn', 'sqs:GetQueueUrl'],
        ['ChildFn', 'lambda:InvokeFunction'],
        ['ChildFn', 'secretsmanager:GetSecretValue'],
        ['ChildFn', 'cloudwatch:DescribeAlarms'],
        ['ChildFn', 'dynamodb:ListTables'],
        ['ChildFn', 's3:PutObject'],
      ]);
    } finally {
      await standins.close();
      await s3rver.close();
      await dynalite.stop();
    }
  });
});
