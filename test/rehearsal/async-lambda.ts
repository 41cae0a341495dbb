/**
 * Lambda's asynchronous invocation and SQS event source mappings, as the rehearsal plays them
 * from the template: an `Event` invoke is accepted at once and then runs with the function's
 * retries (`AWS::Lambda::EventInvokeConfig` MaximumRetryAttempts, 2 by default) and, when they
 * are spent, sends Lambda's on-failure record to the configured destination queue, signed as
 * the function (Lambda writes destinations with the function's execution role:
 * https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html); a mapping
 * receives its queue's visible messages and hands them to its function in batches, deleting
 * what the function handled (`ReportBatchItemFailures`).
 *
 * Time is compressed: Lambda waits about one and two minutes between attempts, longer than any
 * consumer's backoff (capped at a minute); here an attempt waits until the attempt before it
 * says the record may be tried again (`retryWait`), and a delayed queue message becomes
 * visible when the rehearsal moves the queue's clock.
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { FunctionSpec } from './functions';
import type { CfnTemplate, TemplateResolver } from './template';

/** How Lambda handles one function's asynchronous invocations, from the template. */
export interface AsyncInvokeConfig {
  readonly retryAttempts: number;
  /** The SQS queue (its name) Lambda sends the on-failure record to; none: the event is dropped. */
  readonly onFailureQueue?: string;
}

/** Each function's async settings, by physical name. */
export function asyncInvokeConfigs(
  resolver: TemplateResolver,
  specs: readonly FunctionSpec[],
): Map<string, AsyncInvokeConfig> {
  const configs = new Map<string, AsyncInvokeConfig>(specs.map((s) => [s.name, { retryAttempts: 2 }]));
  for (const [, r] of resolver.resourcesOfType('AWS::Lambda::EventInvokeConfig')) {
    const p = r.Properties ?? {};
    const name = resolver.resolveString(p.FunctionName);
    const destination = (p.DestinationConfig as { OnFailure?: { Destination?: unknown } } | undefined)
      ?.OnFailure?.Destination;
    const queueArn = destination === undefined ? undefined : resolver.resolveString(destination);
    configs.set(name, {
      retryAttempts: Number(p.MaximumRetryAttempts ?? 2),
      ...(queueArn?.startsWith('arn:aws:sqs:') ? { onFailureQueue: queueArn.split(':').pop() } : {}),
    });
  }
  return configs;
}

export interface AsyncLambdaOptions {
  readonly specs: readonly FunctionSpec[];
  readonly configs: ReadonlyMap<string, AsyncInvokeConfig>;
  /** Runs one attempt (the function's process); rejects when the handler throws. */
  readonly run: (functionName: string, event: unknown) => Promise<unknown>;
  /** Waited before each retry: Lambda's minute or two, compressed. */
  readonly retryWait: (functionName: string, event: unknown) => Promise<void>;
  readonly sqsEndpoint: string;
  readonly queueUrl: (name: string) => string;
  readonly region: string;
}

/** One finished asynchronous invocation: how many attempts, and whether it went to its destination. */
export interface AsyncOutcome {
  readonly functionName: string;
  readonly attempts: number;
  readonly failed: boolean;
  readonly onFailureSent?: string;
}

export class AsyncLambda {
  private readonly running = new Set<Promise<void>>();
  readonly outcomes: AsyncOutcome[] = [];

  constructor(private readonly options: AsyncLambdaOptions) {}

  /** Accepts an `Event` invocation (as Lambda answers 202) and runs it in the background. */
  invoke(functionName: string, event: unknown): void {
    const job = this.run(functionName, event);
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }

  /** Runs an `Event` invocation to its end: attempts, then the on-failure destination. Rejects only without one. */
  async run(functionName: string, event: unknown): Promise<void> {
    const config = this.options.configs.get(functionName) ?? { retryAttempts: 2 };
    let lastError: unknown;
    let attempt = 0;
    for (; attempt <= config.retryAttempts; attempt++) {
      if (attempt > 0) await this.options.retryWait(functionName, event);
      try {
        await this.options.run(functionName, event);
        this.outcomes.push({ functionName, attempts: attempt + 1, failed: false });
        return;
      } catch (err) {
        lastError = err;
      }
    }
    if (!config.onFailureQueue) {
      this.outcomes.push({ functionName, attempts: attempt, failed: true });
      throw lastError;
    }
    await this.sendOnFailure(functionName, config.onFailureQueue, event, attempt, lastError);
    this.outcomes.push({
      functionName,
      attempts: attempt,
      failed: true,
      onFailureSent: config.onFailureQueue,
    });
  }

  /** Resolves once every invocation accepted so far (and what they started) has finished. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  private async sendOnFailure(
    functionName: string,
    queue: string,
    event: unknown,
    attempts: number,
    error: unknown,
  ): Promise<void> {
    const spec = this.options.specs.find((s) => s.name === functionName);
    if (!spec) throw new Error(`no function ${functionName}`);
    const err = error instanceof Error ? error : new Error(String(error));
    // The record's shape: https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html
    const record = {
      version: '1.0',
      timestamp: new Date().toISOString(),
      requestContext: {
        requestId: randomUUID(),
        functionArn: `${spec.arn}:$LATEST`,
        condition: 'RetriesExhausted',
        approximateInvokeCount: attempts,
      },
      requestPayload: event,
      responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
      responsePayload: {
        errorType: (err as { errorType?: string }).errorType ?? err.name,
        errorMessage: err.message,
      },
    };
    const sqs = this.sqsAs(spec.logicalId);
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: this.options.queueUrl(queue),
          MessageBody: JSON.stringify(record),
        }),
      );
    } finally {
      sqs.destroy();
    }
  }

  /** An SQS client signed as `caller` (the recorder tells callers by access key id). */
  sqsAs(caller: string): SQSClient {
    return new SQSClient({
      endpoint: this.options.sqsEndpoint,
      region: this.options.region,
      credentials: { accessKeyId: caller, secretAccessKey: 'rehearsal' },
    });
  }
}

/** One SQS event source mapping of the template: which queue feeds which function, how. */
export interface QueueMapping {
  readonly queue: string;
  readonly functionName: string;
  readonly batchSize: number;
  readonly reportsItemFailures: boolean;
}

/** The template's SQS event source mappings. */
export function queueMappings(resolver: TemplateResolver, template: CfnTemplate): QueueMapping[] {
  return Object.values(template.Resources)
    .filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping')
    .map((r) => {
      const p = r.Properties ?? {};
      return {
        queue: resolver.resolveString(p.EventSourceArn).split(':').pop() ?? '',
        functionName: resolver.resolveString(p.FunctionName),
        batchSize: Number(p.BatchSize ?? 10),
        reportsItemFailures: ((p.FunctionResponseTypes as string[] | undefined) ?? []).includes(
          'ReportBatchItemFailures',
        ),
      };
    });
}

/**
 * What an event source mapping does with the messages visible now: receives them (as the
 * mapping, not as any function), invokes the function with each batch, and deletes what the
 * function handled. Returns how many messages it handed over.
 */
export async function pumpQueue(
  mapping: QueueMapping,
  options: {
    readonly sqs: SQSClient;
    readonly queueUrl: string;
    readonly queueArn: string;
    readonly region: string;
    readonly invoke: (functionName: string, event: unknown) => Promise<unknown>;
  },
): Promise<number> {
  let handed = 0;
  for (;;) {
    const page = await options.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: options.queueUrl,
        MaxNumberOfMessages: Math.min(10, mapping.batchSize),
        WaitTimeSeconds: 0,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const messages = page.Messages ?? [];
    if (messages.length === 0) return handed;
    handed += messages.length;
    // The event Lambda builds from a batch: https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html
    const records = messages.map((m) => ({
      messageId: m.MessageId,
      receiptHandle: m.ReceiptHandle,
      body: m.Body,
      attributes: m.Attributes ?? {},
      messageAttributes: Object.fromEntries(
        Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
          k,
          { stringValue: v.StringValue, dataType: v.DataType, stringListValues: [], binaryListValues: [] },
        ]),
      ),
      md5OfBody: m.MD5OfBody,
      eventSource: 'aws:sqs',
      eventSourceARN: options.queueArn,
      awsRegion: options.region,
    }));
    let failed = new Set<string>();
    try {
      const out = (await options.invoke(mapping.functionName, { Records: records })) as {
        batchItemFailures?: { itemIdentifier: string }[];
      } | null;
      if (mapping.reportsItemFailures)
        failed = new Set((out?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
    } catch {
      // The whole batch comes back after the visibility timeout.
      failed = new Set(messages.map((m) => m.MessageId ?? ''));
    }
    for (const m of messages) {
      if (failed.has(m.MessageId ?? '')) continue;
      await options.sqs.send(
        new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: m.ReceiptHandle }),
      );
    }
    if (failed.size === messages.length) return handed;
  }
}
