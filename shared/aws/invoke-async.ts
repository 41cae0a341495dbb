import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';

/** An asynchronous invoke Lambda did not accept; the SDK error travels as `cause`. */
export class AsyncInvokeError extends Error {
  override readonly name = 'AsyncInvokeError';
}

/**
 * Queues one asynchronous (`Event`) invocation of `functionName` with `payload` as its JSON
 * event. Resolves only once Lambda accepted it (202): from then on Lambda owns the delivery,
 * with its own retries and on-failure destination.
 */
export async function invokeAsync(
  client: LambdaClient,
  functionName: string,
  payload: unknown,
): Promise<void> {
  let statusCode: number | undefined;
  try {
    const out = await client.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(payload)),
      }),
    );
    statusCode = out.StatusCode;
  } catch (err) {
    throw new AsyncInvokeError(`invoking ${functionName} failed`, { cause: err });
  }
  if (statusCode !== 202) {
    throw new AsyncInvokeError(`invoking ${functionName} answered status ${statusCode ?? 'none'}`);
  }
}
