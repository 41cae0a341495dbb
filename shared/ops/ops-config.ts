import * as z from 'zod';
import { consumerEnv } from '../consumers/contract';
import { blankIsUnset, jsonVariable, parseEnvironment } from '../env';
import type { ConsumerName } from '../topology';
import type { DeadLetterQueueRef } from './adapters/aws/sqs-dead-letters';

/** Environment variables of the ops function (the CDK stack sets them; the names live here once). */
export const opsEnv = {
  inboxTable: consumerEnv.inboxTable,
  /** Every alarm of the stack starts with it (`<stack>-`); cut off, the rest is the alarm id. */
  alarmPrefix: 'ALARM_NAME_PREFIX',
  /** JSON `["<alarm name>", ...]`: every alarm of the stack, read by name (IAM allows no prefix read short of `alarm:*`). */
  alarms: 'ALARM_NAMES',
  /** The relay, nudged after an outbox redrive and watched for its health. */
  relayFunction: 'RELAY_FUNCTION_NAME',
  /** JSON `{ "<consumer>": "<its queue's URL>" }`: where an inbox or dead-letter redrive sends the event. */
  consumerQueues: 'CONSUMER_QUEUES',
  /** JSON `[{ "url", "consumer"?, "rule" }]`: every rule DLQ, and each consumer's queue's DLQ. */
  deadLetterQueues: 'DEAD_LETTER_QUEUES',
} as const;

/** The ops function's settings beyond the database (which `parseConfig` reads). */
export interface OpsConfig {
  readonly inboxTable: string;
  readonly alarmPrefix: string;
  readonly alarmNames: readonly string[];
  readonly relayFunctionName: string;
  readonly consumerQueues: Readonly<Record<ConsumerName, string>>;
  readonly deadLetterQueues: readonly DeadLetterQueueRef[];
}

/** One of `names`: a consumer of the topology the function was built with. */
const consumerNameOf = (names: readonly [ConsumerName, ...ConsumerName[]]) => z.enum(names);
const functionName = z.string().regex(/^[\w:.-]{1,170}$/, 'must be a Lambda function name or ARN');

/** `CONSUMER_QUEUES`: each consumer's queue URL, as JSON; read by the ops API and the delivery audit (their re-sends). */
export const consumerQueuesVariable = (names: readonly [ConsumerName, ...ConsumerName[]]) =>
  jsonVariable(
    z
      .record(consumerNameOf(names), z.url())
      .refine((m) => names.every((c) => c in m), 'must name a queue for every consumer'),
  );

const schemaOf = (names: readonly [ConsumerName, ...ConsumerName[]]) =>
  z.object({
    [opsEnv.inboxTable]: z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name'),
    [opsEnv.alarmPrefix]: z.string().min(1).max(200),
    [opsEnv.alarms]: jsonVariable(z.array(z.string().min(1).max(255)).max(100, 'at most 100 alarms')),
    [opsEnv.relayFunction]: functionName,
    [opsEnv.consumerQueues]: consumerQueuesVariable(names),
    [opsEnv.deadLetterQueues]: blankIsUnset(
      jsonVariable(
        z.array(
          z.strictObject({
            url: z.url(),
            consumer: consumerNameOf(names).optional(),
            rule: z.string().min(1).max(128),
          }),
        ),
      ),
    ),
  });

/**
 * Parses the ops function's environment for a pipeline of the consumers `names`; throws
 * PipelineError CONFIG naming every bad variable.
 */
export function parseOpsConfig(
  names: readonly [ConsumerName, ...ConsumerName[]],
  env: Readonly<Record<string, string | undefined>> = process.env,
): OpsConfig {
  const e = parseEnvironment(schemaOf(names), env, 'ops configuration') as Record<string, unknown>;
  return {
    inboxTable: e[opsEnv.inboxTable] as string,
    alarmPrefix: e[opsEnv.alarmPrefix] as string,
    alarmNames: e[opsEnv.alarms] as string[],
    relayFunctionName: e[opsEnv.relayFunction] as string,
    consumerQueues: e[opsEnv.consumerQueues] as Record<ConsumerName, string>,
    deadLetterQueues: (e[opsEnv.deadLetterQueues] as DeadLetterQueueRef[] | undefined) ?? [],
  };
}
