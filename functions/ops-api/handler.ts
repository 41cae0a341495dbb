import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import { functionIdentity } from '../../shared/aws/function-identity';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { createSqlClient, parseConfig } from '../../shared/config';
import { DynamoInboxOps } from '../../shared/inbox/dynamo-inbox-ops';
import { DynamoInboxStore } from '../../shared/inbox/dynamo-inbox-store';
import { CloudWatchHealth } from '../../shared/ops/adapters/aws/cloudwatch-health';
import { SqsDeadLetters } from '../../shared/ops/adapters/aws/sqs-dead-letters';
import { SqsRedelivery } from '../../shared/ops/adapters/aws/sqs-redelivery';
import { createOpsApi } from '../../shared/ops/ops-api';
import { parseOpsConfig } from '../../shared/ops/ops-config';
import { LambdaRelayNudger } from '../../shared/tasks/relay-nudger';
import { topology } from '../topology';

// Module scope: a bad environment fails the cold start; clients are built once per container.
const config = parseConfig();
const ops = parseOpsConfig(topology.consumerNames);
const logger = new Logger({ serviceName: 'ops-api' });
const lambda = new LambdaClient(sdkClientConfig());
const sqs = new SQSClient(sdkClientConfig());
const redelivery = new SqsRedelivery(sqs, ops.consumerQueues);
const dynamo = new DynamoDBClient(sdkClientConfig('item'));
const inboxTable = { tableName: ops.inboxTable, openIndexShards: topology.inbox.openIndexShards };

/** The ops API Lambda (API Gateway REST proxy, IAM-authorized): only wiring; the routes live in `createOpsApi`. */
export const handler = withInvocationDeadline(
  createOpsApi({
    topology,
    db: createSqlClient(config, 'ops'),
    inbox: new DynamoInboxOps(dynamo, inboxTable),
    inboxStore: new DynamoInboxStore(dynamo, inboxTable),
    deadLetters: new SqsDeadLetters(sqs, ops.deadLetterQueues, redelivery),
    redelivery,
    health: new CloudWatchHealth(new CloudWatchClient(sdkClientConfig()), {
      alarmPrefix: ops.alarmPrefix,
      alarmNames: ops.alarmNames,
      relayFunctionName: ops.relayFunctionName,
    }),
    nudger: new LambdaRelayNudger({ client: lambda, functionName: ops.relayFunctionName }),
    // The stack's bus is in this function's account and Region.
    bus: functionIdentity,
    logger,
  }).use(injectLambdaContext(logger, { resetKeys: true })),
);
