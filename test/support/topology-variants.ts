import { topology, topologyWith } from '../../functions/topology';
import type { ConsumerDefinition } from '../../shared/consumers/define-consumer';
import type { Topology } from '../../shared/topology';

/**
 * The project's consumers with `added` among them, in the registry's order and then `added`'s.
 * A consumer of the project's with the name of one added gives way to it: the fixture consumer
 * copied into `functions/consumers/` and registered is the same consumer, so a variant that adds
 * the fixture is the same pipeline either way.
 */
export function registryWith(...added: readonly ConsumerDefinition[]): readonly ConsumerDefinition[] {
  const names = new Set(added.map((c) => c.name));
  return [...topology.registry.filter((c) => !names.has(c.name)), ...added];
}

/** The project's topology with `added` among its consumers (see {@link registryWith}). */
export function topologyAdding(...added: readonly ConsumerDefinition[]): Topology {
  return topologyWith(registryWith(...added));
}
