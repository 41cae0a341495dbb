import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SQSClient } from '@aws-sdk/client-sqs';
import middy from '@middy/core';
import * as z from 'zod';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { SqsRetryPorts } from '../../shared/consumers/adapters/aws/sqs-retry-ports';
import { consumerRetriesEnv, consumerRetriesServiceName } from '../../shared/consumers/contract';
import { createConsumerRetries } from '../../shared/consumers/retries';
import { jsonVariable, parseEnvironment } from '../../shared/env';
import { type ConsumerName, consumerNames } from '../../shared/topology';

// Validated at module load: a bad deploy fails on cold start.
const env = parseEnvironment(
  z.object({
    [consumerRetriesEnv.retryQueueUrl]: z.url(),
    [consumerRetriesEnv.deadLetterQueueUrl]: z.url(),
    [consumerRetriesEnv.consumerFunctions]: jsonVariable(
      z
        .record(z.enum(consumerNames), z.string().regex(/^[\w-]{1,64}$/, 'must be a function name'))
        .refine((m) => consumerNames.every((c) => c in m), 'must name a function for every consumer'),
    ),
  }),
  process.env,
  'consumer retries configuration',
);
const logger = new Logger({ serviceName: consumerRetriesServiceName });

/** The consumer retries Lambda: the retry queue's event source mapping hands it Lambda's on-failure records. */
export const handler = withInvocationDeadline(
  middy(
    createConsumerRetries({
      ports: new SqsRetryPorts(new SQSClient(sdkClientConfig()), new LambdaClient(sdkClientConfig()), {
        retryQueueUrl: env[consumerRetriesEnv.retryQueueUrl],
        deadLetterQueueUrl: env[consumerRetriesEnv.deadLetterQueueUrl],
      }),
      consumerFunctions: env[consumerRetriesEnv.consumerFunctions] as Record<ConsumerName, string>,
      logger,
    }),
  ).use(injectLambdaContext(logger)),
);
