import type { LambdaClient } from '@aws-sdk/client-lambda';
import { invokeAsync } from '../../../aws/invoke-async';
import type { ConsumerName } from '../../../topology';
import type { ConsumerRedelivery } from '../../ops-ports';

/**
 * Re-sends a stored event to a consumer function as EventBridge would: one asynchronous
 * invoke, so Lambda's retries and the consumer retries apply as to any delivery.
 */
export class LambdaRedelivery implements ConsumerRedelivery {
  constructor(
    private readonly lambda: LambdaClient,
    private readonly functionNames: Readonly<Record<ConsumerName, string>>,
  ) {}

  redeliver(consumer: ConsumerName, event: unknown): Promise<void> {
    return invokeAsync(this.lambda, this.functionNames[consumer], event);
  }
}
