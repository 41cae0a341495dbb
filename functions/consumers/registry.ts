import { consumerRegistry } from '../../shared/consumers/define-consumer';
import { archive } from './archive/consumer';
import { index } from './index/consumer';
import { notify } from './notify/consumer';

/**
 * Every consumer, each declared in its own folder. The topology (its rules' targets and the
 * consumers' policies) is built from this list; the order is the rules' target order.
 */
export const consumers = consumerRegistry([index, notify, archive]);
