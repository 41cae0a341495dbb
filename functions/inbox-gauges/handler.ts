import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { CloudWatchClient, DescribeAlarmsCommand } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import * as z from 'zod';
import { consumerEnv, inboxGaugesServiceName } from '../../shared/consumers/contract';
import { blankIsUnset, jsonVariable, parseEnvironment } from '../../shared/env';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { emitInboxGauges } from '../../shared/inbox/inbox-gauges';
import { metricsNamespace } from '../../shared/outbox/relay-metrics';
import { type ConsumerName, consumerNames } from '../../shared/topology';

const consumers = consumerNames;
const env = parseEnvironment(
  z.object({
    [consumerEnv.inboxTable]: z.string().regex(/^[\w.-]{3,255}$/, 'must be a DynamoDB table name'),
    // JSON `{ "<consumer>": "<its inbox-dead alarm's name>" }`.
    INBOX_DEAD_ALARMS: blankIsUnset(jsonVariable(z.record(z.string(), z.string().min(1).max(255)))),
  }),
  process.env,
  'inbox gauges configuration',
);
const inbox = new DynamoInboxStore(new DynamoDBClient({}), {
  tableName: env[consumerEnv.inboxTable] as string,
});
const metrics = new Metrics({ namespace: metricsNamespace, serviceName: inboxGaugesServiceName });
const logger = new Logger({ serviceName: inboxGaugesServiceName });
const alarms = env.INBOX_DEAD_ALARMS as Record<string, string> | undefined;
const cloudwatch = new CloudWatchClient({});

/** The consumers whose inbox-dead alarm is OK now; undefined (send every gauge) when that cannot be read. */
async function okAlarms(): Promise<ReadonlySet<ConsumerName> | undefined> {
  if (!alarms) return undefined;
  try {
    const out = await cloudwatch.send(new DescribeAlarmsCommand({ AlarmNames: Object.values(alarms) }));
    const ok = new Set((out.MetricAlarms ?? []).filter((a) => a.StateValue === 'OK').map((a) => a.AlarmName));
    return new Set(consumers.filter((c) => alarms[c] !== undefined && ok.has(alarms[c])));
  } catch (err) {
    logger.warn('cannot read the inbox-dead alarms; sending every gauge', { error: err });
    return undefined;
  }
}

/** The inbox gauges Lambda (every `topology.alarms.gaugePeriodSeconds`): DEAD records per consumer. */
export const handler = () => emitInboxGauges({ inbox, metrics, consumers, okAlarms });
