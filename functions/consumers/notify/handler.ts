import { createConsumerHandler } from '../../../shared/consumers/consumer';
import { buildConsumerDeps } from '../../../shared/consumers/consumer-deps';

// Module scope: a bad environment fails the cold start, and clients are built once per container.
const deps = buildConsumerDeps('notify');

/** The notify consumer Lambda: tells the assignee (SNS) that their content was approved. */
export const handler = createConsumerHandler(deps);
