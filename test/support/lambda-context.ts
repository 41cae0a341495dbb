import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';

/** A Lambda context for function `name` with 30 s left, as the runtime hands one to a handler. */
export const lambdaContext = (name: string, awsRequestId: string = randomUUID()): Context =>
  ({
    awsRequestId,
    functionName: name,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${name}`,
    memoryLimitInMB: '256',
    logGroupName: `/aws/lambda/${name}`,
    logStreamName: 'stream',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 30_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  }) as Context;
